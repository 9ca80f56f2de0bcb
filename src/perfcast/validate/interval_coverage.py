"""Out-of-sample check of the forecast bands, and the choice of their one free value.

``coverage``: for each source, build the bands from every OTHER source's held-out residuals
(``build_bands(..., exclude_source=...)``) and count the source's rows whose measurement falls
inside -- exactly what a user's new source would see. Reported per row, per source (each
source weighing once) and per class (generation|dense/MoE). ``choose_prior_sources`` picks
the shrinkage strength ν0 of ``predictive_band`` from ``PRIOR_GRID`` that brings both the
row and the source coverage closest to the level (the cross-validated choice of a
hyper-parameter; Hastie, Tibshirani & Friedman, *Elements of Statistical Learning* §7.10),
among the ν0 whose row coverage is within ``ROW_TOLERANCE`` of the level where any is: the
row share is what a band promises (issue 21: "about 80% of held-out rows fall inside their
80% band"), the source share is the secondary check.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from perfcast.calibration.forecast_intervals import stretched
from perfcast.validate.intervals import LEVEL, MIN_SOURCES, WIDEN_FACTOR, Residual, build_bands

PRIOR_GRID: tuple[float, ...] = (0.0, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0)
"""Candidate pseudo-source counts ν0 (0: each group on its own sources only)."""
ROW_TOLERANCE = 0.05
"""Row coverage within level ± this is "about" the level (the test range, 75-85% at 80%)."""


@dataclass(frozen=True)
class ShareInside:
    """Held-out rows of one class (or source) inside their band."""

    name: str
    inside: int
    total: int

    @property
    def share(self) -> float:
        return self.inside / self.total if self.total else math.nan


@dataclass(frozen=True)
class CoverageReport:
    """Leave-one-source-out coverage of the bands."""

    prior_sources: float
    rows: ShareInside
    without_band: int
    """Rows whose fold had no band at all (fewer than ``min_sources`` other sources)."""
    by_source: tuple[ShareInside, ...]
    by_class: tuple[ShareInside, ...]

    @property
    def source_share(self) -> float:
        """Mean over sources of each source's share (each source weighs once)."""
        return sum(s.share for s in self.by_source) / len(self.by_source)

    def lines(self) -> list[str]:
        """Readable summary, one line a class."""
        out = [f"rows {self.rows.inside}/{self.rows.total} = {self.rows.share:.1%}, mean over "
               f"{len(self.by_source)} sources {self.source_share:.1%} (prior sources "
               f"{self.prior_sources:g})"]
        out += [f"  {c.name:28} {c.inside:4}/{c.total:<4} {c.share:6.1%}" for c in self.by_class]
        return out


def coverage(residuals: Sequence[Residual], level: float = LEVEL, prior_sources: float = 0.0,
             min_sources: int = MIN_SOURCES, widen_factor: float = WIDEN_FACTOR
             ) -> CoverageReport:
    """Share of rows inside the band built without their source (module docstring); a row
    with no band at all counts as outside (and in ``without_band``)."""
    per_source: dict[str, list[bool]] = {}
    per_class: dict[str, list[bool]] = {}
    without_band = 0
    for source in sorted({r.source_id for r in residuals}):
        bands = build_bands(residuals, level, prior_sources, source, min_sources)
        for res in (r for r in residuals if r.source_id == source):
            chosen = bands.choose(res.generation, res.arch, res.scale, min_sources)
            inside = False
            without_band += chosen is None
            if chosen is not None:
                low, high = stretched(chosen, widen_factor)
                inside = low <= res.log_time_ratio <= high
            per_source.setdefault(source, []).append(inside)
            per_class.setdefault(f"{res.generation}|{res.arch}", []).append(inside)

    def shares(d: dict[str, list[bool]]) -> tuple[ShareInside, ...]:
        return tuple(ShareInside(k, sum(v), len(v)) for k, v in sorted(d.items()))

    by_source = shares(per_source)
    return CoverageReport(
        prior_sources=prior_sources,
        rows=ShareInside("all", sum(s.inside for s in by_source),
                         sum(s.total for s in by_source)),
        without_band=without_band, by_source=by_source, by_class=shares(per_class))


def choose_prior_sources(residuals: Sequence[Residual], level: float = LEVEL,
                         min_sources: int = MIN_SOURCES, widen_factor: float = WIDEN_FACTOR,
                         grid: Sequence[float] = PRIOR_GRID) -> CoverageReport:
    """The coverage of the ν0 in ``grid`` whose larger miss (row share or source share
    against ``level``) is smallest, among those whose row share is within ``ROW_TOLERANCE``
    of ``level`` (all of them when none is); ties go to the smaller ν0."""
    reports = [coverage(residuals, level, nu0, min_sources, widen_factor)
               for nu0 in grid if min_sources - 1 + nu0 > 0]
    if not reports:
        raise ValueError(f"no prior in {tuple(grid)} works with min_sources={min_sources}")
    about = [r for r in reports if abs(r.rows.share - level) <= ROW_TOLERANCE + 1e-12]
    best = (about or reports)[0]
    for report in about or reports:
        if _larger_miss(report, level) < _larger_miss(best, level) - 1e-12:
            best = report
    return best


def _larger_miss(report: CoverageReport, level: float) -> float:
    """max(|row share − level|, |source share − level|)."""
    return max(abs(report.rows.share - level), abs(report.source_share - level))
