"""Does the run fit, and if not, the cheapest single change that makes it fit.

Candidates are tried in the order of what they cost in step time, cheapest first, following
the usual practice of large-model training (Korthikanti et al. 2022 §5: selective recompute
costs a few percent; Rajbhandari et al. 2020, ZeRO §5: sharding optimizer states costs no
extra communication volume, sharding parameters 1.5x; full recompute costs about a third of a
step; a smaller micro-batch lowers GEMM efficiency; more TP/PP adds communication and
bubbles). Each candidate is one ``estimate_memory`` call (closed-form, ~1 ms), so the search is
cheap; invalid candidates (TP not dividing the heads, a batch that does not split) are skipped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from perfcast.memory.estimate import estimate_memory
from perfcast.memory.report import MemoryReport
from perfcast.specs.hardware import SystemSpec
from perfcast.specs.model import ModelSpec
from perfcast.specs.strategy import Strategy
from perfcast.specs.workload import Workload


@dataclass(frozen=True)
class FitChange:
    """A change of the command line and the peak memory per GPU it gives."""

    flags: str
    """What to add or change on the command line, e.g. '--recompute selective'."""
    peak_bytes: float


def _candidates(strategy: Strategy) -> Iterator[tuple[str, dict]]:
    if strategy.recompute == "none":
        yield "--recompute selective", {"recompute": "selective"}
    if strategy.dp > 1 and not strategy.distributed_optimizer and strategy.zero_stage == 0 \
            and not strategy.fsdp:
        yield "--use-distributed-optimizer", {"distributed_optimizer": True}
    if strategy.tp > 1 and not strategy.sequence_parallel:
        yield "--sequence-parallel", {"sequence_parallel": True}
    if strategy.dp > 1 and not strategy.fsdp and strategy.zero_stage in (0, 1, 2):
        yield "--fsdp", {"fsdp": True, "zero_stage": 0, "distributed_optimizer": False}
    if strategy.recompute != "full" or strategy.recompute_num_layers is not None:
        yield "--recompute full", {"recompute": "full", "recompute_num_layers": None}
    if strategy.micro_batch_size > 1:
        yield "--micro-batch-size 1", {"micro_batch_size": 1}
    for factor in (2, 4, 8):
        yield f"--tp {strategy.tp * factor}", {"tp": strategy.tp * factor}
        yield f"--pp {strategy.pp * factor}", {"pp": strategy.pp * factor}


def cheapest_fitting_change(model: ModelSpec, system: SystemSpec, strategy: Strategy,
                            workload: Workload,
                            memory: Callable[..., MemoryReport] = estimate_memory
                            ) -> FitChange | None:
    """The first candidate (cheapest in step time) whose worst stage fits in HBM, or None."""
    from pydantic import ValidationError

    from perfcast.errors import InputError

    for flags, update in _candidates(strategy):
        try:
            changed = Strategy.model_validate({**strategy.model_dump(), **update})
            report = memory(model, system, changed, workload)
        except (InputError, ValidationError, ValueError):
            continue
        if report.fits:
            return FitChange(flags, report.peak_bytes)
    return None


def fit_verdict(report: MemoryReport, change: FitChange | None) -> str:
    """One line: 'fits: ...' or 'does NOT fit: ...; cheapest change that fits: ...'."""
    gib = 2**30
    peak, capacity = report.peak_bytes / gib, report.capacity_bytes / gib
    if report.fits:
        return (f"fits: peak {peak:,.1f} GiB of {capacity:,.1f} GiB per GPU "
                f"({report.peak_bytes / report.capacity_bytes:.0%}, stage {report.peak_stage})")
    line = (f"does NOT fit: needs {peak:,.1f} GiB per GPU (stage {report.peak_stage}), "
            f"HBM holds {capacity:,.1f} GiB")
    if change is None:
        return line + "; no single change of recompute, sharding, micro-batch, TP or PP fits"
    return line + f"; cheapest change that fits: {change.flags} ({change.peak_bytes / gib:,.1f} GiB)"


def inference_fit_verdict(report) -> str:
    """One line for ``perfcast infer``: does the batch fit (weights + KV cache + activations per
    GPU), and if not, the largest batch that does (``InferenceReport.max_batch_size``)."""
    gib = 2**30
    memory = report.memory
    used, capacity = memory.total_bytes / gib, memory.capacity_bytes / gib
    if memory.fits:
        return (f"fits: {used:,.1f} GiB of {capacity:,.1f} GiB per GPU; largest batch that "
                f"fits: {report.max_batch_size:,}")
    line = f"does NOT fit: needs {used:,.1f} GiB per GPU, HBM holds {capacity:,.1f} GiB"
    if report.max_batch_size >= 1:
        return line + f"; cheapest change that fits: --batch-size {report.max_batch_size:,}"
    return line + "; even batch 1 does not fit: more --tp/--pp, or lower --weight-precision"
