"""The dropless-routing load imbalance from measured forced-balance / real-routing pairs.

A run measured twice, once with ``--moe-router-force-load-balancing`` (random router logits:
every expert gets the same tokens, frameworks.md §1.4) and once with its learned router
(dropless, no capacity factor), differs only in how unevenly the tokens land on the expert-
parallel ranks: the busiest rank's experts and its all-to-all carry more than the mean, and
every rank waits for it at the next all-to-all. The imbalance x (busiest rank's routed tokens
over the mean, ``graph.layer.LayerShape.routed_load``) is the one number that makes the
forecast ratio real/forced equal the measured ratio; with several pairs, the x that minimises
Σ ρ((log forecast ratio − log measured ratio)²) (``least_squares_fit.solve``, the solver and
robust loss of every calibration fit, in ``IMBALANCE_BOUNDS``), with its standard error from
the Jacobian at the optimum and the pairs' residual spread.

``fit_routing`` is the step of ``perfcast calibrate`` (``validate.calibrate``) that writes
``moe_routing.yaml``, and of each leave-one-source-out fold (``validate.cross_validate``),
which refits it without the held-out source: where the held-out source holds every pair, the
fold takes the no-information prior ``NO_PAIR_PRIOR`` (balanced routing) and says so
(``RoutingFit.fallback``).

Pairs (``find_pairs``): quality A/B rows of one source with the same model, GPU count and
strategy except the forced-balance flag, one of each kind. The forecasts use the shipped
calibration; the per-generation overhead multiplies both rows of a pair alike, so the ratio
hardly depends on it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from perfcast.validate.fit_training import FIT_QUALITIES
from perfcast.validate.least_squares_fit import Bounded, ParameterEstimate, solve
from perfcast.validate.training_rows import ParsedRow

IMBALANCE_BOUNDS = (1.0, 3.0)
"""Search range of x: balanced to three times the mean (MAX_MOE_LOAD_IMBALANCE is wider)."""
IMBALANCE_START = 1.2
"""Fixed start of the search (never a value fitted on other data)."""
NO_PAIR_PRIOR = 1.0
"""The value without any pair: balanced routing, the no-information prior (no measurement
says how uneven the router is, so none is assumed)."""
PARAMETER = "dropless_load_imbalance"


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


def fit_imbalance_estimate(pairs: Sequence[RoutingPair], estimator=None) -> ParameterEstimate:
    """The imbalance x (module docstring) over ``pairs`` with its standard error (None with a
    single pair: no degree of freedom). Raises ``ValueError`` without pairs."""
    if not pairs:
        raise ValueError("no forced-balance / dropless pair to fit")
    if estimator is None:
        from perfcast.estimate.training import estimate_training as estimator
    log_measured = np.log([p.measured_ratio for p in pairs])

    def residuals(x: np.ndarray) -> np.ndarray:
        return np.log([forecast_ratio(p, float(x[0]), estimator) for p in pairs]) - log_measured

    estimates, _ = solve(residuals, [Bounded(PARAMETER, IMBALANCE_START, *IMBALANCE_BOUNDS)],
                         tolerance=1e-8)
    return estimates[0]


def fit_dropless_imbalance(pairs: Sequence[RoutingPair], estimator=None) -> float:
    """The fitted imbalance alone (``fit_imbalance_estimate``)."""
    return fit_imbalance_estimate(pairs, estimator).value


@dataclass(frozen=True)
class RoutingFit:
    """The imbalance fitted on some rows' pairs, or the prior when they hold none."""

    estimate: ParameterEstimate
    pairs: tuple[RoutingPair, ...]
    ratios: tuple[float, ...]
    """Forecast real/forced ratio of each pair at the fitted value."""

    @property
    def fallback(self) -> bool:
        """True when no pair was left to fit: ``NO_PAIR_PRIOR`` stands in."""
        return not self.pairs

    @property
    def value(self) -> float:
        return self.estimate.value


def fit_routing(rows: Sequence[ParsedRow], estimator,
                exclude_source: str | None = None) -> RoutingFit:
    """The imbalance fitted on the pairs of ``rows`` outside ``exclude_source`` (the prior
    ``NO_PAIR_PRIOR`` when there are none); ``estimator``: ``estimate_training`` with the
    kernel backend and calibration to forecast with."""
    pairs = tuple(find_pairs([r for r in rows if r.source_id != exclude_source]))
    if not pairs:
        prior = ParameterEstimate(PARAMETER, NO_PAIR_PRIOR, None, True, *IMBALANCE_BOUNDS)
        return RoutingFit(prior, (), ())
    estimate = fit_imbalance_estimate(pairs, estimator)
    return RoutingFit(estimate, pairs,
                      tuple(forecast_ratio(p, estimate.value, estimator) for p in pairs))


def routing_calibration(fit: RoutingFit, record=None):
    """``moe_routing.yaml``'s content for ``fit`` (``record``: its ``fit:`` block)."""
    from perfcast.calibration.moe_routing import DroplessImbalance, MoeRoutingCalibration

    if fit.fallback:
        source = ("No forced-balance / dropless pair in the data: the no-information prior "
                  f"{NO_PAIR_PRIOR:g} (balanced routing).")
    else:
        each = "; ".join(f"{p.label}: measured {p.measured_ratio:.3f}, forecast {r:.3f}"
                         for p, r in zip(fit.pairs, fit.ratios, strict=True))
        source = (
            f"Fitted on {len(fit.pairs)} pairs of quality A/B rows that measure one run with "
            "forced load balancing (--moe-router-force-load-balancing, random logits) and with "
            "its learned dropless router: the busiest EP rank's routed tokens over the mean "
            "that makes the forecast real/forced throughput ratio match the measured one "
            "(validate/fit_moe_routing.py; standard error from the Jacobian and the pairs' "
            f"residuals). Pairs (forced / dropless row), measured vs forecast ratio: {each}.")
    entry = DroplessImbalance(value=float(f"{fit.value:.4g}"),
                              standard_error=(None if fit.estimate.standard_error is None
                                              else float(f"{fit.estimate.standard_error:.2g}")),
                              source=source, pairs=tuple(p.label for p in fit.pairs))
    return MoeRoutingCalibration(fit=record, reference="forced-balance / dropless row pairs "
                                 "of the training data", dropless_load_imbalance=entry)
