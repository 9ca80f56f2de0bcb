"""Which calibrated attention kernel a ``Strategy.attention_kernel`` class is timed with.

``auto`` (the generation's own kernel) and ``fa2`` (FlashAttention-2) have efficiency curves of
their own in each backend's calibration. Other classes are derived (``calibration/
attention_kernels.yaml``): time = time of the base class × ``time_ratio``. The FlashAttention-2
paper (Dao 2023, §4.1) measures FlashAttention-2 1.3–2.5× faster than the FlashAttention
Triton kernel on A100, the range the ``triton`` ratio is checked against.
"""

from __future__ import annotations

from perfcast.calibration.attention_kernels import (
    AttentionKernelCalibration,
    CalibratedKernel,
    load_attention_kernels,
)
from perfcast.errors import InputError
from perfcast.specs.hardware import GPUSpec
from perfcast.specs.strategy import AttentionKernel

FA2_NATIVE: frozenset[str] = frozenset({"ampere"})
"""Generations whose own calibrated kernel (``auto``) is FlashAttention-2: FA3 needs Hopper's
TMA and WGMMA (Shah et al. 2024, §3), Blackwell and CDNA run kernels of their own."""


def resolve_attention_kernel(
    kernel: AttentionKernel, calibration: AttentionKernelCalibration | None = None
) -> tuple[CalibratedKernel, float]:
    """(calibrated kernel class, time multiplier) for ``kernel`` (shipped file when None)."""
    if kernel in ("auto", "fa2"):
        return kernel, 1.0
    derived = (calibration or load_attention_kernels()).derived.get(kernel)
    if derived is None:
        raise InputError("attention_kernel", kernel, "no calibration for this kernel class")
    return derived.base, derived.time_ratio


def uncalibrated_kernel_error(gpu: GPUSpec, kernel: str) -> InputError:
    """The error for a kernel class with no curves on ``gpu``'s generation."""
    return InputError("attention_kernel", kernel,
                      f"not calibrated for {gpu.generation} GPUs ({gpu.name}); use 'auto'")
