"""Roofline kernel backend: max(compute, memory) at fitted achievable efficiencies + launch.

t = max(F / (P·eff_c), B / (BW_hbm·eff_hbm)) + t_launch (Williams, Waterman, Patterson,
*Roofline*, CACM 2009), where

* F, B are the kernel's FLOPs and compulsory HBM bytes (``op_counts``);
* P is the GPU's dense peak for the precision (``GPUSpec.peak_flops``), scaled by a
  ``--gpu-clock-mhz`` override (``GPUSpec.compute_clock_scale``);
* eff_c is the GEMM or attention efficiency curve (``kernels.efficiency``) whose parameters,
  with eff_hbm and t_launch, come per GPU generation from ``calibration/kernel_roofline.yaml``
  (fitted by ``tools/fit_kernel_roofline.py``). A generation without its own block gets the
  conservative ``default`` block; ``RooflineBackend.uses_default(gpu)`` reports it.

It knows nothing of tiles or waves; that is the analytical backend's job.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from perfcast.arrays import Bools, Floats
from perfcast.calibration.attention_kernels import (
    AttentionKernelCalibration,
    CalibratedKernel,
    load_attention_kernels,
)
from perfcast.calibration.kernel_roofline import (
    GEMM_CLASS,
    AttentionEfficiency,
    GenerationKernelCalibration,
    KernelRooflineCalibration,
    load_kernel_roofline,
)
from perfcast.kernels.attention_kernels import (
    FA2_NATIVE,
    resolve_attention_kernel,
    uncalibrated_kernel_error,
)
from perfcast.kernels.backend import KernelBackendName
from perfcast.kernels.efficiency import (
    attention_roofline_time_s,
    gemm_roofline_time_s,
    memory_time_s,
)
from perfcast.op_counts import (
    attention_bytes,
    attention_flops,
    attention_keys_per_query,
    gemm_bytes,
    gemm_flops,
)
from perfcast.specs.hardware import GPUSpec, Precision
from perfcast.specs.strategy import AttentionKernel

ATTENTION_16BIT_PEAK: Precision = "bf16"
"""Flash attention runs its matmuls in 16-bit unless an FP8 forward is calibrated (FA2/FA3 and
cuDNN fused attention take fp16/bf16 inputs; FP8 only in FA3/cuDNN forward)."""


@dataclass(frozen=True)
class RooflineBackend:
    """Roofline kernel times with per-generation calibration (shipped file by default)."""

    calibration: KernelRooflineCalibration = field(default_factory=load_kernel_roofline)
    attention_kernels: AttentionKernelCalibration = field(default_factory=load_attention_kernels)
    """Derived attention-kernel classes (``calibration/attention_kernels.yaml``)."""
    name: KernelBackendName = KernelBackendName.ROOFLINE

    @property
    def roofline_layer(self) -> RooflineBackend:
        """The roofline backend whose per-generation parameters the serving formulas take
        (``estimate.inference_kernels.roofline_params``): this one."""
        return self

    def with_attention_kernels(self, kernels: AttentionKernelCalibration) -> RooflineBackend:
        """This backend with derived kernel classes ``kernels`` (``KernelBackend``)."""
        return self if kernels == self.attention_kernels else replace(
            self, attention_kernels=kernels)

    def params(self, gpu: GPUSpec) -> GenerationKernelCalibration:
        """The calibration block used for ``gpu`` (its generation's, else ``default``)."""
        return self.calibration.for_generation(gpu.generation)

    def uses_default(self, gpu: GPUSpec) -> bool:
        """True when ``gpu``'s generation is not calibrated and the default block is used."""
        return self.calibration.uses_default(gpu.generation)

    def transferred_parts(self, gpu: GPUSpec) -> tuple[str, ...]:
        """Kernel constants ``gpu``'s generation took from another generation (provenance
        ``transferred``, ``calibration/kernel_roofline.yaml``): the attention blocks, the
        BF16 GEMM curve and the HBM efficiency (the per-kernel launch gap is one constant for
        every generation, and FP8/FP4 curves matter only where used: not listed). Empty for
        a generation without a block (``uses_default`` covers that)."""
        if self.calibration.uses_default(gpu.generation):
            return ()
        block = self.params(gpu)
        parts = (("attention forward", block.attention_forward),
                 ("attention backward", block.attention_backward),
                 ("BF16 GEMM", block.gemm.get("bf16")),
                 ("HBM efficiency", block.hbm_efficiency))
        return tuple(f"{name} constants ({part.note or 'from another generation'})"
                     for name, part in parts
                     if part is not None and part.method == "transferred")

    def gemm_time_s(
        self,
        gpu: GPUSpec,
        m: Floats,
        n: Floats,
        k: Floats,
        batch: Floats = 1,
        precision: Precision = "bf16",
        *,
        gemm_pass: str | None = None,
        grouped: bool = False,
    ) -> Floats:
        """``batch`` GEMMs C[m,n] = A[m,k]·B[k,n], seconds (every pass alike: ``gemm_pass``
        is accepted and not used; so is ``grouped``: the roofline curves have no grouped-GEMM
        efficiency, a grouped kernel is timed as ``batch`` dense GEMMs).

        t = max(2mnk·batch / (P_prec·eff_gemm(F)), bytes/(BW·eff_hbm)) + t_launch, with
        eff_gemm(F) = eff_max·F/(F + F_half) for the precision's class (``GEMM_CLASS``: 16-bit
        and wider use the bf16 curve, 8-bit and narrower the fp8 curve) at the GPU's own peak
        for ``precision`` (raises ``ValueError`` naming the GPU if it has none).
        """
        params = self.params(gpu)
        curve = params.gemm_for(precision)
        flops = gemm_flops(m, n, k, batch)
        return gemm_roofline_time_s(
            flops,
            gemm_bytes(m, n, k, batch, precision),
            gpu.peak_flops(precision) * gpu.compute_clock_scale(),
            gpu.hbm_bandwidth_Bps,
            curve.eff_max,
            curve.flops_half,
            params.hbm_efficiency.value,
            params.launch_overhead_s.value,
        )

    def _attention_curve(
        self, gpu: GPUSpec, backward: bool, precision: Precision, kernel: CalibratedKernel
    ) -> tuple[AttentionEfficiency, float]:
        """(efficiency block, peak FLOP/s) for one attention pass of kernel class ``kernel``
        (FP8 only for a calibrated ``auto`` forward; everything else at the 16-bit peak)."""
        params = self.params(gpu)
        peak16 = gpu.peak_flops(ATTENTION_16BIT_PEAK)
        if kernel == "fa2" and gpu.generation not in FA2_NATIVE:
            curve = params.attention_fa2_backward if backward else params.attention_fa2_forward
            if curve is None:
                raise uncalibrated_kernel_error(gpu, kernel)
            return curve, peak16
        if backward:
            return params.attention_backward, peak16
        fp8_curve = params.attention_forward_fp8
        if GEMM_CLASS[precision] == "fp8" and fp8_curve is not None and gpu.supports(precision):
            return fp8_curve, gpu.peak_flops(precision)
        return params.attention_forward, peak16

    def attention_time_s(
        self,
        gpu: GPUSpec,
        batch: Floats,
        num_heads: Floats,
        seq_q: Floats,
        seq_kv: Floats,
        head_dim_qk: Floats,
        head_dim_v: Floats,
        causal: Bools,
        backward: bool,
        precision: Precision = "bf16",
        *,
        num_kv_heads: Floats | None = None,
        kernel: AttentionKernel = "auto",
    ) -> Floats:
        """One flash-attention pass of kernel class ``kernel``, seconds.

        FLOPs 2·b·h·sq·skv·(d_qk + d_v), times 1 − sq/(2·skv) if causal (½ at sq == skv), 2.5×
        for backward;
        bytes Q, K, V, O once (twice for backward) at the element size of ``precision``
        (``op_counts``). Efficiency eff_max·L/(L + L_half)·d/(d + d_half) with L the mean
        keys per query and d = (d_qk + d_v)/2 (``kernels.efficiency.attention_efficiency``),
        separately calibrated for forward and backward. Decode (sq = 1) is memory-bound.
        ``causal`` may be a bool array; ``backward``, ``precision`` and ``kernel`` pick the
        calibration (``kernels.attention_kernels``: derived classes scale a calibrated one).
        """
        kv_heads = num_heads if num_kv_heads is None else num_kv_heads
        base, time_ratio = resolve_attention_kernel(kernel, self.attention_kernels, gpu.generation)
        curve, peak = self._attention_curve(gpu, backward, precision, base)
        params = self.params(gpu)
        return time_ratio * attention_roofline_time_s(
            attention_flops(batch, num_heads, seq_q, seq_kv, head_dim_qk, head_dim_v, causal,
                            backward),
            attention_bytes(batch, num_heads, kv_heads, seq_q, seq_kv, head_dim_qk, head_dim_v,
                            backward, precision),
            attention_keys_per_query(seq_q, seq_kv, causal),
            0.5 * np.add(head_dim_qk, head_dim_v),
            peak * gpu.compute_clock_scale(),
            gpu.hbm_bandwidth_Bps,
            curve.eff_max,
            curve.keys_half,
            curve.head_dim_half,
            params.hbm_efficiency.value,
            params.launch_overhead_s.value,
        )

    def memory_bound_time_s(self, gpu: GPUSpec, bytes_moved: Floats) -> Floats:
        """A kernel streaming ``bytes_moved`` bytes: bytes/(BW_hbm·eff_hbm) + t_launch, s."""
        params = self.params(gpu)
        return (
            memory_time_s(bytes_moved, gpu.hbm_bandwidth_Bps, params.hbm_efficiency.value)
            + params.launch_overhead_s.value
        )
