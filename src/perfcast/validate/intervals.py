"""Forecast bands from cross-validated residuals (``calibration/forecast_intervals.py``).

``residuals_*`` turn held-out rows into log time ratios r = log(forecast time / measured time)
with their group (GPU generation, dense/MoE, single-/multi-node; serving rows: generation
only); ``build_bands`` estimates per group the source-weighted centre, the between-source and
the within-source variance, and the predictive band of a NEW source (random-effects model,
Gelman et al., BDA3 ch. 5; shrinkage towards the ``all`` group with ``prior_sources``
pseudo-sources, BDA3 §3.3). ``validate/interval_coverage.py`` checks the bands out of sample.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

from perfcast.calibration.forecast_intervals import ResidualBand, ResidualBands, group_keys
from perfcast.validate.inference_rows import METRICS

LEVEL = 0.8
MIN_SOURCES = 3
"""Fewest sources behind a band (below: the next, less specific group)."""
WIDEN_FACTOR = 1.5
"""Band stretch (log space) for a generation without any measured run."""
ANY = "any"


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


def predictive_band(spread: SourceSpread, prior: SourceSpread, prior_sources: float,
                    level: float) -> tuple[float, float]:
    """Band (log ratio) holding ``level`` of a new source's rows: τ² and σ² shrunk towards
    ``prior``'s with ν0 = ``prior_sources`` pseudo-sources (k sources: (k−1)τ² + ν0τ0² over
    k−1+ν0), then μ̂ ± t_{(1+level)/2, k−1+ν0} · sqrt((τ² + σ²)(1 + 1/k)) -- the 1/k for the
    uncertainty of μ̂ (BDA3 §3.2, §5.4). Needs k − 1 + ν0 > 0."""
    k, nu0 = spread.num_sources, prior_sources
    dof = k - 1 + nu0
    between = ((k - 1) * spread.between_var + nu0 * prior.between_var) / dof
    within = (k * spread.within_var + nu0 * prior.within_var) / (k + nu0)
    half = float(stats.t.ppf((1 + level) / 2, dof)) * math.sqrt((between + within) * (1 + 1 / k))
    return spread.center - half, spread.center + half


def build_bands(residuals: Sequence[Residual], level: float = LEVEL,
                prior_sources: float = 0.0, exclude_source: str | None = None,
                min_sources: int = MIN_SOURCES) -> ResidualBands:
    """Every group key's spread and band (groups with fewer than ``min_sources`` sources get
    none: a lookup passes over them). ``exclude_source``: build as if it were unknown."""
    groups: dict[str, dict[str, list[float]]] = {}
    for res in residuals:
        if res.source_id == exclude_source:
            continue
        for key in group_keys(res.generation, res.arch, res.scale):
            groups.setdefault(key, {}).setdefault(res.source_id, []).append(res.log_time_ratio)
    generations = tuple(sorted({r.generation for r in residuals
                                if r.source_id != exclude_source}))
    if "all" not in groups:
        return ResidualBands(prior_sources=prior_sources, groups={})
    prior = source_spread(groups["all"])
    out = {}
    for key, by_source in sorted(groups.items()):
        spread = source_spread(by_source)
        if spread.num_sources < min_sources:
            continue
        low, high = predictive_band(spread, prior, prior_sources, level)
        out[key] = ResidualBand(n=spread.num_rows, num_sources=spread.num_sources,
                                center=spread.center, between_var=spread.between_var,
                                within_var=spread.within_var, low=low, high=high)
    return ResidualBands(prior_sources=prior_sources, generations=generations, groups=out)
