"""Typed, immutable training report. Renderers live in ``perfcast.report``."""

from __future__ import annotations

from dataclasses import dataclass, fields

from perfcast.calibration.bundle import CalibrationStatus
from perfcast.calibration.forecast_intervals import ForecastInterval
from perfcast.memory.report import MemoryReport
from perfcast.schedule.timeline import PassTimes
from perfcast.specs.strategy import Strategy


@dataclass(frozen=True)
class StepBreakdown:
    """Where one step's time goes on the critical pipeline device (seconds; sums to the step)."""

    compute_gemm_s: float
    compute_attention_s: float
    compute_memory_bound_s: float
    recompute_s: float
    tp_comm_s: float
    cp_comm_s: float
    ep_comm_s: float
    host_s: float
    """Exposed host time: kernel launches the GPU waits for and device-host syncs
    (``schedule.host_time``)."""
    pp_comm_s: float
    dp_comm_s: float
    pipeline_bubble_s: float
    optimizer_s: float
    other_s: float
    """Calibrated per-step overhead the operator model does not see (framework, launch gaps)."""
    offload_s: float = 0.0
    """Exposed host copies of CPU-offloaded activations (``schedule.activation_offload``)."""

    @property
    def total_s(self) -> float:
        return sum(getattr(self, f.name) for f in fields(self))

    def to_dict(self) -> dict[str, float]:
        """Named parts without the ``_s`` suffix, e.g. ``{"compute_gemm": 1.2, ...}``."""
        return {f.name.removesuffix("_s"): getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True)
class TrainingReport:
    """Forecast of one training step."""

    model: str
    system: str
    gpu: str
    num_gpus: int
    strategy: Strategy
    seq_length: int
    global_batch_size: int
    num_micro_batches: int
    step_time_s: float
    tokens_per_step: int
    model_flops_per_token: float
    hardware_flops_per_token: float
    peak_flops: float
    """Dense BF16 peak of the GPU: the MFU denominator (stated, whatever the precision)."""
    breakdown: StepBreakdown
    critical_stage: int
    bubble_fraction: float
    memory: MemoryReport
    kernel_backend: str
    assumptions: tuple[str, ...]
    stage_passes: tuple[PassTimes, ...] = ()
    """Per pipeline stage, F / B / W seconds of one micro-batch (the simulator's input;
    ``estimate.training_timeline`` rebuilds the step's timeline from them)."""
    p2p_s: float = 0.0
    """One activation send/recv between adjacent stages."""
    calibration: CalibrationStatus | None = None
    """The GPU generation's calibration entry, or the pooled fit standing in (``fallback``)."""
    interval: ForecastInterval | None = None
    """80% band of tokens/s/GPU from cross-validated residuals of comparable runs."""
    kernel_table_fallback_ops: tuple[str, ...] = ()
    """'name (kind)' of the ops a measured kernel table does not cover, timed analytically
    (``schedule.kernel_coverage``; empty for the other backends)."""

    @property
    def tokens_per_s_per_gpu(self) -> float:
        return self.tokens_per_step / self.step_time_s / self.num_gpus

    @property
    def tflops_per_gpu(self) -> float:
        """Model TFLOP/s per GPU (6N + causal attention per token; no recompute)."""
        return self.model_flops_per_token * self.tokens_per_s_per_gpu / 1e12

    @property
    def mfu(self) -> float:
        return self.tflops_per_gpu * 1e12 / self.peak_flops

    @property
    def hfu(self) -> float:
        """Hardware FLOPs utilization: recomputation included (Korthikanti et al. 2022 §6)."""
        return self.hardware_flops_per_token * self.tokens_per_s_per_gpu / self.peak_flops

    def to_dict(self) -> dict:
        return {
            "model": self.model,
            "system": self.system,
            "gpu": self.gpu,
            "num_gpus": self.num_gpus,
            "strategy": strategy_dict(self.strategy),
            "seq_length": self.seq_length,
            "global_batch_size": self.global_batch_size,
            "num_micro_batches": self.num_micro_batches,
            "step_time_s": self.step_time_s,
            "tokens_per_step": self.tokens_per_step,
            "tokens_per_s_per_gpu": self.tokens_per_s_per_gpu,
            "tflops_per_gpu": self.tflops_per_gpu,
            "mfu": self.mfu,
            "hfu": self.hfu,
            "mfu_basis": MFU_BASIS,
            "model_flops_per_token": self.model_flops_per_token,
            "flops_formula": "6*N_active_matmul + causal attention (3 passes), per token",
            "peak_flops": self.peak_flops,
            "breakdown_s": self.breakdown.to_dict(),
            "critical_stage": self.critical_stage,
            "bubble_fraction": self.bubble_fraction,
            "fits": self.memory.fits,
            "peak_memory_bytes": self.memory.peak_bytes,
            "memory": self.memory.to_dict(),
            "kernel_backend": self.kernel_backend,
            "kernel_table_fallback_ops": list(self.kernel_table_fallback_ops),
            "calibration": self.calibration.to_dict() if self.calibration else None,
            "interval": self.interval.to_dict() if self.interval else None,
            "assumptions": list(self.assumptions),
        }


MFU_BASIS = "dense BF16 peak of the GPU (peak_flops), whatever the GEMM precision"
"""What ``mfu`` and ``hfu`` are fractions of: the dense (no-sparsity) BF16 tensor-core peak, the
convention of Megatron-LM, NeMo and torchtitan reports (an FP8 run is still measured against
BF16; ground_truth/README.md)."""


def strategy_dict(strategy) -> dict:
    """The strategy as plain values, with derived dp and schedule."""
    out = strategy.model_dump()
    out.update(dp=strategy.dp, pipeline_schedule=strategy.schedule)
    return out
