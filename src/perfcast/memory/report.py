"""Typed, immutable memory report. Renderers live in ``perfcast.report``."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from perfcast.arrays import Floats


@dataclass(frozen=True)
class StageMemory:
    """Peak memory of one GPU in one pipeline stage, in bytes."""

    stage: int
    num_layers: int
    params: float
    """Parameters held by this GPU (after TP/EP sharding, before ZeRO/FSDP sharding)."""
    embedding_params: float
    """Of which embedding, LM head and final norm (first/last stage)."""
    weights_bytes: float
    grads_bytes: float
    optimizer_bytes: float
    activations_bytes: float
    """All stored activations at the peak: layers × in-flight micro-batches, embedding and
    loss buffers, and the full-recompute working layer."""
    layer_activations_bytes: float
    """Of which transformer layers' stored activations (Korthikanti Table 2 × in-flight)."""
    inflight_micro_batches: float
    """Stage-activation units held at the peak (pipeline schedule)."""
    other_bytes: float
    """CUDA context, NCCL buffers and allocator fragmentation (calibrated allowances), and the
    CUDA graphs' static buffers."""
    cuda_graph_bytes: Floats = 0.0
    """Of which static buffers of CUDA graphs (``memory.cuda_graphs``; 0 without graphs)."""

    @property
    def total_bytes(self) -> float:
        return (
            self.weights_bytes
            + self.grads_bytes
            + self.optimizer_bytes
            + self.activations_bytes
            + self.other_bytes
        )

    def to_dict(self) -> dict:
        out = asdict(self)
        out["total_bytes"] = self.total_bytes
        return out


@dataclass(frozen=True)
class MemoryReport:
    """Memory forecast per GPU for every pipeline stage of a training run."""

    model: str
    system: str
    gpu: str
    params_total: int
    params_active: int
    capacity_bytes: float
    num_micro_batches: int
    stages: tuple[StageMemory, ...]
    assumptions: tuple[str, ...]

    @property
    def peak_bytes(self) -> float:
        """Largest per-GPU total over stages."""
        return max(stage.total_bytes for stage in self.stages)

    @property
    def peak_stage(self) -> int:
        return max(self.stages, key=lambda st: st.total_bytes).stage

    @property
    def fits(self) -> bool:
        return self.peak_bytes <= self.capacity_bytes

    def to_dict(self) -> dict:
        return {
            "model": self.model,
            "system": self.system,
            "gpu": self.gpu,
            "params_total": self.params_total,
            "params_active": self.params_active,
            "capacity_bytes": self.capacity_bytes,
            "peak_bytes": self.peak_bytes,
            "peak_memory_bytes": self.peak_bytes,
            "peak_stage": self.peak_stage,
            "fits": self.fits,
            "num_micro_batches": self.num_micro_batches,
            "stages": [stage.to_dict() for stage in self.stages],
            "assumptions": list(self.assumptions),
        }
