"""Typed report of one kernel's forecast (``perfcast kernels``): time, TFLOP/s, % of peak,
bound and, for the analytical GEMM model, the chosen tile."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from perfcast.kernels.analytical import AnalyticalBackend
from perfcast.kernels.backend import KernelBackend
from perfcast.op_counts import attention_bytes, attention_flops, gemm_bytes, gemm_flops
from perfcast.specs.hardware import GPUSpec, Precision
from perfcast.specs.strategy import AttentionKernel


@dataclass(frozen=True)
class KernelReport:
    kernel: str
    gpu: str
    backend: str
    precision: Precision
    shape: dict
    time_s: float
    flops: float
    bytes_moved: float
    tflops: float
    pct_of_peak: float
    """Achieved / datasheet dense peak of ``precision``, percent."""
    bound: str
    """compute, memory or launch."""
    tile: str | None = None
    """Chosen tile 'T_m x T_n' (and split-K) of the analytical GEMM model."""
    waves: float | None = None
    table_fallback: bool | None = None
    """Measured backend: True when no comparable table point exists and the time is the
    analytical model's; None for the other backends."""
    calibration_default: bool = False
    """The GPU's generation has no kernel measurements: the backend's efficiencies are its
    ``default`` block, fitted on other GPUs (possibly another vendor's)."""

    def to_dict(self) -> dict:
        """Fields as data, plus ``fraction_of_peak`` (``pct_of_peak`` / 100): a fraction, as
        ``mfu`` is in every other command's JSON."""
        out = asdict(self)
        out["fraction_of_peak"] = self.pct_of_peak / 100.0
        return out


@dataclass(frozen=True)
class AttentionShape:
    batch: int
    heads: int
    kv_heads: int
    seq_q: int
    seq_kv: int
    head_dim_qk: int
    head_dim_v: int
    causal: bool
    backward: bool
    kernel: AttentionKernel = "auto"
    """``Strategy.attention_kernel`` class (``kernels.attention_kernels``)."""


def _uses_default(backend: KernelBackend, gpu: GPUSpec) -> bool:
    """True when ``backend`` takes ``gpu``'s efficiencies from its ``default`` block."""
    uses_default = getattr(backend, "uses_default", None)
    return bool(uses_default(gpu)) if uses_default is not None else False


def _bound(backend: KernelBackend, gpu: GPUSpec, time_s: float, flops: float,
           num_bytes: float) -> str:
    """Roofline classification when the backend has no plan: launch if the launch-free time
    is under 2 µs-scale launch gap, else compute vs memory by arithmetic intensity."""
    compute = flops / gpu.peak_flops("bf16")
    memory = num_bytes / gpu.hbm_bandwidth_Bps
    if time_s > 2.0 * max(compute, memory) and max(compute, memory) < 5e-6:
        return "launch"
    return "compute" if compute >= memory else "memory"


def _table_fallback(backend: KernelBackend, gpu: GPUSpec, kind: str, precision: Precision,
                    **query) -> bool | None:
    """``backend.outside_table`` for a measured backend, else None."""
    outside = getattr(backend, "outside_table", None)
    return None if outside is None else bool(outside(gpu, kind, precision, **query))


def gemm_kernel_report(backend: KernelBackend, gpu: GPUSpec, m: int, n: int, k: int,
                       batch: int, precision: Precision, gemm_pass: str | None = None
                       ) -> KernelReport:
    """Forecast ``batch`` GEMMs m×n×k on ``gpu`` with ``backend`` (``gemm_pass``: the
    ``graph.ops.Phase`` value whose layout a measured table should match; None = any)."""
    flops = float(gemm_flops(m, n, k, batch))
    num_bytes = float(gemm_bytes(m, n, k, batch, precision))
    time_s = float(backend.gemm_time_s(gpu, m, n, k, batch, precision, gemm_pass=gemm_pass))
    tile, waves, bound = None, None, None
    if isinstance(backend, AnalyticalBackend) and not backend.uses_roofline(gpu):
        plan = backend.plan_gemm(gpu, m, n, k, batch, precision)
        tile = f"{int(plan.tile_m)}x{int(plan.tile_n)}" + (
            f" split-k {int(plan.split_k)}" if plan.split_k > 1 else "")
        waves, bound = float(plan.waves), str(np.asarray(plan.bound))
    return KernelReport(
        kernel="gemm", gpu=gpu.name, backend=str(backend.name), precision=precision,
        shape={"m": m, "n": n, "k": k, "batch": batch}, time_s=time_s, flops=flops,
        bytes_moved=num_bytes, tflops=flops / time_s / 1e12,
        pct_of_peak=100.0 * flops / time_s / gpu.peak_flops(precision),
        bound=bound or _bound(backend, gpu, time_s, flops, num_bytes), tile=tile, waves=waves,
        calibration_default=_uses_default(backend, gpu),
        table_fallback=_table_fallback(backend, gpu, "gemm", precision, gemm_pass=gemm_pass,
                                       m=m, n=n, k=k, batch=batch))


def attention_kernel_report(backend: KernelBackend, gpu: GPUSpec, shape: AttentionShape,
                            precision: Precision) -> KernelReport:
    """Forecast one flash-attention pass on ``gpu`` with ``backend``."""
    s = shape
    flops = float(attention_flops(s.batch, s.heads, s.seq_q, s.seq_kv, s.head_dim_qk,
                                  s.head_dim_v, s.causal, s.backward))
    num_bytes = float(attention_bytes(s.batch, s.heads, s.kv_heads, s.seq_q, s.seq_kv,
                                      s.head_dim_qk, s.head_dim_v, s.backward, precision))
    time_s = float(backend.attention_time_s(
        gpu, s.batch, s.heads, s.seq_q, s.seq_kv, s.head_dim_qk, s.head_dim_v, s.causal,
        s.backward, precision, num_kv_heads=s.kv_heads, kernel=s.kernel))
    peak = gpu.peak_flops(precision if not s.backward else "bf16")
    return KernelReport(
        kernel="attention_backward" if s.backward else "attention_forward", gpu=gpu.name,
        backend=str(backend.name), precision=precision, shape=asdict(s), time_s=time_s,
        flops=flops, bytes_moved=num_bytes, tflops=flops / time_s / 1e12,
        pct_of_peak=100.0 * flops / time_s / peak,
        bound=_bound(backend, gpu, time_s, flops, num_bytes),
        calibration_default=_uses_default(backend, gpu),
        table_fallback=_table_fallback(
            backend, gpu, "attention", precision, causal=s.causal, backward=s.backward,
            batch=s.batch, num_heads=s.heads, num_kv_heads=s.kv_heads, seq_q=s.seq_q,
            seq_kv=s.seq_kv, head_dim_qk=s.head_dim_qk))
