"""The per-generation Triton/FA2 time ratio as a fitted parameter (``fit_training``)."""

from __future__ import annotations

import pytest

from perfcast.calibration.bundle import load_calibration
from perfcast.catalog import load_system
from perfcast.kernels.roofline import RooflineBackend
from perfcast.validate.fit_training import grid_parameters, ratio_name

SHAPE = (1, 16, 65536, 65536, 128, 128, True)  # batch, heads, s_q, s_kv, d_qk, d_v, causal
H100 = load_system("dgx-h100").gpu
A100 = load_system("dgx-a100").gpu


def _parameter(name: str):
    return next(p for p in grid_parameters(load_calibration()) if p.name == name)


def test_fit_has_a_shared_and_a_hopper_triton_ratio():
    names = [p.name for p in grid_parameters(load_calibration())]
    assert ratio_name("triton") == "attention_time_ratio[triton]" and ratio_name("triton") in names
    assert ratio_name("triton", "hopper") == "attention_time_ratio[triton|hopper]"
    assert ratio_name("triton", "hopper") in names
    assert len(names) == len(set(names))


@pytest.mark.parametrize("name, moved, kept", [
    (ratio_name("triton", "hopper"), H100, A100),
    (ratio_name("triton"), A100, H100),
])
def test_each_ratio_moves_only_its_generations_attention(name, moved, kept):
    base = load_calibration()
    trial = _parameter(name).apply(base, 2.5)

    def time_s(gpu, calibration) -> float:
        backend = RooflineBackend(attention_kernels=calibration.attention_kernels)
        return float(backend.attention_time_s(gpu, *SHAPE, False, kernel="triton"))

    fa2 = float(RooflineBackend().attention_time_s(moved, *SHAPE, False, kernel="fa2"))
    assert time_s(moved, trial) == pytest.approx(2.5 * fa2, rel=1e-12)
    assert time_s(kept, trial) == pytest.approx(time_s(kept, base), rel=1e-12)


def test_ratio_prior_is_the_middle_of_the_fa2_paper_range():
    """FA2 paper §4.1: FA2 is 1.3-2.5x faster than the Triton kernel on A100; a fold without
    any Triton row keeps the ratio at that range's middle (the grid's centre)."""
    from perfcast.validate.fit_training import RATIO_GRID, RATIO_PRIOR

    assert RATIO_PRIOR == pytest.approx((1.3 + 2.5) / 2)
    parameter = _parameter(ratio_name("triton", "hopper"))
    assert parameter.centre == RATIO_PRIOR == RATIO_GRID[len(RATIO_GRID) // 2]
    assert parameter.low == 1.0 and parameter.high >= 2.5
