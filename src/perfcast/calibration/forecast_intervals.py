"""Loader and schema of ``forecast_intervals.yaml``: 80% bands of a forecast from what a
held-out source really sees -- the leave-one-source-out residuals of comparable sources.

A residual is r = log(forecast time / measured time) of a held-out row (training: step time,
i.e. −log(1 + e) for the throughput error e; serving: the row's latency, or the inverse of
its throughput). Most of the error a new source sees is its own systematic offset, so sources,
not rows, are the exchangeable units of a two-layer hierarchy (rows within sources). The band
of each group of comparable runs (``generation|arch|scale`` down to ``all``) is the "double
conformal" prediction set for a new group of Dunn, Wasserman & Ramdas ("Distribution-free
prediction sets for two-layer hierarchical models", JASA 118 (2023), §3.2): per source, the
within-source ``within_tail``/2 and 1 − ``within_tail``/2 quantiles of its rows; across
sources, the ``between_tail``/2 quantile of the lower ends and the 1 − ``between_tail``/2
quantile of the upper ends, each source weighing once; the ``all`` group's sources join every
group as ``prior_sources`` pseudo-sources (few comparable sources lean on every source's
spread). ``validate/intervals.py`` builds it; ``within_tail`` stays at (1 − level)/2, the
other two are chosen by leave-one-source-out coverage of rows AND of sources
(``validate/interval_coverage.py``). For the reader the
file also keeps each group's random-effects moments r = μ + u_source + ε_row (Gelman et al.,
*Bayesian Data Analysis*, 3rd ed., ch. 5): the source-weighted centre μ̂, τ², σ² (robust
moments, ``validate.intervals.source_spread``).

A forecast takes the most specific group with at least ``min_sources`` sources. A generation
with no measured run at all takes the best non-generation group (dense/MoE and scale), widened
by ``widen_factor`` in log space, and says "no comparable run".
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Final

from pydantic import BaseModel, ConfigDict, Field

from perfcast.calibration._files import CALIBRATION_DIR, load_yaml_model
from perfcast.calibration.fit_record import FitRecord

FORECAST_INTERVALS_PATH: Final[Path] = CALIBRATION_DIR / "forecast_intervals.yaml"


class ResidualBand(BaseModel):
    """One group of comparable held-out runs: its random-effects spread and its band."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    n: int = Field(ge=1, description="Held-out runs (rows) in the group.")
    num_sources: int = Field(ge=1, description="Sources the runs come from.")
    center: float = Field(description="Median over sources of each source's mean log ratio.")
    between_var: float = Field(ge=0, description="Robust variance of the source means (τ², "
                                                 "(1.4826·MAD)²).")
    within_var: float = Field(ge=0, description="Median over sources of the within-source "
                                                "variance of the log ratio (σ²).")
    low: float = Field(description="Lower band edge of log(forecast time / measured time).")
    high: float = Field(description="Upper band edge of log(forecast time / measured time).")


class ForecastInterval(BaseModel):
    """A band of a forecast quantity (its unit), with what it rests on."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    low: float
    high: float
    level: float
    basis: str
    widened: bool

    def to_dict(self) -> dict:
        return {"low": self.low, "high": self.high, "level": self.level, "basis": self.basis,
                "widened": self.widened}

    def half_width(self, value: float) -> float:
        """(high − low) / 2 relative to ``value``, for '±x%'."""
        return (self.high - self.low) / 2 / value


def group_keys(generation: str, arch: str, scale: str) -> tuple[str, ...]:
    """Lookup order, most specific first (the first three name the generation)."""
    return (f"{generation}|{arch}|{scale}", f"{generation}|{arch}", f"{generation}",
            f"{arch}|{scale}", arch, "all")


GENERATION_KEYS: Final[int] = 3
"""The first ``GENERATION_KEYS`` entries of ``group_keys`` are specific to a generation."""


@dataclass(frozen=True)
class ChosenBand:
    """The group a forecast's band comes from."""

    key: str
    band: ResidualBand
    widened: bool
    """True when the generation has no measured run (the band is stretched)."""


@dataclass(frozen=True)
class BandSettings:
    """The free values of the double-conformal band (module docstring); ν0 and a2 chosen by
    leave-one-source-out coverage (``validate.interval_coverage.choose_band_settings``)."""

    prior_sources: float = 0.0
    """Pseudo-sources ν0: the ``all`` group's sources join every group with total weight ν0."""
    within_tail: float = 0.1
    """Share of a source's rows outside its own quantiles (a1 of Dunn et al. 2023)."""
    between_tail: float = 0.1
    """Share of sources (each once) outside the band's ends (a2 of Dunn et al. 2023)."""


class ResidualBands(BaseModel):
    """Bands of one kind of forecast (training or serving) by group key."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    prior_sources: float = Field(
        default=0.0, ge=0,
        description="Pseudo-sources ν0: the 'all' group's sources join every group's with "
                    "total weight ν0; chosen by leave-one-source-out coverage.")
    within_tail: float = Field(
        default=0.1, gt=0, lt=1,
        description="Share of each source's rows outside its within-source quantiles (a1).")
    between_tail: float = Field(
        default=0.1, gt=0, lt=1,
        description="Share of sources outside the band's across-source quantiles (a2).")
    cv_coverage: float | None = Field(
        default=None, description="Share of held-out rows inside the band built without "
                                  "their own source (the check the prior was chosen on).")
    cv_coverage_by_source: float | None = Field(
        default=None, description="The same share averaged over sources (each source once).")
    cv_median_half_width: float | None = Field(
        default=None, description="Median over those held-out rows of their band's half-width "
                                  "(high − low)/2 relative to the forecast.")
    generations: tuple[str, ...] = Field(
        default=(), description="GPU generations with at least one measured run.")
    groups: dict[str, ResidualBand] = Field(
        description="Group key -> band; only groups with at least min_sources sources.")

    @property
    def settings(self) -> BandSettings:
        """The free values the bands were built with."""
        return BandSettings(self.prior_sources, self.within_tail, self.between_tail)

    def choose(self, generation: str, arch: str, scale: str,
               min_sources: int) -> ChosenBand | None:
        """Most specific group with ≥ ``min_sources`` sources (module docstring)."""
        keys = group_keys(generation, arch, scale)
        known = generation in self.generations
        for key in keys if known else keys[GENERATION_KEYS:]:
            band = self.groups.get(key)
            if band is not None and band.num_sources >= min_sources:
                return ChosenBand(key, band, widened=not known)
        return None

    def interval(self, generation: str, arch: str, scale: str, value: float, is_rate: bool,
                 level: float, min_sources: int,
                 widen_factor: float) -> ForecastInterval | None:
        """The band of a forecast ``value``: a time (measured = value·exp(−r)) or, with
        ``is_rate``, a throughput (measured = value·exp(r)). None without any group."""
        chosen = self.choose(generation, arch, scale, min_sources)
        if chosen is None:
            return None
        low_r, high_r = stretched(chosen, widen_factor)
        if is_rate:
            low, high = value * math.exp(low_r), value * math.exp(high_r)
        else:
            low, high = value * math.exp(-high_r), value * math.exp(-low_r)
        band = chosen.band
        basis = (f"cv residuals of {band.n} runs from {band.num_sources} sources "
                 f"({chosen.key})")
        if not chosen.widened and chosen.key.split("|")[0] != generation:
            basis += f"; fewer than {min_sources} sources on {generation}"
        if chosen.widened:
            basis = (f"no comparable run on {generation} GPUs: cv residuals of {band.n} runs "
                     f"from {band.num_sources} sources ({chosen.key}), widened "
                     f"{widen_factor:g}x")
        return ForecastInterval(low=low, high=high, level=level, basis=basis,
                                widened=chosen.widened)


def stretched(chosen: ChosenBand, widen_factor: float) -> tuple[float, float]:
    """Band edges (log ratio) of ``chosen``, stretched ``widen_factor``x about their middle
    when the generation has no measured run."""
    low_r, high_r = chosen.band.low, chosen.band.high
    if not chosen.widened:
        return low_r, high_r
    mid = (low_r + high_r) / 2
    return mid - (mid - low_r) * widen_factor, mid + (high_r - mid) * widen_factor


class ForecastIntervals(BaseModel):
    """The whole file."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    fit: FitRecord | None = None
    level: float = Field(gt=0, lt=1, description="Share of measured runs a band should hold.")
    min_sources: int = Field(ge=2, description="Fewest sources a group needs to give a band.")
    widen_factor: float = Field(ge=1, description="Band stretch without a comparable run.")
    training: ResidualBands
    serving: ResidualBands


@cache
def load_forecast_intervals(path: Path | None = None) -> ForecastIntervals | None:
    """The bands in ``path`` (the shipped file when None; None if there is none); cached."""
    path = path or FORECAST_INTERVALS_PATH
    return load_yaml_model(ForecastIntervals, path) if path.is_file() else None
