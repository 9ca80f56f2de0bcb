"""FP8 scaled-matmul kernel classes slower than the calibrated FP8 GEMM.

The kernel efficiencies (``calibration/kernel_analytical.yaml``, ``kernel_roofline.yaml``)
describe FP8 GEMMs with one scale per tensor (``torch._scaled_mm`` tensorwise, cuBLASLt /
hipBLASLt, DeepGEMM-class kernels). A recipe with one fp32 scale per row of each operand
(torchao ``Float8LinearRecipeName.ROWWISE`` and ``ROWWISE_WITH_GW_HP``) calls
``torch._scaled_mm`` with per-row scale vectors, which PyTorch dispatches to a different
kernel: on SM90 the CUTLASS ``f8f8bf16_rowwise`` kernel ported from FBGEMM (aten
``native/cuda/RowwiseScaledMM.cu``) that applies both scale vectors in its epilogue, on ROCm
hipBLASLt's vector-scale path. torchao's README records the end-to-end cost (Llama-3-8B, 8
H100, torchtitan: tensorwise +25% over BF16, rowwise +10%), and the kernel pair's time
ratio is fitted end to end on the rowwise runs (``perfcast calibrate``:
``scaled_gemm_time_ratio[rowwise]``) since shared/reference holds no kernel measurement of it.

time(rowwise GEMM) = time(calibrated FP8 GEMM, same shape) × time_ratio (≥ 1). Only GEMMs
that run in FP8 take it; the BF16 weight-gradient GEMMs of ``rowwise-hp-wgrad`` do not.
"""

from __future__ import annotations

from typing import Any, Final

from perfcast.calibration.attention_kernels import AttentionKernelCalibration

SCALED_GEMM_KERNEL: Final[dict[str, str]] = {"rowwise": "rowwise", "rowwise-hp-wgrad": "rowwise"}
"""FP8 recipe -> its scaled-matmul kernel class when that differs from the calibrated one."""


def _derived_kernels(backend: Any) -> AttentionKernelCalibration | None:
    """The derived-kernel calibration a backend carries (the roofline backend holds it; the
    analytical and measured backends wrap one), or None."""
    for _ in range(3):
        found = getattr(backend, "attention_kernels", None)
        if isinstance(found, AttentionKernelCalibration):
            return found
        backend = getattr(backend, "roofline", None) or getattr(backend, "analytical", None)
        if backend is None:
            return None
    return None


def scaled_gemm_time_ratio(backend: Any, recipe: str | None, precision: str) -> float:
    """Time ratio of an FP8 GEMM of ``recipe`` over the calibrated FP8 GEMM (module
    docstring): 1 for 16-bit GEMMs, recipes on the calibrated kernel, and backends or
    calibrations without the class."""
    kernel = SCALED_GEMM_KERNEL.get(recipe or "")
    if precision != "fp8" or kernel is None:
        return 1.0
    derived = _derived_kernels(backend)
    entry = derived.scaled_gemm.get(kernel) if derived is not None else None
    return entry.time_ratio if entry is not None else 1.0
