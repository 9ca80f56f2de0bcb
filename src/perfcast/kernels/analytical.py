"""Analytical kernel backend: tile/wave GEMM, flash-attention work units, memory-bound kernels.

Formulas live in ``analytical_gemm``, ``analytical_attention`` and ``memory_bound``; knobs per
GPU generation in ``calibration/kernel_analytical.yaml`` (fitted by
``tools/fit_kernel_analytical.py``); HBM efficiency and launch overhead are the roofline
calibration's (``calibration/kernel_roofline.yaml``). A GPU without SM count or clock in the
catalog (TPU, Gaudi, parts whose clock is not published) is timed by the roofline backend;
``AnalyticalBackend.uses_roofline(gpu)`` says so.

Speed: a training estimate asks for the same few dozen scalar GEMM shapes again and again (and
the search's layer tables for the same shapes per layer key), so scalar GEMM calls are
memoized per backend instance on (GPU, shape, precision), scalar memory-bound calls on (GPU,
bytes), the GPU found by identity before equality (``perfcast.memo``), and scalar attention
calls in ``analytical_attention``; array calls are evaluated every time. Both run the same
formulas, so a memoized value equals the array path's element exactly.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from perfcast.arrays import Bools, Floats, all_scalars
from perfcast.calibration.attention_kernels import AttentionKernelCalibration
from perfcast.calibration.kernel_analytical import (
    GenerationAnalytical,
    KernelAnalyticalCalibration,
    load_kernel_analytical,
)
from perfcast.calibration.kernel_roofline import GEMM_CLASS
from perfcast.kernels import analytical_gemm
from perfcast.kernels.analytical_attention import (
    AttentionCall,
    AttentionRates,
    attention_backward_time_s,
    attention_forward_time_s,
)
from perfcast.kernels.analytical_gemm import GemmPlan, plan_gemm, plan_grouped_gemm
from perfcast.kernels.attention_kernels import FA2_NATIVE, resolve_attention_kernel
from perfcast.kernels.backend import KernelBackendName
from perfcast.kernels.memory_bound import memory_bound_kernels_time_s
from perfcast.kernels.roofline import ATTENTION_16BIT_PEAK, RooflineBackend
from perfcast.memo import PerObjectMemo
from perfcast.specs.hardware import GPUSpec, Precision
from perfcast.specs.strategy import AttentionKernel


@dataclass(frozen=True)
class AnalyticalBackend:
    """Tile/wave kernel times with per-generation calibration (shipped files by default)."""

    calibration: KernelAnalyticalCalibration = field(default_factory=load_kernel_analytical)
    roofline: RooflineBackend = field(default_factory=RooflineBackend)
    name: KernelBackendName = KernelBackendName.ANALYTICAL
    _gemm_memo: PerObjectMemo = field(init=False, repr=False, compare=False)
    _memory_memo: PerObjectMemo = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Per-instance memo of scalar GEMM calls (per GPU; key: m, n, k, batch, precision,
        # grouped), the GPU found by identity first (``perfcast.memo``).
        memo = PerObjectMemo(self._gemm_time_s, analytical_gemm.GEMM_MEMO_SIZE)
        object.__setattr__(self, "_gemm_memo", memo)
        # And of scalar memory-bound calls (per GPU; key: bytes): numpy on scalars is slow.
        memory_memo = PerObjectMemo(self._memory_bound_time_s, analytical_gemm.GEMM_MEMO_SIZE)
        object.__setattr__(self, "_memory_memo", memory_memo)

    def __reduce__(self) -> tuple:
        # Pickle the fields only; the unpickled instance builds a fresh memo.
        return type(self), (self.calibration, self.roofline, self.name)

    @property
    def attention_kernels(self) -> AttentionKernelCalibration:
        """Derived kernel classes (``KernelBackend``): its roofline backend's."""
        return self.roofline.attention_kernels

    @property
    def roofline_layer(self) -> RooflineBackend:
        """The roofline backend under this one (its derived attention classes), whose
        parameters the serving formulas take (``estimate.inference_kernels.roofline_params``)."""
        return self.roofline

    def with_attention_kernels(self, kernels: AttentionKernelCalibration) -> AnalyticalBackend:
        """This backend with derived kernel classes ``kernels`` (``KernelBackend``); a new
        instance starts with empty kernel memos."""
        roofline = self.roofline.with_attention_kernels(kernels)
        return self if roofline is self.roofline else replace(self, roofline=roofline)

    def params(self, gpu: GPUSpec) -> GenerationAnalytical:
        """The calibration block for ``gpu``'s generation (else ``default``)."""
        return self.calibration.for_generation(gpu.generation)

    def uses_default(self, gpu: GPUSpec) -> bool:
        """True when ``gpu``'s generation has no analytical block of its own."""
        return self.calibration.uses_default(gpu.generation)

    def transferred_parts(self, gpu: GPUSpec) -> tuple[str, ...]:
        """Kernel classes whose constants ``gpu``'s generation borrowed from another one
        (``KernelAnalyticalCalibration.transferred_parts``)."""
        return self.calibration.transferred_parts(gpu.generation)

    def uses_roofline(self, gpu: GPUSpec) -> bool:
        """True when the catalog lacks the SM count or clock the tile model needs."""
        return gpu.num_sms is None or gpu.matrix_clock_Hz is None

    def _hbm_and_launch(self, gpu: GPUSpec) -> tuple[float, float]:
        params = self.roofline.params(gpu)
        return params.hbm_efficiency.value, params.launch_overhead_s.value

    def plan_gemm(self, gpu: GPUSpec, m: Floats, n: Floats, k: Floats, batch: Floats = 1,
                  precision: Precision = "bf16") -> GemmPlan:
        """Chosen tile, split-K, waves, bound and time of ``batch`` GEMMs (``plan_gemm``)."""
        hbm_eff, launch = self._hbm_and_launch(gpu)
        return plan_gemm(gpu, m, n, k, batch, precision, self.params(gpu).gemm, hbm_eff, launch)

    def gemm_time_s(self, gpu: GPUSpec, m: Floats, n: Floats, k: Floats, batch: Floats = 1,
                    precision: Precision = "bf16", *, gemm_pass: str | None = None,
                    grouped: bool = False) -> Floats:
        """``batch`` GEMMs C[m,n] = A[m,k]·B[k,n], seconds (``analytical_gemm``); the model
        times every pass's layout alike (``gemm_pass`` is accepted and not used). ``grouped``:
        one grouped (MoE routed-expert) kernel over the ``batch`` GEMMs, whose 16-bit main
        loop runs at ``GemmTileModel.mma_efficiency_grouped_bf16`` (fitted on measured
        grouped GEMMs, ``tools/fit_kernel_analytical.py``)."""
        if self.uses_roofline(gpu):
            return self.roofline.gemm_time_s(gpu, m, n, k, batch, precision)
        if all_scalars(m, n, k, batch):
            return self._gemm_memo(gpu)(float(m), float(n), float(k), float(batch), precision,
                                        grouped)
        return self._gemm_time_s(gpu, m, n, k, batch, precision, grouped)

    def _gemm_time_s(self, gpu: GPUSpec, m: Floats, n: Floats, k: Floats, batch: Floats,
                     precision: Precision, grouped: bool = False) -> Floats:
        hbm_eff, launch = self._hbm_and_launch(gpu)
        model = self.params(gpu).gemm
        return analytical_gemm.gemm_time_s(gpu, m, n, k, batch, precision,
                                           model.as_grouped() if grouped else model,
                                           hbm_eff, launch)

    def grouped_gemm_time_s(self, gpu: GPUSpec, tokens_per_expert: Floats, n: Floats,
                            k: Floats, precision: Precision = "bf16") -> Floats:
        """One grouped (MoE) GEMM, ``tokens_per_expert`` rows per expert on the last axis, s."""
        hbm_eff, launch = self._hbm_and_launch(gpu)
        if self.uses_roofline(gpu):
            m = np.asarray(tokens_per_expert, dtype=float)
            return self.roofline.gemm_time_s(gpu, m.max(axis=-1), n, k, m.shape[-1], precision)
        return plan_grouped_gemm(gpu, tokens_per_expert, n, k, precision,
                                 self.params(gpu).gemm, hbm_eff, launch).time_s

    def attention_time_s(
        self, gpu: GPUSpec, batch: Floats, num_heads: Floats, seq_q: Floats, seq_kv: Floats,
        head_dim_qk: Floats, head_dim_v: Floats, causal: Bools, backward: bool,
        precision: Precision = "bf16", *, num_kv_heads: Floats | None = None,
        kernel: AttentionKernel = "auto",
    ) -> Floats:
        """One flash-attention pass, seconds (``analytical_attention``). FP8 only for a
        forward on a GPU with FP8; everything else at 16-bit, like the roofline backend.

        The tile model describes each generation's own kernel (``kernel='auto'``). A class
        timed against FlashAttention-2 (``fa2``, ``triton``) on a generation whose own kernel
        is not FA2 uses the roofline backend's FA2 curves, fitted on FA2 measurements there.
        """
        base, time_ratio = resolve_attention_kernel(kernel, self.roofline.attention_kernels,
                                                    gpu.generation)
        if self.uses_roofline(gpu) or (base == "fa2" and gpu.generation not in FA2_NATIVE):
            return self.roofline.attention_time_s(
                gpu, batch, num_heads, seq_q, seq_kv, head_dim_qk, head_dim_v, causal,
                backward, precision, num_kv_heads=num_kv_heads, kernel=kernel)
        if base == "fa2":
            precision = ATTENTION_16BIT_PEAK
        return time_ratio * self._own_attention_time_s(
            gpu, batch, num_heads, seq_q, seq_kv, head_dim_qk, head_dim_v, causal, backward,
            precision, num_kv_heads)

    def _own_attention_time_s(
        self, gpu: GPUSpec, batch: Floats, num_heads: Floats, seq_q: Floats, seq_kv: Floats,
        head_dim_qk: Floats, head_dim_v: Floats, causal: Bools, backward: bool,
        precision: Precision, num_kv_heads: Floats | None,
    ) -> Floats:
        """The generation's own kernel through the tile model (``analytical_attention``)."""
        kv_heads = num_heads if num_kv_heads is None else num_kv_heads
        fp8 = GEMM_CLASS[precision] == "fp8" and gpu.supports(precision) and not backward
        prec = precision if fp8 else ATTENTION_16BIT_PEAK
        params = self.params(gpu)
        hbm_eff, launch = self._hbm_and_launch(gpu)
        clock_Hz = gpu.matrix_clock_Hz
        assert clock_Hz is not None  # a GPU without a clock goes to the roofline (uses_roofline)
        sm_load_Bps = params.gemm.sm_load_bytes_per_clock * clock_Hz
        timer = attention_backward_time_s if backward else attention_forward_time_s
        call = AttentionCall(batch, num_heads, kv_heads, seq_q, seq_kv, head_dim_qk, head_dim_v,
                             causal, prec)
        return timer(call, AttentionRates.of(gpu, prec, params.attention, sm_load_Bps, hbm_eff,
                                             launch))

    def memory_bound_time_s(self, gpu: GPUSpec, bytes_moved: Floats) -> Floats:
        """One memory-bound kernel: bytes/(BW·η_hbm) + t_launch, seconds (``memory_bound``);
        scalar calls memoized per backend instance, like GEMMs (same formula, same value)."""
        if all_scalars(bytes_moved):
            return self._memory_memo(gpu)(float(bytes_moved))
        return self._memory_bound_time_s(gpu, bytes_moved)

    def _memory_bound_time_s(self, gpu: GPUSpec, bytes_moved: Floats) -> Floats:
        hbm_eff, launch = self._hbm_and_launch(gpu)
        return memory_bound_kernels_time_s(bytes_moved, gpu.hbm_bandwidth_Bps, hbm_eff, launch)
