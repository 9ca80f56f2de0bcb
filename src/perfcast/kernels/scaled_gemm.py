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

from collections.abc import Mapping
from typing import Final

from perfcast.kernels.backend import KernelBackend
from perfcast.specs.hardware import Precision
from perfcast.specs.strategy import FP8Recipe

SCALED_GEMM_KERNEL: Final[Mapping[FP8Recipe, str]] = {"rowwise": "rowwise",
                                                      "rowwise-hp-wgrad": "rowwise"}
"""FP8 recipe -> its scaled-matmul kernel class (a key of ``attention_kernels.yaml``
``scaled_gemm``) when that differs from the calibrated one."""


def scaled_gemm_time_ratio(backend: KernelBackend, recipe: FP8Recipe | None,
                           precision: Precision) -> float:
    """Time ratio of an FP8 GEMM of ``recipe`` over the calibrated FP8 GEMM (module
    docstring): 1 for 16-bit GEMMs, recipes on the calibrated kernel, and calibrations without
    the class (``backend.attention_kernels``, ``KernelBackend``)."""
    kernel = SCALED_GEMM_KERNEL.get(recipe) if recipe is not None else None
    if precision != "fp8" or kernel is None:
        return 1.0
    entry = backend.attention_kernels.scaled_gemm.get(kernel)
    return entry.time_ratio if entry is not None else 1.0
