"""Out-of-sample check of the forecast bands, and the choice of their three free values.

``coverage``: for each source, build the bands from every OTHER source's held-out residuals
(``build_bands(..., exclude_source=...)``) and count the source's rows whose measurement falls
inside -- exactly what a user's new source would see. Reported per row, per source (each
source weighing once) and per class (generation|dense/MoE), with the median width of the
bands the rows got. ``choose_band_settings`` picks the free values of the double-conformal
band (``validate.intervals.double_conformal_band``: pseudo-sources ν0 from ``PRIOR_GRID``,
the between-source tail share a2 from ``BETWEEN_TAIL_GRID``; the within-source share a1 stays
at its nominal (1 − level)/2) that bring the row AND the source coverage closest to the
level (the cross-validated choice of hyper-parameters;
Hastie, Tibshirani & Friedman, *Elements of Statistical Learning* §7.10), among those whose
row coverage is within ``ROW_TOLERANCE`` of the level where any is: the row share is what a
band promises (issue 21: "about 80% of held-out rows fall inside their 80% band"), the
source share says it holds for a new source of any size (issue 21 follow-up: a band honest
at both levels). Ties go to the narrower band. ``nested_coverage`` checks the choice
itself out of sample: each source's rows against bands whose free values were chosen
without it too (nested cross-validation, ESL §7.10.2).

Measured 2026-11-25 (plain / nested, held-out rows): training 75.5% / 75.7%, serving 76.6% /
72.2%. A prototype that chose a1 as well (a1, a2 from {0.1, 0.2, 0.3}) reached 78% of training
rows plainly but about 67% nested: the larger choice overfitted, so a1 stays nominal.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import product

import numpy as np

from perfcast.calibration.forecast_intervals import BandSettings, stretched
from perfcast.validate.intervals import (
    LEVEL,
    MIN_SOURCES,
    NOMINAL,
    WIDEN_FACTOR,
    Residual,
    build_bands,
)

PRIOR_GRID: tuple[float, ...] = (0.0, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0)
"""Candidate pseudo-source counts ν0 (0: each group on its own sources only)."""
BETWEEN_TAIL_GRID: tuple[float, ...] = (0.1, 0.2, 0.3)
"""Candidate between-source tail shares a2: from the even split of Dunn et al.'s bound
a1 + a2 = 1 − level (0.1 at 80%) up to 0.3 (the bound is loose: a source's rows outside its
own quantiles and a source outside the others' overlap)."""
ROW_TOLERANCE = 0.05
"""Row coverage within level ± this is "about" the level (the test range, 75-85% at 80%)."""


def settings_grid(level: float = LEVEL) -> tuple[BandSettings, ...]:
    """Every candidate (ν0, a1 = (1 − level)/2, a2)."""
    return tuple(BandSettings(nu0, round((1 - level) / 2, 9), a2)
                 for nu0, a2 in product(PRIOR_GRID, BETWEEN_TAIL_GRID))


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

    settings: BandSettings
    rows: ShareInside
    without_band: int
    """Rows whose fold had no band at all (fewer than ``min_sources`` other sources)."""
    by_source: tuple[ShareInside, ...]
    by_class: tuple[ShareInside, ...]
    median_half_width: float
    """Median over the rows with a band of its geometric half-width exp((high − low)/2) − 1
    (log-ratio edges): the band is the forecast ×/÷ about (1 + this). NaN without any band."""

    @property
    def source_share(self) -> float:
        """Mean over sources of each source's share (each source weighs once)."""
        return sum(s.share for s in self.by_source) / len(self.by_source)

    def lines(self) -> list[str]:
        """Readable summary, one line a class."""
        s = self.settings
        out = [f"rows {self.rows.inside}/{self.rows.total} = {self.rows.share:.1%}, mean over "
               f"{len(self.by_source)} sources {self.source_share:.1%}, median half-width "
               f"{self.median_half_width:.1%} (prior sources {s.prior_sources:g}, tails "
               f"within {s.within_tail:g} / between {s.between_tail:g})"]
        out += [f"  {c.name:28} {c.inside:4}/{c.total:<4} {c.share:6.1%}" for c in self.by_class]
        return out


@dataclass(frozen=True)
class _Fold:
    """One held-out source's rows against the bands built without it."""

    source: str
    inside: tuple[bool, ...]
    classes: tuple[str, ...]
    """generation|arch of each row."""
    half_widths: tuple[float, ...]
    """Geometric half-width of each row's band (rows with a band only)."""
    without_band: int


def _fold(residuals: Sequence[Residual], settings: BandSettings, source: str,
          min_sources: int, widen_factor: float) -> _Fold:
    bands = build_bands(residuals, settings, source, min_sources)
    inside: list[bool] = []
    classes: list[str] = []
    half_widths: list[float] = []
    without_band = 0
    for res in (r for r in residuals if r.source_id == source):
        chosen = bands.choose(res.generation, res.arch, res.scale, min_sources)
        hit = False
        without_band += chosen is None
        if chosen is not None:
            low, high = stretched(chosen, widen_factor)
            hit = low <= res.log_time_ratio <= high
            half_widths.append(math.expm1((high - low) / 2))
        inside.append(hit)
        classes.append(f"{res.generation}|{res.arch}")
    return _Fold(source, tuple(inside), tuple(classes), tuple(half_widths), without_band)


def _report(settings: BandSettings, folds: Sequence[_Fold]) -> CoverageReport:
    per_class: dict[str, list[bool]] = {}
    for fold in folds:
        for name, hit in zip(fold.classes, fold.inside, strict=True):
            per_class.setdefault(name, []).append(hit)
    by_source = tuple(ShareInside(f.source, sum(f.inside), len(f.inside))
                      for f in sorted(folds, key=lambda f: f.source))
    widths = [w for f in folds for w in f.half_widths]
    return CoverageReport(
        settings=settings,
        rows=ShareInside("all", sum(s.inside for s in by_source),
                         sum(s.total for s in by_source)),
        without_band=sum(f.without_band for f in folds), by_source=by_source,
        by_class=tuple(ShareInside(k, sum(v), len(v)) for k, v in sorted(per_class.items())),
        median_half_width=float(np.median(widths)) if widths else math.nan)


def coverage(residuals: Sequence[Residual], settings: BandSettings = NOMINAL,
             min_sources: int = MIN_SOURCES, widen_factor: float = WIDEN_FACTOR
             ) -> CoverageReport:
    """Share of rows inside the band built without their source (module docstring); a row
    with no band at all counts as outside (and in ``without_band``)."""
    return _report(settings, [_fold(residuals, settings, source, min_sources, widen_factor)
                              for source in sorted({r.source_id for r in residuals})])


def choose_band_settings(residuals: Sequence[Residual], level: float = LEVEL,
                         min_sources: int = MIN_SOURCES, widen_factor: float = WIDEN_FACTOR,
                         grid: Sequence[BandSettings] | None = None) -> CoverageReport:
    """The coverage of the settings in ``grid`` (``settings_grid(level)`` when None) whose larger
    miss (row share or source share against ``level``) is smallest, among those whose row
    share is within ``ROW_TOLERANCE`` of ``level`` (all of them when none is); ties go to the
    narrower band, then to the earlier settings."""
    reports = [coverage(residuals, s, min_sources, widen_factor)
               for s in (settings_grid(level) if grid is None else grid)]
    if not reports:
        raise ValueError("no band settings to choose from")
    about = [r for r in reports if abs(r.rows.share - level) <= ROW_TOLERANCE + 1e-12]
    return min(about or reports,
               key=lambda r: (round(_larger_miss(r, level), 12),
                              math.inf if math.isnan(r.median_half_width)
                              else r.median_half_width))


def _larger_miss(report: CoverageReport, level: float) -> float:
    """max(|row share − level|, |source share − level|)."""
    return max(abs(report.rows.share - level), abs(report.source_share - level))


def nested_coverage(residuals: Sequence[Residual], level: float = LEVEL,
                    min_sources: int = MIN_SOURCES, widen_factor: float = WIDEN_FACTOR
                    ) -> CoverageReport:
    """``coverage`` with the free values chosen without the held-out source as well: for each
    source, ``choose_band_settings`` on the other sources' residuals, then the source's rows
    against the bands built from the others with those values (module docstring). The
    report's ``settings`` are those chosen on all sources."""
    folds = []
    for source in sorted({r.source_id for r in residuals}):
        others = [r for r in residuals if r.source_id != source]
        chosen = choose_band_settings(others, level, min_sources, widen_factor).settings
        folds.append(_fold(residuals, chosen, source, min_sources, widen_factor))
    return _report(choose_band_settings(residuals, level, min_sources, widen_factor).settings,
                   folds)
