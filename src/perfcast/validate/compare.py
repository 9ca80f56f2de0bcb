"""Predicted vs measured training throughput over a ground-truth CSV.

``validate_training(path)`` parses every row (``perfcast.validate.training_rows``), forecasts
each parsed row with one estimator call (default ``perfcast.estimate.training.
estimate_training``, imported lazily), and returns a frozen ``ValidationReport``: one
``RowResult`` per forecast row with error = (predicted - measured) / measured on tokens/s/GPU
(../shared/ground_truth/README.md: "Judge throughput, not published TFLOP/s"), the rows that
could not be parsed or forecast with their reasons, and a summary (``error_stats.summarize``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfcast.specs.hardware import SystemSpec
from perfcast.specs.model import ModelSpec
from perfcast.specs.strategy import Strategy
from perfcast.specs.workload import Workload
from perfcast.validate.catalog_lookup import CatalogLookup
from perfcast.validate.csv_fields import cell_text
from perfcast.validate.error_stats import ValidationSummary, summarize
from perfcast.validate.residual_share import residual_share, residual_share_by_source
from perfcast.validate.training_rows import ParsedRow, SkippedRow, parse_rows, read_rows

Estimator = Callable[[ModelSpec, SystemSpec, Strategy, Workload], Any]
"""``estimate_training``-shaped: returns a report with ``tokens_per_s_per_gpu``."""


@dataclass(frozen=True)
class RowResult:
    """One forecast row against its measurement."""

    row_id: str
    source_id: str
    quality: str
    model: str
    """Model name (catalog slug when the catalog matched)."""
    gpu: str
    """Catalog GPU slug."""
    predicted: float
    """Forecast tokens/s/GPU."""
    measured: float
    """Measured tokens/s/GPU (see ``measured_from``)."""
    error: float
    """(predicted - measured) / measured."""
    arch_type: str = "dense"
    measured_from: str = "tokens_per_s_per_gpu"
    predicted_step_time_s: float | None = None
    predicted_mfu: float | None = None
    num_nodes: int | None = None
    """Nodes the run spans: ceil(num_gpus / the system's GPUs per node)."""
    residual_share: float | None = None
    """Calibrated residual overhead as a share of the forecast step (``validate.residual_share``);
    None when the report has no breakdown."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "row_id": self.row_id, "source_id": self.source_id, "quality": self.quality,
            "model": self.model, "gpu": self.gpu, "arch_type": self.arch_type,
            "predicted": self.predicted, "measured": self.measured, "error": self.error,
            "measured_from": self.measured_from,
            "predicted_step_time_s": self.predicted_step_time_s,
            "predicted_mfu": self.predicted_mfu, "num_nodes": self.num_nodes,
            "residual_share": self.residual_share,
        }


@dataclass(frozen=True)
class ValidationReport:
    """Forecast rows, skipped rows with reasons, and error statistics."""

    rows: tuple[RowResult, ...]
    skipped: tuple[SkippedRow, ...]
    summary: ValidationSummary

    def to_dict(self) -> dict[str, Any]:
        return {
            "rows": [row.to_dict() for row in self.rows],
            "skipped": [{"row_id": s.row_id, "reason": s.reason} for s in self.skipped],
            "summary": {
                **self.summary.to_dict(),
                "residual_share_by_source": {
                    source: stats.to_dict()
                    for source, stats in residual_share_by_source(self.rows).items()},
                "num_rows": len(self.rows),
                "num_skipped": len(self.skipped),
            },
        }


def default_estimator() -> Estimator:
    """``perfcast.estimate.training.estimate_training`` (imported on first use)."""
    from perfcast.estimate.training import estimate_training

    return estimate_training


def _optional_float(report: Any, name: str) -> float | None:
    """``report.<name>`` as a finite float, or None when absent or not a number."""
    try:
        value = float(getattr(report, name))
    except (AttributeError, TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def _residual_share(report: Any) -> float | None:
    """``report.breakdown.other_s / report.step_time_s`` (``validate.residual_share``), or
    None when the report has no breakdown or no positive finite step time."""
    other = _optional_float(getattr(report, "breakdown", None), "other_s")
    step = _optional_float(report, "step_time_s")
    return None if other is None or step is None or step <= 0 else residual_share(other, step)


def compare_row(parsed: ParsedRow, estimator: Estimator) -> RowResult | SkippedRow:
    """Forecast one parsed row; any estimator failure becomes a ``SkippedRow``."""
    try:
        report = estimator(parsed.model, parsed.system, parsed.strategy, parsed.workload)
        predicted = float(report.tokens_per_s_per_gpu)
    except Exception as exc:  # noqa: BLE001 - one failing row must not stop the validation
        message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return SkippedRow(parsed.row_id, f"estimate: {message}", parsed.source_id,
                          parsed.quality)
    if not math.isfinite(predicted) or predicted <= 0:
        return SkippedRow(parsed.row_id, f"estimate: tokens_per_s_per_gpu={predicted!r}",
                          parsed.source_id, parsed.quality)
    measured = parsed.measured_tokens_per_s_per_gpu
    return RowResult(
        row_id=parsed.row_id, source_id=parsed.source_id, quality=parsed.quality,
        model=parsed.model.name, gpu=parsed.system.gpu.name, predicted=predicted,
        measured=measured, error=(predicted - measured) / measured,
        arch_type=parsed.arch_type, measured_from=parsed.measured_from,
        predicted_step_time_s=_optional_float(report, "step_time_s"),
        predicted_mfu=_optional_float(report, "mfu"),
        num_nodes=-(-parsed.strategy.num_gpus // parsed.system.gpus_per_node),
        residual_share=_residual_share(report),
    )


def _raw_arch_type(row: dict[str, str | None]) -> str:
    """'dense' / 'moe' from the CSV ``arch_type`` text ('' when empty)."""
    text = cell_text(row, "arch_type").lower()
    return text.split()[0] if text else ""


def _keep(row: dict[str, str | None], qualities: frozenset[str] | None) -> bool:
    return qualities is None or cell_text(row, "quality").upper() in qualities


def compare_rows(
    parsed: Iterable[ParsedRow], skipped: Iterable[SkippedRow], estimator: Estimator
) -> ValidationReport:
    """Forecast every parsed row and assemble the report (parse skips come first)."""
    results: list[RowResult] = []
    all_skipped = list(skipped)
    for row in parsed:
        outcome = compare_row(row, estimator)
        if isinstance(outcome, RowResult):
            results.append(outcome)
        else:
            all_skipped.append(outcome)
    return ValidationReport(rows=tuple(results), skipped=tuple(all_skipped),
                            summary=summarize(results))


def validate_training(
    path: Path | str,
    estimator: Estimator | None = None,
    qualities: Sequence[str] | None = None,
    arch_types: Sequence[str] | None = None,
    catalog: CatalogLookup | None = None,
) -> ValidationReport:
    """Forecast every row of a training.csv-schema file and compare with the measurements.

    ``qualities`` keeps rows of those quality grades (e.g. ``("A", "B")``); ``arch_types``
    keeps rows whose architecture is one of ``"dense"``/``"moe"`` (the parsed model decides;
    for rows that fail to parse, the CSV ``arch_type`` text, and rows without one are kept).
    Rows filtered out appear neither in ``rows`` nor in ``skipped``.
    """
    grades = frozenset(q.strip().upper() for q in qualities) if qualities else None
    kinds = frozenset(a.strip().lower() for a in arch_types) if arch_types else None
    raw = [row for row in read_rows(Path(path)) if _keep(row, grades)]
    parsed, skipped = parse_rows(raw, catalog)
    if kinds is not None:
        raw_kind = {cell_text(row, "row_id"): _raw_arch_type(row) for row in raw}
        parsed = [p for p in parsed if p.arch_type in kinds]
        skipped = [s for s in skipped if raw_kind.get(s.row_id, "") in kinds | {""}]
    return compare_rows(parsed, skipped, estimator or default_estimator())
