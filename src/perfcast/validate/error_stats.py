"""Error statistics of predictions against measurements (pure functions, no I/O).

For relative errors e_i = (predicted_i - measured_i) / measured_i:

- MAPE = mean(|e_i|) (mean absolute percentage error, as a fraction);
- median absolute error = median(|e_i|);
- share within 10% / 20% = fraction of rows with |e_i| <= 0.10 / 0.20;
- worst rows = the ``WORST_N`` rows with the largest |e_i| (ties broken by row order).

An empty set has count 0 and NaN statistics (``perfcast.report.json_out`` writes NaN as null).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

WORST_N = 5
ROUNDING_SLACK = 1e-12
"""|e| within 10% allows this much float slack (110 vs 100 gives e = 0.10000000000000009)."""


class HasError(Protocol):
    """A compared row (read-only, so frozen dataclasses and properties both qualify)."""

    @property
    def row_id(self) -> str: ...

    @property
    def source_id(self) -> str: ...

    @property
    def error(self) -> float: ...


@dataclass(frozen=True)
class ErrorStats:
    """Error statistics of one group of rows."""

    count: int
    mape: float
    """Mean absolute relative error (fraction; 0.1 = 10%)."""
    median_abs_error: float
    """Median absolute relative error (fraction)."""
    within_10pct: float
    """Share of rows with |error| <= 10% (fraction)."""
    within_20pct: float
    """Share of rows with |error| <= 20% (fraction)."""
    worst: tuple[tuple[str, float], ...]
    """(row_id, error) of the rows with the largest |error|, largest first."""

    def to_dict(self) -> dict:
        return {
            "count": self.count,
            "mape": self.mape,
            "median_abs_error": self.median_abs_error,
            "within_10pct": self.within_10pct,
            "within_20pct": self.within_20pct,
            "worst": [{"row_id": row_id, "error": error} for row_id, error in self.worst],
        }


@dataclass(frozen=True)
class ValidationSummary:
    """Statistics over all rows, per ``source_id`` (sources sorted by name) and per scale
    (``single-node`` / ``multi-node`` for rows that say how many nodes they span)."""

    overall: ErrorStats
    by_source: tuple[tuple[str, ErrorStats], ...]
    by_scale: tuple[tuple[str, ErrorStats], ...] = ()

    def source(self, source_id: str) -> ErrorStats | None:
        return dict(self.by_source).get(source_id)

    def to_dict(self) -> dict:
        return {
            "overall": self.overall.to_dict(),
            "by_source": {source: stats.to_dict() for source, stats in self.by_source},
            "by_scale": {scale: stats.to_dict() for scale, stats in self.by_scale},
        }


def error_stats(results: Sequence[HasError], worst_n: int = WORST_N) -> ErrorStats:
    """Statistics of ``results`` (anything with ``row_id`` and ``error``)."""
    if not results:
        nan = math.nan
        return ErrorStats(count=0, mape=nan, median_abs_error=nan, within_10pct=nan,
                          within_20pct=nan, worst=())
    abs_errors = [abs(r.error) for r in results]
    count = len(abs_errors)
    order = sorted(range(count), key=lambda i: -abs_errors[i])[:worst_n]
    return ErrorStats(
        count=count,
        mape=sum(abs_errors) / count,
        median_abs_error=statistics.median(abs_errors),
        within_10pct=sum(e <= 0.10 + ROUNDING_SLACK for e in abs_errors) / count,
        within_20pct=sum(e <= 0.20 + ROUNDING_SLACK for e in abs_errors) / count,
        worst=tuple((results[i].row_id, results[i].error) for i in order),
    )


def summarize(results: Iterable[HasError], worst_n: int = WORST_N) -> ValidationSummary:
    """Overall and per-source statistics of ``results``."""
    rows = list(results)
    groups: dict[str, list[HasError]] = {}
    scales: dict[str, list[HasError]] = {}
    for row in rows:
        groups.setdefault(row.source_id, []).append(row)
        nodes = getattr(row, "num_nodes", None)
        if nodes is not None:
            scales.setdefault("multi-node" if nodes > 1 else "single-node", []).append(row)
    return ValidationSummary(
        overall=error_stats(rows, worst_n),
        by_source=tuple((s, error_stats(groups[s], worst_n)) for s in sorted(groups)),
        by_scale=tuple((s, error_stats(scales[s], worst_n)) for s in sorted(scales)),
    )
