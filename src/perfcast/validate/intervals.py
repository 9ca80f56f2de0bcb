"""Forecast bands from cross-validated residuals (``calibration/forecast_intervals.py``).

``residuals_*`` turn held-out rows into log time ratios r = log(forecast time / measured time)
with their group (GPU generation, dense/MoE, single-/multi-node; serving rows: generation
only); ``build_bands`` gives every group its band for a NEW source: the double-conformal set
of Dunn, Wasserman & Ramdas (JASA 2023, §3.2), sources as the exchangeable units, the ``all``
group's sources as ``prior_sources`` pseudo-sources (``double_conformal_band``); and, for the
file's reader, the group's random-effects moments (centre, between- and within-source
variance, ``source_spread``; Gelman et al., BDA3 ch. 5). ``validate/interval_coverage.py``
checks the bands out of sample and chooses their free values.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from perfcast.calibration.forecast_intervals import (
    BandSettings,
    ResidualBand,
    ResidualBands,
    group_keys,
)
from perfcast.validate.inference_rows import METRICS

LEVEL = 0.8
MIN_SOURCES = 3
"""Fewest sources behind a band (below: the next, less specific group)."""
WIDEN_FACTOR = 1.5
"""Band stretch (log space) for a generation without any measured run."""
ANY = "any"
NOMINAL = BandSettings(prior_sources=0.0, within_tail=round((1 - LEVEL) / 2, 9),
                       between_tail=round((1 - LEVEL) / 2, 9))
"""No prior, and Dunn et al.'s miss bound a1 + a2 = 1 − ``LEVEL`` split evenly (the default
when no choice by held-out coverage is made)."""


@dataclass(frozen=True)
class Residual:
    source_id: str
    generation: str
    arch: str
    scale: str
    log_time_ratio: float


@dataclass(frozen=True)
class SourceSpread:
    """Random-effects moments of one group of residuals."""

    num_sources: int
    num_rows: int
    center: float
    """Median over sources of each source's mean r (mean below 3 sources)."""
    between_var: float
    """Robust variance of the source means, (1.4826·MAD)² (ddof-1 variance below 3 sources;
    0 for one)."""
    within_var: float
    """Median over sources of each source's (population) variance of r (mean below 3)."""


def _generation(gpu: str) -> str:
    from perfcast.catalog.gpus import load_gpu

    return load_gpu(gpu).generation


def residuals_training(rows) -> list[Residual]:
    """Held-out training rows (``RowResult``): r = −log(1 + e) on tokens/s/GPU."""
    return [Residual(r.source_id, _generation(r.gpu), r.arch_type,
                     "multi-node" if (r.num_nodes or 1) > 1 else "single-node",
                     -math.log1p(r.error)) for r in rows]


def residuals_serving(rows, exclude_ids: frozenset[str] = frozenset()) -> list[Residual]:
    """Held-out serving time/throughput rows (memory and ``exclude_ids`` left out): r =
    log(1 + e) for a latency, −log(1 + e) for a throughput."""
    from perfcast.validate.serving_rows import SERVING_METRICS

    out = []
    for r in rows:
        if r.metric == "gpu_memory_usage" or r.row_id in exclude_ids:
            continue
        if r.metric in METRICS:
            latency = METRICS[r.metric][0].endswith("_s")
        else:  # a serving-engine metric (validate.serving_rows): latencies have no rate
            latency = not SERVING_METRICS[r.metric].endswith("per_s") and \
                not SERVING_METRICS[r.metric].endswith("per_s_per_gpu")
        sign = 1.0 if latency else -1.0
        out.append(Residual(r.source_id, _generation(r.gpu), ANY, ANY,
                            sign * math.log1p(r.error)))
    return out


MAD_TO_SD = 1.4826
"""Normal-consistency constant of the median absolute deviation: 1.4826·MAD estimates σ of a
normal sample (Huber & Ronchetti, *Robust Statistics*, 2nd ed., 2009, §5.1)."""
ROBUST_MIN_SOURCES = 3
"""Fewest sources for the robust moments (a median of two is their mean)."""


def source_spread(by_source: Mapping[str, Sequence[float]]) -> SourceSpread:
    """Centre, between- and within-source variance of residuals grouped by source (each
    source weighs once, however many rows it has: a new source is one draw of u_source).

    Robust moments (Huber & Ronchetti 2009, §5.1) from ``ROBUST_MIN_SOURCES`` sources on: the
    centre is the median of the source means, τ² = (1.4826·MAD of the source means)², σ² the
    median of the sources' within-source variances. The source effects are heavy-tailed -- a
    source whose mechanism perfcast lacks (2026-11: MI300X torchao rows +41%) is not a normal
    draw -- and its mean and variance would widen every group's band past its level (held-out
    training coverage 87.9% of rows with the mean/variance moments, 81.5% with the robust
    ones; serving 79.5% -> 78.6%). With fewer sources: the mean, ddof-1 variance and mean
    within-source variance."""
    means = np.array([np.mean(v) for v in by_source.values()])
    within = np.array([np.var(v) for v in by_source.values()])
    num_rows = sum(len(v) for v in by_source.values())
    if len(means) >= ROBUST_MIN_SOURCES:
        median = float(np.median(means))
        mad = float(np.median(np.abs(means - median)))
        return SourceSpread(num_sources=len(means), num_rows=num_rows, center=median,
                            between_var=(MAD_TO_SD * mad) ** 2,
                            within_var=float(np.median(within)))
    return SourceSpread(
        num_sources=len(means), num_rows=num_rows, center=float(means.mean()),
        between_var=float(np.var(means, ddof=1)) if len(means) > 1 else 0.0,
        within_var=float(within.mean()))


def weighted_quantile(values: Sequence[float], weights: Sequence[float], p: float) -> float:
    """The ``p`` quantile of ``values`` weighing ``weights``: linear between the weighted
    midpoint plotting positions (Σ_{j<i} w_j + w_i/2)/Σw of the sorted values, the ends held
    beyond them (Hyndman & Fan, "Sample quantiles in statistical packages", Am. Stat. 50
    (1996), definition 5, with weights); equal weights give definition 5 itself."""
    order = np.argsort(values, kind="stable")
    sorted_values = np.asarray(values, dtype=float)[order]
    w = np.asarray(weights, dtype=float)[order]
    positions = (np.cumsum(w) - w / 2) / w.sum()
    return float(np.interp(p, positions, sorted_values))


def double_conformal_band(by_source: Mapping[str, Sequence[float]],
                          prior_by_source: Mapping[str, Sequence[float]],
                          settings: BandSettings) -> tuple[float, float]:
    """Band (log ratio) for the rows of a NEW source: the double-conformal prediction set of a
    two-layer hierarchical model (Dunn, Wasserman & Ramdas, "Distribution-free prediction sets
    for two-layer hierarchical models", JASA 118 (2023), §3.2). Each source j gives its own
    within-source quantiles L_j, H_j at a1/2 and 1 − a1/2 (a1 = ``within_tail``; Hyndman & Fan
    definition 7, numpy's default); the band is [the a2/2 quantile of the L_j, the 1 − a2/2
    quantile of the H_j] across sources (a2 = ``between_tail``; ``weighted_quantile``), each
    source weighing once however many rows it has. The ``prior_by_source`` (``all`` group's)
    sources join with total weight ν0 = ``prior_sources`` (ν0/K each of K): a group of few
    sources leans on every source's spread (the conjugate-prior weight, BDA3 §2.6).

    Dunn et al. bound the miss rate of a new source's row by a1 + a2 (a union bound, loose
    when the two misses overlap): a1 stays at (1 − level)/2, a2 and ν0 are chosen by
    leave-one-source-out coverage of rows and of sources (``validate.interval_coverage``).
    Sources are the unit because a new source's error is mostly its own offset: the pooled-CDF
    set of the same paper (§3.1; branch band21) held 81.5% of held-out serving rows but 69.4%
    of a source's rows averaged over sources, the tails of the few sources per group being
    too thin for a new source's offset."""
    return _band_from_within_quantiles(
        [_within_quantiles(tuple(rows), settings.within_tail) for rows in by_source.values()],
        [_within_quantiles(tuple(rows), settings.within_tail)
         for rows in prior_by_source.values()], settings)


@lru_cache(maxsize=65536)
def _within_quantiles(rows: tuple[float, ...], within_tail: float) -> tuple[float, float]:
    """One source's (a1/2, 1 − a1/2) quantiles (definition 7, numpy's default), cached: the
    same source's rows recur in every fold and every candidate setting of the band choice."""
    low, high = np.quantile(rows, (within_tail / 2, 1 - within_tail / 2))
    return float(low), float(high)


def _band_from_within_quantiles(own: Sequence[tuple[float, float]],
                                prior: Sequence[tuple[float, float]],
                                settings: BandSettings) -> tuple[float, float]:
    """``double_conformal_band`` from the sources' within quantiles: own sources weigh 1 each,
    the ``prior`` sources ν0/K each."""
    a2, nu0 = settings.between_tail, settings.prior_sources
    pairs = list(own)
    weights = [1.0] * len(own)
    if nu0 > 0:
        pairs += prior
        weights += [nu0 / len(prior)] * len(prior)
    return (weighted_quantile([p[0] for p in pairs], weights, a2 / 2),
            weighted_quantile([p[1] for p in pairs], weights, 1 - a2 / 2))


def build_bands(residuals: Sequence[Residual], settings: BandSettings = NOMINAL,
                exclude_source: str | None = None,
                min_sources: int = MIN_SOURCES) -> ResidualBands:
    """Every group key's spread and band (``double_conformal_band`` with ``settings``; groups
    with fewer than ``min_sources`` sources get none: a lookup passes over them).
    ``exclude_source``: build as if it were unknown."""
    groups: dict[str, dict[str, list[float]]] = {}
    for res in residuals:
        if res.source_id == exclude_source:
            continue
        for key in group_keys(res.generation, res.arch, res.scale):
            groups.setdefault(key, {}).setdefault(res.source_id, []).append(res.log_time_ratio)
    generations = tuple(sorted({r.generation for r in residuals
                                if r.source_id != exclude_source}))
    a1 = settings.within_tail
    prior = [_within_quantiles(tuple(rows), a1) for rows in groups.get("all", {}).values()]
    out = {}
    for key, by_source in sorted(groups.items()):
        if len(by_source) < min_sources:
            continue
        spread = source_spread(by_source)
        low, high = _band_from_within_quantiles(
            [_within_quantiles(tuple(rows), a1) for rows in by_source.values()], prior, settings)
        out[key] = ResidualBand(n=spread.num_rows, num_sources=spread.num_sources,
                                center=spread.center, between_var=spread.between_var,
                                within_var=spread.within_var, low=low, high=high)
    return ResidualBands(prior_sources=settings.prior_sources, within_tail=settings.within_tail,
                         between_tail=settings.between_tail, generations=generations, groups=out)
