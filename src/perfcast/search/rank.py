"""Ranking objectives, top-k and Pareto fronts over bulk-evaluated strategies (arrays)."""

from __future__ import annotations

from enum import StrEnum

import numpy as np

SECONDS_PER_HOUR = 3600.0


class Objective(StrEnum):
    """What "best" means: throughput per GPU, time to train a token budget, or its cost."""

    THROUGHPUT = "throughput"
    TIME = "time"
    COST = "cost"


def time_to_train_s(token_budget: float, tokens_per_s_per_gpu, num_gpus):
    """Seconds to train ``token_budget`` tokens: budget / (tokens/s/GPU · GPUs)."""
    return token_budget / (np.multiply(tokens_per_s_per_gpu, num_gpus))


def training_cost_usd(time_s, num_gpus, price_per_gpu_hour: float):
    """Dollars for ``num_gpus`` GPUs over ``time_s`` at ``price_per_gpu_hour`` $/GPU-hour."""
    return np.multiply(time_s, num_gpus) * price_per_gpu_hour / SECONDS_PER_HOUR


def objective_score(objective: Objective, tokens_per_s_per_gpu, num_gpus,
                    token_budget: float, price_per_gpu_hour: float):
    """A score to maximize: tokens/s/GPU, or minus the time / cost to train the budget."""
    if objective is Objective.THROUGHPUT:
        return np.asarray(tokens_per_s_per_gpu, dtype=float)
    time_s = time_to_train_s(token_budget, tokens_per_s_per_gpu, num_gpus)
    if objective is Objective.TIME:
        return -time_s
    return -training_cost_usd(time_s, num_gpus, price_per_gpu_hour)


def top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` largest finite scores, best first (ties: lower index first)."""
    idx = np.flatnonzero(np.isfinite(scores))
    if len(idx) > k:
        values = scores[idx]
        kth = values[np.argpartition(-values, k - 1)[k - 1]]
        above = idx[values > kth]  # fewer than k; the rest ties with the k-th, lowest first
        idx = np.concatenate((above, idx[values == kth][:k - len(above)]))
    return idx[np.lexsort((idx, -scores[idx]))]


PREFILTER_MIN_POINTS = 4096
"""Fewest points whose Pareto front is taken after ``_unbeaten_by_sample`` drops the points a
sample's front beats (a sort of n points costs ~n log n; the filter ~n log of the sample's
front, a few dozen points)."""
PREFILTER_SAMPLE = 1024
"""Points of the evenly strided sample whose front filters the rest."""


def pareto_front(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Indices of the points no other point beats in both ``x`` and ``y`` (both maximized),
    by decreasing ``x``; of identical points only one is kept (the lowest index)."""
    x, y = np.asarray(x), np.asarray(y)
    if len(x) >= PREFILTER_MIN_POINTS and np.isfinite(x).all() and np.isfinite(y).all():
        kept = _unbeaten_by_sample(x, y)
        return kept[_pareto_front(x[kept], y[kept])]
    return _pareto_front(x, y)


def _unbeaten_by_sample(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Indices (ascending) of the points that no point of a sample's front beats: a point q
    beats p where it comes first in ``_pareto_front``'s order with y_q >= y_p (x_q > x_p and
    y_q >= y_p, or x_q >= x_p and y_q > y_p). Dropping beaten points leaves the front as it
    was: a point beaten by a dropped point is beaten by the sample point that beat it (the
    order is total), the sample's front points are never dropped (along a front y rises
    strictly as x falls), and the kept points keep their relative order (ties: lowest index
    first)."""
    sample = np.arange(0, len(x), max(len(x) // PREFILTER_SAMPLE, 1))
    front = sample[_pareto_front(x[sample], y[sample])]  # by decreasing x, increasing y
    neg_x = -x[front]
    best_y = np.concatenate(([-np.inf], y[front]))  # best y of the first k front points
    ahead = np.searchsorted(neg_x, -x, side="left")  # front points with x_q > x_p
    level = np.searchsorted(neg_x, -x, side="right")  # front points with x_q >= x_p
    beaten = (best_y[ahead] >= y) | (best_y[level] > y)
    return np.flatnonzero(~beaten)


def _pareto_front(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``pareto_front`` by one sort of every point."""
    order = np.lexsort((-y, -x))
    ys = y[order]
    best_before = np.concatenate(([-np.inf], np.maximum.accumulate(ys)[:-1]))
    return order[ys > best_before]
