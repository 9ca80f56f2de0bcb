"""Roofline kernel backend: FLOP identities, monotonicity, shape effects, arrays, golden rows."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfcast.calibration.kernel_roofline import load_kernel_roofline
from perfcast.errors import InputError
from perfcast.kernels import KernelBackend, KernelBackendName, backend_names, get_backend
from perfcast.kernels.roofline import RooflineBackend
from perfcast.op_counts import (
    attention_bytes,
    attention_flops,
    causal_fraction,
    gemm_bytes,
    gemm_flops,
)
from perfcast.specs import GPUSpec

# Hand-built GPUs (no catalog): peaks and HBM from shared/reference/hardware_specs.csv.
A100_SXM = GPUSpec(name="a100-sxm-test", display_name="A100 SXM4 80GB", vendor="nvidia",
                   generation="ampere", peak_bf16_flops=312e12, hbm_capacity_bytes=80e9,
                   hbm_bandwidth_Bps=2.039e12, source="test")
A100_PCIE = A100_SXM.model_copy(update={"name": "a100-pcie-test", "hbm_bandwidth_Bps": 1.935e12})
H100_SXM = GPUSpec(name="h100-sxm-test", display_name="H100 SXM5 80GB", vendor="nvidia",
                   generation="hopper", peak_bf16_flops=989e12, peak_fp8_flops=1979e12,
                   hbm_capacity_bytes=80e9, hbm_bandwidth_Bps=3.35e12, source="test")

BACKEND = get_backend(KernelBackendName.ROOFLINE)

dims = st.integers(min_value=1, max_value=65536)
scales = st.floats(min_value=0.05, max_value=20.0)


# --- FLOP and byte identities ---------------------------------------------------------------

def test_gemm_flops_is_2mnk_batch():
    assert gemm_flops(3, 5, 7) == 2 * 3 * 5 * 7
    assert gemm_flops(4096, 8192, 1024, batch=8) == 2 * 4096 * 8192 * 1024 * 8


def test_gemm_bytes_reads_a_b_writes_c():
    assert gemm_bytes(2, 3, 4, precision="bf16") == (2 * 4 + 4 * 3) * 2 + 2 * 3 * 2
    # FP8 inputs (1 byte) with a BF16 output (2 bytes), two groups.
    assert gemm_bytes(2, 3, 4, batch=2, precision="fp8") == 2 * ((2 * 4 + 4 * 3) + 2 * 3 * 2)


def test_attention_flops_match_flash_attention_benchmark():
    b, h, s, d = 2, 16, 4096, 128
    full = 4 * b * h * s * s * d  # Dao-AILab benchmark_flash_attention.py flops()
    assert attention_flops(b, h, s, s, d, d, False, False) == pytest.approx(full)
    assert attention_flops(b, h, s, s, d, d, True, False) == pytest.approx(full / 2)
    assert attention_flops(b, h, s, s, d, d, True, True) == pytest.approx(2.5 * full / 2)
    # MLA-like head dims: 2·b·h·sq·skv·(d_qk + d_v).
    assert attention_flops(1, 1, 10, 20, 192, 128, False, False) == 2 * 10 * 20 * (192 + 128)


def test_causal_fraction_limits():
    assert causal_fraction(4096, 4096) == pytest.approx(0.5)
    assert causal_fraction(1, 8192) == pytest.approx(1 - 1 / 16384)
    assert causal_fraction(1024, 4096) == pytest.approx(1 - 1024 / 8192)


def test_attention_bytes_gqa_and_backward():
    fwd = attention_bytes(1, 32, 8, 1, 1000, 128, 128, False, "bf16")
    assert fwd == pytest.approx((32 * 1 * 256 + 8 * 1000 * 256) * 2)
    assert attention_bytes(1, 32, 8, 1, 1000, 128, 128, True, "bf16") == pytest.approx(2 * fwd)


# --- monotonicity (property tests) ----------------------------------------------------------

@settings(max_examples=80, deadline=None)
@given(dims, dims, dims, scales, scales, st.sampled_from(["bf16", "fp8"]))
def test_gemm_time_never_rises_with_peak_flops(m, n, k, f1, f2, precision):
    lo, hi = sorted((f1, f2))
    field = f"peak_{precision}_flops"
    base = getattr(H100_SXM, field)
    slow = H100_SXM.model_copy(update={field: base * lo})
    fast = H100_SXM.model_copy(update={field: base * hi})
    assert BACKEND.gemm_time_s(fast, m, n, k, precision=precision) <= (
        BACKEND.gemm_time_s(slow, m, n, k, precision=precision) * (1 + 1e-12))


@settings(max_examples=80, deadline=None)
@given(dims, dims, dims, scales, scales)
def test_gemm_time_never_rises_with_hbm_bandwidth(m, n, k, f1, f2):
    lo, hi = sorted((f1, f2))
    slow = A100_SXM.model_copy(update={"hbm_bandwidth_Bps": A100_SXM.hbm_bandwidth_Bps * lo})
    fast = A100_SXM.model_copy(update={"hbm_bandwidth_Bps": A100_SXM.hbm_bandwidth_Bps * hi})
    assert BACKEND.gemm_time_s(fast, m, n, k) <= BACKEND.gemm_time_s(slow, m, n, k) * (1 + 1e-12)


attention_shapes = st.tuples(
    st.integers(1, 64), st.integers(1, 128), st.integers(1, 32768), st.integers(1, 32768),
    st.sampled_from([64, 96, 128, 192, 256]), st.booleans(), st.booleans(),
)


@settings(max_examples=80, deadline=None)
@given(attention_shapes, scales, scales, st.sampled_from(["peak_bf16_flops",
                                                          "hbm_bandwidth_Bps"]))
def test_attention_time_never_rises_with_peak_or_bandwidth(shape, f1, f2, field):
    b, h, sq, skv, d, causal, backward = shape
    lo, hi = sorted((f1, f2))
    slow = H100_SXM.model_copy(update={field: getattr(H100_SXM, field) * lo})
    fast = H100_SXM.model_copy(update={field: getattr(H100_SXM, field) * hi})
    args = (b, h, sq, skv, d, d, causal, backward)
    assert BACKEND.attention_time_s(fast, *args) <= (
        BACKEND.attention_time_s(slow, *args) * (1 + 1e-12))


@settings(max_examples=50, deadline=None)
@given(st.floats(min_value=0, max_value=1e12), scales, scales)
def test_memory_bound_time_never_rises_with_bandwidth(num_bytes, f1, f2):
    lo, hi = sorted((f1, f2))
    slow = H100_SXM.model_copy(update={"hbm_bandwidth_Bps": 3.35e12 * lo})
    fast = H100_SXM.model_copy(update={"hbm_bandwidth_Bps": 3.35e12 * hi})
    assert BACKEND.memory_bound_time_s(fast, num_bytes) <= (
        BACKEND.memory_bound_time_s(slow, num_bytes) * (1 + 1e-12))


# --- shape effects ---------------------------------------------------------------------------

@pytest.mark.parametrize("gpu", [A100_SXM, H100_SXM], ids=["a100", "h100"])
def test_small_gemms_reach_less_of_peak_than_large(gpu):
    sizes = np.array([256, 512, 1024, 2048, 4096, 8192])
    achieved = gemm_flops(sizes, sizes, sizes) / BACKEND.gemm_time_s(gpu, sizes, sizes, sizes)
    assert np.all(np.diff(achieved) > 0)
    assert achieved[0] < 0.1 * gpu.peak_bf16_flops
    assert achieved[-1] > 0.7 * gpu.peak_bf16_flops


def test_fp8_is_faster_than_bf16_for_large_gemms_on_hopper():
    bf16 = BACKEND.gemm_time_s(H100_SXM, 8192, 8192, 8192, precision="bf16")
    fp8 = BACKEND.gemm_time_s(H100_SXM, 8192, 8192, 8192, precision="fp8")
    assert fp8 < 0.75 * bf16


def test_fp8_gemm_on_a_gpu_without_fp8_names_the_gpu():
    with pytest.raises(ValueError, match="a100-sxm-test"):
        BACKEND.gemm_time_s(A100_SXM, 4096, 4096, 4096, precision="fp8")


def test_decode_attention_is_memory_bound_and_gqa_reads_less():
    params = BACKEND.params(H100_SXM)
    kv_bytes = 2 * 32 * 32768 * 128 * 2
    mha = BACKEND.attention_time_s(H100_SXM, 1, 32, 1, 32768, 128, 128, True, False)
    expected = (kv_bytes + 2 * 32 * 128 * 2) / (3.35e12 * params.hbm_efficiency.value)
    assert mha == pytest.approx(expected + params.launch_overhead_s.value)
    gqa = BACKEND.attention_time_s(H100_SXM, 1, 32, 1, 32768, 128, 128, True, False,
                                   num_kv_heads=8)
    assert gqa < 0.3 * mha


def test_long_sequences_and_large_heads_are_more_efficient():
    def achieved(seq, d):
        return attention_flops(1, 16, seq, seq, d, d, False, False) / BACKEND.attention_time_s(
            H100_SXM, 1, 16, seq, seq, d, d, False, False)
    assert achieved(512, 128) < achieved(8192, 128)
    assert achieved(8192, 64) < achieved(8192, 128) < achieved(8192, 256)


# --- arrays ----------------------------------------------------------------------------------

def test_array_inputs_match_a_scalar_loop():
    rng = np.random.default_rng(0)
    m, n, k = (rng.integers(1, 20000, size=50) for _ in range(3))
    batch = rng.integers(1, 9, size=50)
    vector = BACKEND.gemm_time_s(H100_SXM, m, n, k, batch, "fp8")
    loop = [BACKEND.gemm_time_s(H100_SXM, *args, "fp8") for args in zip(m, n, k, batch,
                                                                           strict=True)]
    np.testing.assert_allclose(vector, loop, rtol=1e-12)

    seq_q, seq_kv = rng.integers(1, 16384, size=50), rng.integers(1, 16384, size=50)
    causal = rng.random(50) < 0.5
    vector = BACKEND.attention_time_s(A100_SXM, 2, 16, seq_q, seq_kv, 128, 128, causal, True)
    loop = [BACKEND.attention_time_s(A100_SXM, 2, 16, q, kv, 128, 128, bool(c), True)
            for q, kv, c in zip(seq_q, seq_kv, causal, strict=True)]
    np.testing.assert_allclose(vector, loop, rtol=1e-12)

    sizes = rng.random(50) * 1e10
    np.testing.assert_allclose(BACKEND.memory_bound_time_s(A100_SXM, sizes),
                               [BACKEND.memory_bound_time_s(A100_SXM, s) for s in sizes])


# --- golden rows -----------------------------------------------------------------------------

# Large-GEMM rows of shared/reference/kernel_efficiency.csv (stas00/ml-engineering@744d01e
# compute/accelerator/README.md, mamf-finder best shapes): (CSV line, gpu, m, n, k, precision,
# measured TFLOP/s). Bounded: the shipped calibration must stay within 15% of each.
GOLDEN_GEMMS = [
    (3, A100_SXM, 1024, 10240, 5120, "bf16", 271.2),
    (5, A100_PCIE, 2048, 5120, 6144, "bf16", 252.9),
    (6, H100_SXM, 2048, 2048, 13312, "bf16", 794.5),
    (21, H100_SXM, 1024, 9216, 14336, "fp8", 1402.6),
]


@pytest.mark.parametrize("line, gpu, m, n, k, precision, measured_tflops", GOLDEN_GEMMS,
                         ids=[f"line{g[0]}" for g in GOLDEN_GEMMS])
def test_large_gemm_tflops_within_15_percent(line, gpu, m, n, k, precision, measured_tflops):
    predicted = gemm_flops(m, n, k) / BACKEND.gemm_time_s(gpu, m, n, k, precision=precision)
    assert predicted / 1e12 == pytest.approx(measured_tflops, rel=0.15), f"CSV line {line}"


# --- registry and calibration ----------------------------------------------------------------

def test_registry_returns_a_shared_roofline_backend():
    assert backend_names() == ["roofline", "analytical", "measured"]
    backend = get_backend("roofline")
    assert backend is BACKEND
    assert isinstance(backend, KernelBackend)
    assert isinstance(backend, RooflineBackend)


def test_unknown_backend_names_the_value_and_choices():
    with pytest.raises(InputError, match="'tiles'.*roofline"):
        get_backend("tiles")


def test_calibration_covers_generations_with_sources():
    calibration = load_kernel_roofline()
    assert calibration.generated_by == "tools/fit_kernel_roofline.py"
    for gen in ("ampere", "hopper", "blackwell", "blackwell-ultra", "cdna3", "cdna4"):
        assert not calibration.uses_default(gen)
        block = calibration.for_generation(gen)
        assert block.gemm["bf16"].source_rows
        assert block.hbm_efficiency.method in ("fitted", "transferred", "default")
    assert calibration.uses_default("volta")
    assert calibration.for_generation("volta") is calibration.generations["default"]


def test_cdna3_gemm_efficiency_reflects_clock_throttling():
    calibration = load_kernel_roofline()
    cdna3 = calibration.for_generation("cdna3").gemm["bf16"].eff_max
    hopper = calibration.for_generation("hopper").gemm["bf16"].eff_max
    assert cdna3 < 0.7 * hopper
    assert calibration.generations["default"].gemm["bf16"].eff_max <= cdna3
