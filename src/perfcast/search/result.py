"""Typed, immutable search results. Renderers live in ``perfcast.report``."""

from __future__ import annotations

from dataclasses import dataclass

from perfcast.estimate.training_report import MFU_BASIS, TrainingReport, strategy_dict


@dataclass(frozen=True)
class SearchCandidate:
    """One strategy the search kept, with its full forecast."""

    report: TrainingReport
    time_to_train_s: float
    """Time to train the search's token budget on its GPUs."""
    cost_usd: float | None
    """Cost of that time at the given $/GPU-hour (None when no price was given)."""
    framework_flags: tuple[str, ...] = ()
    """Framework flags the layout needs beyond the strategy (its pipeline split)."""

    @property
    def memory_headroom_bytes(self) -> float:
        return self.report.memory.capacity_bytes - self.report.memory.peak_bytes

    def to_dict(self) -> dict:
        r = self.report
        return {
            "strategy": strategy_dict(r.strategy),
            "tokens_per_s_per_gpu": r.tokens_per_s_per_gpu,
            "step_time_s": r.step_time_s,
            "memory_bytes": r.memory.peak_bytes,
            "peak_memory_bytes": r.memory.peak_bytes,
            "memory_headroom_bytes": self.memory_headroom_bytes,
            "fits": r.memory.fits,
            "mfu": r.mfu,
            "tflops_per_gpu": r.tflops_per_gpu,
            "num_micro_batches": r.num_micro_batches,
            "time_to_train_s": self.time_to_train_s,
            "cost_usd": self.cost_usd,
            "framework_flags": list(self.framework_flags),
            "breakdown_s": r.breakdown.to_dict(),
        }


@dataclass(frozen=True)
class SearchResult:
    """The outcome of a strategy search: counts, the best strategies, the Pareto front."""

    model: str
    system: str
    gpu: str
    num_gpus: int
    seq_length: int
    global_batch_size: int
    objective: str
    token_budget: float
    evaluated: int
    """Valid strategies of the space, each evaluated in bulk or, for the recompute layer counts
    of full recompute, settled by their monotone memory and time (``search.recompute_fit``):
    ``timed`` counts those whose step time was computed."""
    feasible: int
    """Of which fit in GPU memory."""
    invalid: int
    """Candidate layouts rejected by divisibility before evaluation."""
    best: tuple[SearchCandidate, ...]
    """Best feasible strategies by the objective, best first."""
    pareto: tuple[SearchCandidate, ...]
    """Feasible strategies no other beats in both tokens/s/GPU and memory headroom."""
    evaluate_s: float
    """Wall seconds of the bulk evaluation (varies run to run: only in ``to_dict(timings=True)``)."""
    framework: str = ""
    """Framework whose rules and defaults the search followed."""
    distinct: int = 0
    """Evaluated strategies counted once per recompute layer count and once per offloaded layer
    count (``evaluated = distinct + recompute_layer_variants + offload_layer_variants``)."""
    recompute_layer_variants: int = 0
    """Evaluated strategies that differ from another only in the recompute layer count."""
    offload_layer_variants: int = 0
    """Evaluated strategies that differ from another only in the offloaded layer count."""
    recompute_module_variants: int = 0
    """Evaluated strategies that differ from another only in the selective recompute module
    set (counted in ``distinct``)."""
    fp8_scope_variants: int = 0
    """Evaluated strategies that differ from another only in the FP8 GEMM scope (counted in
    ``distinct``)."""
    timed: int = 0
    """Strategies whose step time and memory the bulk evaluator computed: all of ``evaluated``
    but the recompute layer counts that ``search.recompute_fit`` settles without timing (a
    few rows of a layout are timed twice: its first fit among its best candidates)."""
    memory_probed: int = 0
    """Strategies whose peak memory alone was computed, to find each layout's fewest
    recomputed layers that fit (``search.recompute_fit``)."""

    @property
    def infeasible(self) -> int:
        return self.evaluated - self.feasible

    def to_dict(self, timings: bool = False) -> dict:
        """Plain data; deterministic unless ``timings`` adds the wall-clock ``evaluate_s``."""
        out = {
            "model": self.model,
            "system": self.system,
            "gpu": self.gpu,
            "num_gpus": self.num_gpus,
            "seq_length": self.seq_length,
            "global_batch_size": self.global_batch_size,
            "objective": self.objective,
            "token_budget": self.token_budget,
            "evaluated": self.evaluated,
            "feasible": self.feasible,
            "infeasible": self.infeasible,
            "invalid": self.invalid,
            "framework": self.framework,
            "mfu_basis": MFU_BASIS,
            "distinct": self.distinct,
            "recompute_layer_variants": self.recompute_layer_variants,
            "offload_layer_variants": self.offload_layer_variants,
            "recompute_module_variants": self.recompute_module_variants,
            "fp8_scope_variants": self.fp8_scope_variants,
            "timed": self.timed,
            "memory_probed": self.memory_probed,
            "best": [c.to_dict() for c in self.best],
            "pareto": [c.to_dict() for c in self.pareto],
        }
        if timings:
            out["evaluate_s"] = self.evaluate_s
        return out
