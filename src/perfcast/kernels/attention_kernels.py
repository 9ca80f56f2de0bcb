"""Which calibrated attention kernel a ``Strategy.attention_kernel`` class is timed with.

``auto`` (the generation's own kernel) and ``fa2`` (FlashAttention-2) have efficiency curves of
their own in each backend's calibration. Other classes are derived (``calibration/
attention_kernels.yaml``): time = time of the base class × ``time_ratio``. The FlashAttention-2
paper (Dao 2023, §4.1) measures FlashAttention-2 1.3–2.5× faster than the FlashAttention
Triton kernel on A100, the range the ``triton`` ratio is checked against. The ratio is per
GPU generation where the calibration gives one (``DerivedKernel.time_ratio_by_generation``):
on H100 the Triton tutorial attention kernel runs at or above FlashAttention-2's speed
(tritonbench, pytorch/benchmark PR #2391: 329-477 TFLOP/s forward at head dim 128, S = 512-16k;
FA2 309-372 on the same shapes in the FA3 paper's bars; shared/reference/kernel_efficiency.csv
lines 336 and 161-166), where on A100 FA2 is 1.3-2.5x faster: the A100 ratio does not carry
over to Hopper.
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

FA2_NATIVE: frozenset[str] = frozenset({"ampere", "cdna2", "cdna3", "cdna4"})
"""Generations whose own calibrated kernel (``auto``) is the FlashAttention-2 algorithm: FA3
needs Hopper's TMA and WGMMA (Shah et al. 2024, §3) and Blackwell runs cuDNN/FA4 kernels of
its own; on AMD Instinct the flash kernel is FlashAttention-2's algorithm (ROCm/flash-attention,
the FA2 port on composable_kernel FMHA, and CK's ``fmha_fwd``/``fmha_bwd``: one thread block
per query tile, online softmax, no producer/consumer warp specialization). A class timed
against FA2 (``triton``) there is timed against the generation's own curve."""


def resolve_attention_kernel(
    kernel: AttentionKernel, calibration: AttentionKernelCalibration | None = None,
    generation: str | None = None,
) -> tuple[CalibratedKernel, float]:
    """(calibrated kernel class, time multiplier on ``generation``) for ``kernel`` (shipped
    file when ``calibration`` is None)."""
    if kernel in ("auto", "fa2"):
        return kernel, 1.0
    derived = (calibration or load_attention_kernels()).derived.get(kernel)
    if derived is None:
        raise InputError("attention_kernel", kernel, "no calibration for this kernel class")
    return derived.base, derived.ratio_for(generation)


def uncalibrated_kernel_error(gpu: GPUSpec, kernel: str) -> InputError:
    """The error for a kernel class with no curves on ``gpu``'s generation."""
    return InputError("attention_kernel", kernel,
                      f"not calibrated for {gpu.generation} GPUs ({gpu.name}); use 'auto'")
