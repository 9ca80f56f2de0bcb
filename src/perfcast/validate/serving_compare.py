"""Forecast a ``ServingCase`` with ``estimate_serving`` and express it in the row's unit.

Rows of one configuration (TTFT, TPOT and throughput of the same run) share one simulation
(``ServingReportCache``). Latencies take the row's statistic (mean or median; a static batch's
latency is the run's duration); throughputs are output tokens (or requests) per second of the
deployment or per GPU.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from perfcast.validate.serving_rows import UNIT_FACTORS, ServingCase

ServingEstimator = Callable[..., Any]
"""``estimate_serving``-shaped: (model, system, strategy, workload, **options) -> ServingReport."""


def default_serving_estimator() -> ServingEstimator:
    from perfcast.estimate.serving import estimate_serving

    return estimate_serving


def serving_quantity_s(report: Any, case: ServingCase) -> float:
    """The simulated value of the case's quantity and statistic, SI units."""
    if case.statistic == "batch":
        return float(report.duration_s)
    if case.quantity in ("ttft", "tpot", "itl", "e2e_latency"):
        stats = getattr(report, case.quantity)
        return float(stats.median_s if case.statistic == "median" else stats.mean_s)
    if case.quantity == "output_tokens_per_s_per_gpu":
        return float(report.output_tokens_per_s / report.num_gpus)
    return float(getattr(report, case.quantity))


class ServingReportCache:
    """One simulation per distinct configuration."""

    def __init__(self, estimator: ServingEstimator | None = None) -> None:
        self.estimator = estimator or default_serving_estimator()
        self.reports: dict[tuple, Any] = {}

    def report(self, case: ServingCase) -> Any:
        key = (case.model.name, case.system.name, case.system.num_gpus,
               case.strategy.model_dump_json(), case.workload.model_dump_json(),
               tuple(sorted((k, str(v)) for k, v in case.options.items())))
        if key not in self.reports:
            self.reports[key] = self.estimator(case.model, case.system, case.strategy,
                                               case.workload, **case.options)
        return self.reports[key]


def predict_serving(case: ServingCase, cache: ServingReportCache) -> float:
    """Forecast in the row's unit; raises ValueError when the model does not fit."""
    report = cache.report(case)
    if not report.fits:
        raise ValueError("does not fit in the engine's memory")
    value = serving_quantity_s(report, case)
    factor = UNIT_FACTORS[case.unit.lower()] if case.quantity in (
        "ttft", "tpot", "itl", "e2e_latency") or case.statistic == "batch" else 1.0
    predicted = value * factor
    if not math.isfinite(predicted) or predicted <= 0:
        raise ValueError(f"{case.quantity}={predicted!r}")
    return predicted
