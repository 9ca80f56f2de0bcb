"""Typed, immutable inference report. Renderers live in ``perfcast.report``."""

from __future__ import annotations

from dataclasses import dataclass

from perfcast.calibration.bundle import CalibrationStatus
from perfcast.calibration.forecast_intervals import ForecastInterval
from perfcast.estimate.inference_phases import StepTime
from perfcast.estimate.training_report import strategy_dict
from perfcast.memory.inference import InferenceMemory
from perfcast.specs.inference import InferencePrecision, InferenceWorkload, Offload
from perfcast.specs.strategy import Strategy


@dataclass(frozen=True)
class SpeculationSummary:
    """Speculative decoding as forecast (Leviathan et al. 2023)."""

    draft_model: str
    acceptance_rate: float
    num_draft_tokens: int
    tokens_per_target_step: float
    """Expected tokens per verification step: (1 − α^(k+1))/(1 − α)."""
    draft_step_s: float
    verify_step_s: float

    def to_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass(frozen=True)
class InferenceReport:
    """Forecast of serving one workload on one system."""

    model: str
    system: str
    gpu: str
    strategy: Strategy
    workload: InferenceWorkload
    precision: InferencePrecision
    attention_dp: bool
    offload: Offload
    ttft_s: float
    """Time to first token: the prefill (static) or the chunked prefill steps (continuous)."""
    tpot_s: float
    """Time per output token after the first (mean over the generation)."""
    prefill: StepTime
    """The prefill phase (static) or one mixed step (continuous), by category."""
    decode: StepTime
    """One decode step, averaged over the generation, by category."""
    memory: InferenceMemory
    max_batch_size: int
    """Most concurrent sequences of this length that fit per replica (0 = not even one)."""
    speculation: SpeculationSummary | None
    kernel_backend: str
    calibration_default: bool
    """True when the GPU generation has no fitted serving overheads (defaults used)."""
    assumptions: tuple[str, ...]
    calibration: CalibrationStatus | None = None
    """The GPU generation's serving calibration, or the pooled fit standing in (``fallback``)."""
    interval: ForecastInterval | None = None
    """80% band of output tokens/s/GPU from cross-validated residuals of comparable runs."""

    @property
    def num_gpus(self) -> int:
        return self.strategy.num_gpus

    @property
    def replicas(self) -> int:
        """Data-parallel model replicas, each serving ``batch_size`` sequences."""
        return self.strategy.dp

    @property
    def e2e_latency_s(self) -> float:
        """Request latency: TTFT + (output_len − 1)·TPOT."""
        return self.ttft_s + (self.workload.output_len - 1) * self.tpot_s

    @property
    def output_tokens_per_s(self) -> float:
        """Generated tokens per second over all replicas."""
        w = self.workload
        if w.batching == "continuous":
            return self.replicas * w.batch_size / self.tpot_s
        return self.replicas * w.batch_size * w.output_len / self.e2e_latency_s

    @property
    def output_tokens_per_s_per_gpu(self) -> float:
        return self.output_tokens_per_s / self.num_gpus

    @property
    def tokens_per_s_per_user(self) -> float:
        """Decode speed one request sees: 1/TPOT."""
        return 1.0 / self.tpot_s

    @property
    def fits(self) -> bool:
        return self.memory.fits

    def to_dict(self) -> dict:
        return {
            "model": self.model,
            "system": self.system,
            "gpu": self.gpu,
            "num_gpus": self.num_gpus,
            "replicas": self.replicas,
            "strategy": strategy_dict(self.strategy),
            "workload": self.workload.model_dump(),
            "precision": self.precision.model_dump(),
            "attention_dp": self.attention_dp,
            "offload": self.offload.model_dump(),
            "ttft_s": self.ttft_s,
            "tpot_s": self.tpot_s,
            "e2e_latency_s": self.e2e_latency_s,
            "output_tokens_per_s": self.output_tokens_per_s,
            "output_tokens_per_s_per_gpu": self.output_tokens_per_s_per_gpu,
            "tokens_per_s_per_user": self.tokens_per_s_per_user,
            "prefill_breakdown_s": self.prefill.to_dict(),
            "decode_step_breakdown_s": self.decode.to_dict(),
            "fits": self.fits,
            "max_batch_size": self.max_batch_size,
            "peak_memory_bytes": self.memory.total_bytes,
            "memory": self.memory.to_dict(),
            "speculation": self.speculation.to_dict() if self.speculation else None,
            "kernel_backend": self.kernel_backend,
            "calibration_default": self.calibration_default,
            "calibration": self.calibration.to_dict() if self.calibration else None,
            "interval": self.interval.to_dict() if self.interval else None,
            "assumptions": list(self.assumptions),
        }


@dataclass(frozen=True)
class CurvePoint:
    """One batch size of a throughput-vs-latency curve."""

    batch_size: int
    tpot_s: float
    ttft_s: float
    output_tokens_per_s_per_gpu: float
    tokens_per_s_per_user: float
    fits: bool

    def to_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass(frozen=True)
class InferenceCurve:
    """Throughput per GPU against per-user speed over batch sizes (same configuration)."""

    base: InferenceReport
    points: tuple[CurvePoint, ...]

    def to_dict(self) -> dict:
        return {"base": self.base.to_dict(), "points": [p.to_dict() for p in self.points]}
