"""Property tests of the training estimate: monotone in hardware, consistent identities."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfcast.catalog.models import load_model
from perfcast.catalog.systems import load_system
from perfcast.estimate.training import estimate_training
from perfcast.specs import Strategy, Workload

MODEL = load_model("llama-3-8b")
SYSTEM = load_system("dgx-h100")

configs = st.fixed_dictionaries({
    "tp": st.sampled_from([1, 2, 8]),
    "pp": st.sampled_from([1, 2, 4]),
    "dp": st.sampled_from([1, 2, 8]),
    "recompute": st.sampled_from(["none", "selective", "full"]),
    "fsdp": st.booleans(),
    "factor": st.sampled_from([1.5, 2.0, 4.0]),
})


def _report(cfg, system=SYSTEM):
    strategy = Strategy(num_gpus=cfg["tp"] * cfg["pp"] * cfg["dp"], tp=cfg["tp"], pp=cfg["pp"],
                        recompute=cfg["recompute"], fsdp=cfg["fsdp"],
                        sequence_parallel=cfg["tp"] > 1)
    workload = Workload(seq_length=4096, global_batch_size=cfg["dp"] * 4 * cfg["pp"])
    return estimate_training(MODEL, system.with_num_gpus(strategy.num_gpus), strategy, workload)


def _scaled_system(**gpu_or_net):
    gpu_fields = {k: v for k, v in gpu_or_net.items() if k.startswith(("peak", "hbm"))}
    sys_fields = {k: v for k, v in gpu_or_net.items() if k not in gpu_fields}
    gpu = SYSTEM.gpu.model_copy(update=gpu_fields)
    return SYSTEM.model_copy(update={"gpu": gpu, **sys_fields})


@settings(max_examples=30, deadline=None)
@given(configs)
def test_more_bandwidth_never_slower(cfg):
    base = _report(cfg).step_time_s
    f = cfg["factor"]
    faster = _scaled_system(scale_up_bandwidth_Bps=SYSTEM.scale_up_bandwidth_Bps * f,
                            scale_out_bandwidth_Bps=SYSTEM.scale_out_bandwidth_Bps * f,
                            hbm_bandwidth_Bps=SYSTEM.gpu.hbm_bandwidth_Bps * f)
    assert _report(cfg, faster).step_time_s <= base * (1 + 1e-9)


@settings(max_examples=30, deadline=None)
@given(configs)
def test_more_flops_never_slower(cfg):
    base = _report(cfg).step_time_s
    f = cfg["factor"]
    faster = _scaled_system(peak_bf16_flops=SYSTEM.gpu.peak_bf16_flops * f,
                            peak_fp16_flops=(SYSTEM.gpu.peak_fp16_flops or 0) * f or None,
                            peak_fp8_flops=SYSTEM.gpu.peak_fp8_flops * f)
    assert _report(cfg, faster).step_time_s <= base * (1 + 1e-9)


@settings(max_examples=30, deadline=None)
@given(configs)
def test_breakdown_sums_and_token_identity(cfg):
    report = _report(cfg)
    assert report.breakdown.total_s == pytest.approx(report.step_time_s, rel=1e-9)
    assert all(v >= 0 for v in report.breakdown.to_dict().values())
    tokens = report.tokens_per_s_per_gpu * report.num_gpus * report.step_time_s
    assert tokens == pytest.approx(report.tokens_per_step, rel=1e-9)
    st = report.strategy
    assert st.tp * st.pp * st.dp * st.cp == report.num_gpus


def test_fp8_faster_than_bf16_for_large_model():
    cfg = {"tp": 8, "pp": 1, "dp": 1, "recompute": "none", "fsdp": False}
    model = load_model("llama-3.1-70b")
    workload = Workload(seq_length=4096, global_batch_size=8)
    reports = {}
    for precision in ("bf16", "fp8"):
        strategy = Strategy(num_gpus=8, tp=cfg["tp"], precision=precision, sequence_parallel=True)
        reports[precision] = estimate_training(model, SYSTEM.with_num_gpus(8), strategy, workload)
    assert reports["fp8"].step_time_s < reports["bf16"].step_time_s
