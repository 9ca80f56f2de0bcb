"""The dropless-routing load imbalance from measured forced-balance / real-routing pairs.

A run measured twice, once with ``--moe-router-force-load-balancing`` (random router logits:
every expert gets the same tokens, frameworks.md §1.4) and once with its learned router
(dropless, no capacity factor), differs only in how unevenly the tokens land on the expert-
parallel ranks: the busiest rank's experts and its all-to-all carry more than the mean, and
every rank waits for it at the next all-to-all. The imbalance x (busiest rank's routed tokens
over the mean, ``graph.layer.LayerShape.routed_load``) is the one number that makes the
forecast ratio real/forced equal the measured ratio; with several pairs, the x that minimises
Σ (log forecast ratio − log measured ratio)² (bounded scalar search, ``IMBALANCE_BOUNDS``).

Pairs (``find_pairs``): quality A/B rows of one source with the same model, GPU count and
strategy except the forced-balance flag, one of each kind. The forecasts use the shipped
calibration; the per-generation overhead multiplies both rows of a pair alike, so the ratio
hardly depends on it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from perfcast.validate.fit_training import FIT_QUALITIES
from perfcast.validate.training_rows import ParsedRow

IMBALANCE_BOUNDS = (1.0, 3.0)
"""Search range of x: balanced to three times the mean (MAX_MOE_LOAD_IMBALANCE is wider)."""


@dataclass(frozen=True)
class RoutingPair:
    """One run measured with forced balancing and with its learned router."""

    forced: ParsedRow
    dropless: ParsedRow

    @property
    def measured_ratio(self) -> float:
        """Measured tokens/s of the real-routing run over the forced-balance run."""
        return (self.dropless.measured_tokens_per_s_per_gpu
                / self.forced.measured_tokens_per_s_per_gpu)

    @property
    def label(self) -> str:
        return f"{self.forced.row_id} / {self.dropless.row_id}"


def _key(row: ParsedRow) -> tuple:
    strategy = row.strategy.model_dump(exclude={"moe_router_force_load_balancing",
                                                "moe_load_imbalance"})
    return (row.source_id, row.model.name, row.system.gpu.name, row.workload.seq_length,
            tuple(sorted((k, repr(v)) for k, v in strategy.items())))


def find_pairs(rows: Sequence[ParsedRow]) -> list[RoutingPair]:
    """Forced-balance / dropless pairs among ``rows`` (module docstring), in row order."""
    forced: dict[tuple, ParsedRow] = {}
    dropless: dict[tuple, ParsedRow] = {}
    for row in rows:
        s = row.strategy
        if (not row.model.is_moe or row.quality not in FIT_QUALITIES or s.ep == 1
                or s.moe_capacity_factor is not None or s.moe_load_imbalance is not None):
            continue
        (forced if s.moe_router_force_load_balancing else dropless).setdefault(_key(row), row)
    return [RoutingPair(forced[k], dropless[k]) for k in forced if k in dropless]


def forecast_ratio(pair: RoutingPair, imbalance: float, estimator) -> float:
    """Forecast tokens/s of the dropless row at ``imbalance`` over the forced row's."""
    def rate(row: ParsedRow, strategy) -> float:
        return float(estimator(row.model, row.system, strategy, row.workload)
                     .tokens_per_s_per_gpu)

    real = pair.dropless.strategy.model_copy(update={"moe_load_imbalance": imbalance})
    return rate(pair.dropless, real) / rate(pair.forced, pair.forced.strategy)


def fit_dropless_imbalance(pairs: Sequence[RoutingPair], estimator=None) -> float:
    """The imbalance x minimising Σ (log forecast ratio − log measured ratio)² over ``pairs``.
    Raises ``ValueError`` without pairs."""
    from scipy.optimize import minimize_scalar

    if not pairs:
        raise ValueError("no forced-balance / dropless pair to fit")
    if estimator is None:
        from perfcast.estimate.training import estimate_training as estimator

    def loss(x: float) -> float:
        return sum((math.log(forecast_ratio(p, x, estimator)) - math.log(p.measured_ratio)) ** 2
                   for p in pairs)

    result = minimize_scalar(loss, bounds=IMBALANCE_BOUNDS, method="bounded",
                             options={"xatol": 1e-3})
    return float(result.x)
