"""Forecast bands from cross-validated residuals (``calibration/forecast_intervals.py``).

``residuals_*`` turn held-out rows into log time ratios r = log(forecast time / measured time)
with their group (GPU generation, dense/MoE, single-/multi-node; serving rows: generation
only); ``build_bands`` takes the level's quantiles per group; ``coverage`` checks the bands
out of sample: each row against bands built WITHOUT its own source.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from perfcast.calibration.forecast_intervals import ResidualBand, ResidualBands, group_keys
from perfcast.validate.inference_rows import METRICS

LEVEL = 0.8
MIN_RUNS = 8
"""Fewest held-out runs behind a band (below: the next, less specific group)."""
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


def build_bands(residuals: Sequence[Residual], level: float = LEVEL,
                exclude_source: str | None = None) -> ResidualBands:
    """Quantiles ((1 − level)/2, (1 + level)/2) of r per group key."""
    groups: dict[str, list[float]] = {}
    for res in residuals:
        if res.source_id == exclude_source:
            continue
        for key in group_keys(res.generation, res.arch, res.scale):
            groups.setdefault(key, []).append(res.log_time_ratio)
    q = ((1 - level) / 2, (1 + level) / 2)
    return ResidualBands(groups={
        key: ResidualBand(n=len(v), low=float(np.quantile(v, q[0])),
                          high=float(np.quantile(v, q[1])))
        for key, v in sorted(groups.items())})


def coverage(residuals: Sequence[Residual], level: float = LEVEL, min_runs: int = MIN_RUNS,
             widen_factor: float = WIDEN_FACTOR) -> float:
    """Share of rows whose measurement falls inside the band built without their source."""
    inside = total = 0
    for source in sorted({r.source_id for r in residuals}):
        bands = build_bands(residuals, level, exclude_source=source)
        for res in (r for r in residuals if r.source_id == source):
            band = bands.interval(res.generation, res.arch, res.scale, 1.0, True, level,
                                  min_runs, widen_factor)
            if band is None:
                continue
            total += 1
            inside += band.low <= math.exp(res.log_time_ratio) <= band.high
    return inside / total if total else math.nan
