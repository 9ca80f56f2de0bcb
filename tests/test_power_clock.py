"""Sustained clocks under a board-power cap (catalog.power, gpus.yaml power fields)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from perfcast.catalog.gpus import load_gpu, power_exponent
from perfcast.catalog.power import power_clock_exponent, power_limited_clock_Hz


def test_exponent_from_the_maf_clock_pair():
    # MI300X 750 W 1207 MHz, MI325X 1000 W 1447 MHz (AMD MAF blog): ln(1.199)/ln(1.333).
    assert power_clock_exponent(1207e6, 750, 1447e6, 1000) == pytest.approx(0.6304, abs=1e-4)
    assert power_exponent() == pytest.approx(0.6304, abs=1e-4)
    with pytest.raises(ValueError, match="700"):
        power_clock_exponent(1e9, 700, 1.1e9, 700)


def test_power_limited_clock_formula():
    assert power_limited_clock_Hz(1830e6, 700, 700, 0.63) == pytest.approx(1830e6)
    assert power_limited_clock_Hz(1830e6, 500, 700, 0.63) == pytest.approx(
        1830e6 * (5 / 7) ** 0.63)
    # A limit above the rating does not raise the clock.
    assert power_limited_clock_Hz(1830e6, 900, 700, 0.63) == pytest.approx(1830e6)
    limits = np.array([300.0, 500.0, 700.0])
    clocks = power_limited_clock_Hz(1830e6, limits, 700.0, 0.63)
    assert clocks.shape == (3,) and np.all(np.diff(clocks) > 0)


def test_torchtitan_h100_variant():
    """'H100 96GB HBM2e SXM' (torchtitan rows) is the 96 GB part capped at 500 W: slower matrix
    units, same HBM bandwidth (not stated for the variant), more memory."""
    full, capped = load_gpu("h100-sxm"), load_gpu("H100 96GB HBM2e SXM")
    assert capped.name == "h100-96gb-500w" and load_gpu("H100 95GB HBM2e SXM") is capped
    assert capped.power_limit_W == 500 and capped.tdp_W == full.tdp_W == 700
    assert full.power_limit_W is None
    ratio = capped.sustained_matrix_flops("bf16") / full.sustained_matrix_flops("bf16")
    assert ratio == pytest.approx((500 / 700) ** power_exponent())
    assert 0.78 < ratio < 0.84
    assert capped.hbm_bandwidth_Bps == full.hbm_bandwidth_Bps
    assert capped.hbm_capacity_bytes == 96e9
    assert "500 W" in capped.source and "Measuring Max-Achievable FLOPs" in capped.source


@pytest.mark.parametrize(("slug", "watts"), [("h100-sxm", 700), ("b200", 1000), ("gb200", 1200),
                                             ("mi300x", 750), ("mi355x", 1400)])
def test_rated_board_power(slug, watts):
    gpu = load_gpu(slug)
    assert gpu.tdp_W == watts and "board power" in gpu.source
    assert not math.isclose(gpu.sustained_matrix_flops("bf16"), 0.0)


def test_capped_gpu_forecast_says_so_and_is_slower():
    from perfcast.catalog.models import load_model
    from perfcast.catalog.systems import system_for_gpu
    from perfcast.estimate.training import estimate_training
    from perfcast.specs.strategy import Strategy
    from perfcast.specs.workload import Workload

    model, strategy = load_model("llama-3-8b"), Strategy(num_gpus=8, fsdp=True)
    workload = Workload(seq_length=8192, global_batch_size=8)
    capped = estimate_training(model, system_for_gpu("H100 96GB HBM2e SXM", num_gpus=8),
                               strategy, workload)
    full = estimate_training(model, system_for_gpu("h100-sxm", num_gpus=8), strategy, workload)
    assert capped.step_time_s > full.step_time_s
    assert capped.breakdown.compute_gemm_s > 1.15 * full.breakdown.compute_gemm_s
    assert any("capped at 500 W of 700 W" in line for line in capped.assumptions)
    assert not any("capped" in line for line in full.assumptions)


def test_unmeasured_generation_takes_the_pooled_overhead_and_says_so():
    from perfcast.calibration.training_overheads import load_training_overheads
    from perfcast.catalog.models import load_model
    from perfcast.catalog.systems import load_system
    from perfcast.estimate.training import estimate_training
    from perfcast.specs.strategy import Strategy
    from perfcast.specs.workload import Workload

    overheads = load_training_overheads()
    pooled = overheads.for_generation("cdna4").compute_overhead_fraction
    fitted = [overheads.for_generation(g).compute_overhead_fraction
              for g in ("ampere", "hopper", "blackwell")]
    assert overheads.is_fallback("cdna4") and not overheads.is_fallback("hopper")
    assert min(fitted) <= pooled <= max(fitted) and pooled > 0
    report = estimate_training(load_model("llama-3-8b"), load_system("mi355x-8"),
                               Strategy(num_gpus=8), Workload(seq_length=4096, global_batch_size=8))
    assert report.breakdown.other_s > 0
    assert any("pooled fit" in line and "fallback" in line for line in report.assumptions)
    assert report.to_dict()["calibration"] == {
        "generation": "cdna4", "fallback": True,
        "stand_ins": ["attention kernel constants (no attention rows: every knob from cdna3 "
                      "(fallback))",
                      "scale-up collective efficiency (comm_alpha_beta.yaml 'default')"]}
    hopper = estimate_training(load_model("llama-3-8b"), load_system("dgx-h100"),
                               Strategy(num_gpus=8), Workload(seq_length=4096, global_batch_size=8))
    assert hopper.to_dict()["calibration"] == {"generation": "hopper", "fallback": False,
                                               "stand_ins": []}


def test_torchtitan_cluster_system():
    from perfcast.catalog.systems import load_system, system_for_gpu

    system = system_for_gpu("H100 96GB HBM2e SXM (500W power limit)", num_gpus=64)
    assert system.name == "grand-teton-h100-500w" and system.gpu.power_limit_W == 500
    assert load_system("Grand Teton").gpu.name == "h100-96gb-500w"
    assert system.scale_up_bandwidth_Bps == load_system("dgx-h100").scale_up_bandwidth_Bps
