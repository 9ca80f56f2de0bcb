"""Share of each forecast step that is the calibrated residual overhead, per source.

Issue 21 asks that what the model cannot name stay small: "residual overhead ≤ 10% of the
step for every public training source". For one forecast the residual share is

    r = other_s / step_time_s

with ``other_s`` the breakdown's "other (calibrated overhead)" term
(``estimate.training.assemble_step``: ``step_overhead_s + compute_overhead_fraction ·
critical-path kernel seconds``) and ``step_time_s`` the forecast step. Per source the mean and
the largest r of its rows are reported (``perfcast validate --json``, summary
``residual_share_by_source``). Pure functions, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol


class HasResidualShare(Protocol):
    """A compared row that may carry its forecast's residual share."""

    @property
    def source_id(self) -> str: ...

    @property
    def residual_share(self) -> float | None: ...


@dataclass(frozen=True)
class ResidualShareStats:
    """Residual share of the forecast step over one source's rows (fractions of the step)."""

    count: int
    """Rows with a residual share (forecasts whose report has a breakdown)."""
    mean: float
    """Mean of other_s / step_time_s."""
    max: float
    """Largest other_s / step_time_s."""

    def to_dict(self) -> dict[str, float | int]:
        return {"n": self.count, "mean": self.mean, "max": self.max}


def residual_share(other_s: float, step_time_s: float) -> float:
    """r = other_s / step_time_s (dimensionless; module docstring)."""
    if step_time_s <= 0:
        raise ValueError(f"step_time_s must be positive (got {step_time_s!r})")
    return other_s / step_time_s


def residual_share_by_source(
        rows: Iterable[HasResidualShare]) -> dict[str, ResidualShareStats]:
    """Mean and largest residual share per ``source_id`` (sources sorted by name); rows
    without a share are left out, and a source with none is absent."""
    shares: dict[str, list[float]] = {}
    for row in rows:
        if row.residual_share is not None:
            shares.setdefault(row.source_id, []).append(row.residual_share)
    return {source: ResidualShareStats(count=len(values), mean=sum(values) / len(values),
                                       max=max(values))
            for source, values in sorted(shares.items())}
