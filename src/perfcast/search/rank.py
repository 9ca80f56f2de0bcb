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


def pareto_front(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Indices of the points no other point beats in both ``x`` and ``y`` (both maximized),
    by decreasing ``x``; of identical points only one is kept."""
    order = np.lexsort((-y, -x))
    ys = y[order]
    best_before = np.concatenate(([-np.inf], np.maximum.accumulate(ys)[:-1]))
    return order[ys > best_before]
