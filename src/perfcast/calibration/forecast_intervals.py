"""Loader and schema of ``forecast_intervals.yaml``: 80% bands of a forecast from the
leave-one-source-out residuals of comparable measured runs.

A residual is r = log(forecast time / measured time) of a held-out row (training: step time,
i.e. −log(1 + e) for the throughput error e; serving: the row's latency, or the inverse of
its throughput). For a forecast, the band of the measured value is forecast time · exp(−r)
between the ``low``/``high`` quantiles (10th/90th percentile for ``level`` 0.8) of the
residuals of the most specific group with at least ``min_runs`` rows, from
``generation|arch|scale`` down to ``all``. A generation with no measured run at all gets the
``all`` band widened by ``widen_factor`` (in log space), and says so (Efron & Tibshirani 1993,
ch. 17: prediction error from cross-validation; empirical quantiles as the interval).
"""

from __future__ import annotations

import math
from functools import cache
from pathlib import Path
from typing import Final

from pydantic import BaseModel, ConfigDict, Field

from perfcast.calibration._files import CALIBRATION_DIR, load_yaml_model
from perfcast.calibration.fit_record import FitRecord

FORECAST_INTERVALS_PATH: Final[Path] = CALIBRATION_DIR / "forecast_intervals.yaml"


class ResidualBand(BaseModel):
    """Quantiles of the log time ratio of one group of held-out runs."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    n: int = Field(ge=1, description="Held-out runs in the group.")
    low: float = Field(description="Lower quantile of log(forecast time / measured time).")
    high: float = Field(description="Upper quantile of log(forecast time / measured time).")


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
    """Lookup order, most specific first."""
    return (f"{generation}|{arch}|{scale}", f"{generation}|{arch}", f"{generation}",
            f"{arch}|{scale}", arch, "all")


class ResidualBands(BaseModel):
    """Bands of one kind of forecast (training or serving) by group key."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    groups: dict[str, ResidualBand]

    def interval(self, generation: str, arch: str, scale: str, value: float, is_rate: bool,
                 level: float, min_runs: int, widen_factor: float) -> ForecastInterval | None:
        """The band of a forecast ``value``: a time (measured = value·exp(−r)) or, with
        ``is_rate``, a throughput (measured = value·exp(r)). None without any group."""
        known = any(k.split("|")[0] == generation for k in self.groups)
        widened = not known
        for key in group_keys(generation, arch, scale):
            band = self.groups.get(key)
            if band is not None and band.n >= min_runs and (known or key == "all"):
                break
        else:
            return None
        low_r, high_r = band.low, band.high
        if widened:
            mid = (low_r + high_r) / 2
            low_r, high_r = mid - (mid - low_r) * widen_factor, mid + (high_r - mid) * widen_factor
        if is_rate:
            low, high = value * math.exp(low_r), value * math.exp(high_r)
        else:
            low, high = value * math.exp(-high_r), value * math.exp(-low_r)
        basis = f"cv residuals of {band.n} runs ({key})"
        if widened:
            basis = (f"no comparable run on {generation} GPUs: cv residuals of all {band.n} runs, "
                     f"widened {widen_factor:g}x")
        return ForecastInterval(low=low, high=high, level=level, basis=basis, widened=widened)


class ForecastIntervals(BaseModel):
    """The whole file."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    fit: FitRecord | None = None
    level: float = Field(gt=0, lt=1, description="Share of measured runs a band should hold.")
    min_runs: int = Field(ge=1, description="Fewest runs a group needs to give a band.")
    widen_factor: float = Field(ge=1, description="Band stretch without a comparable run.")
    training: ResidualBands
    serving: ResidualBands


@cache
def load_forecast_intervals(path: Path | None = None) -> ForecastIntervals | None:
    """The bands in ``path`` (the shipped file when None; None if there is none); cached."""
    path = path or FORECAST_INTERVALS_PATH
    return load_yaml_model(ForecastIntervals, path) if path.is_file() else None
