"""Leave-one-source-out cross-validation of the training and serving calibrations.

For each source (``source_id``): refit every calibrated parameter (``fit_training``) on the
quality A/B rows of the OTHER sources, then forecast that source's rows with full
``estimate_training`` calls under the refitted calibration (the response table serves the
fit only, so the held-out numbers carry no interpolation error). A generation whose rows all
belong to the held-out source has too few rows left and takes the pooled fraction — as a
user's GPU without measurements would. The MoE routing imbalance is refitted the same way
(``fit_moe_routing.fit_routing``) on the forced-balance / dropless pairs of the other sources;
a fold whose held-out source holds every pair takes the balanced prior 1.0 and records it
(``FoldResult.routing.fallback``); where the fold's value differs from the one the response
table was built with, the rows it applies to (the other sources' dropless EP > 1 MoE rows) are
re-tabulated under it before the overhead refit (``ResponseTable.with_rows_of``), so no part
of the fold sees the held-out pairs. Data without any pair do not fit it (``calibrate`` keeps
the base file) and their folds keep the base value (``FoldResult.routing`` None).
The statistics of these held-out forecasts are the out-of-sample accuracy (``cv_*`` in
``perfcast validate --cross-validate source --json``).

Serving rows the same way (``cross_validate_inference``): refit the serving overheads without
the source (``fit_inference`` on a ``ServingTable`` built once) and the graph kernel gap per
GPU vendor (``fit_graph_replay`` on a ``GapTable`` built once), forecast its rows in full with
both.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

from perfcast.calibration.bundle import Calibration
from perfcast.validate.compare import RowResult, compare_row
from perfcast.validate.error_stats import ErrorStats, error_stats, summarize
from perfcast.validate.fit_graph_replay import (
    GapTable,
    GraphReplayFit,
    build_gap_table,
    fit_graph_replay,
)
from perfcast.validate.fit_inference import InferenceFit, ServingRows, fit_inference
from perfcast.validate.fit_moe_routing import RoutingFit, fit_routing, routing_calibration
from perfcast.validate.fit_training import TrainingData, TrainingFit, fit_training
from perfcast.validate.inference_compare import InferenceRowResult, compare_case
from perfcast.validate.serving_table import ServingTable


@dataclass(frozen=True)
class FoldResult:
    """One held-out source: the refit and the forecasts of its rows."""

    source_id: str
    fit: TrainingFit | InferenceFit | None
    """None when no other source has rows to fit: the base calibration forecasts the source
    (what a user without measurements gets)."""
    rows: tuple[Any, ...]
    """``RowResult`` (training) or ``InferenceRowResult`` (serving) of the held-out rows."""
    routing: RoutingFit | None = None
    """Training folds: the MoE routing imbalance refitted without the source (its
    ``fallback``: no pair left, the balanced prior)."""
    graph_replay: GraphReplayFit | None = None
    """Serving folds: the graph kernel gap per vendor refitted without the source (None: no
    row of another source reaches it; the base value holds)."""


@dataclass(frozen=True)
class CrossValidation:
    """Held-out forecasts of every row (each from the fold that left its source out)."""

    folds: tuple[FoldResult, ...]

    @property
    def rows(self) -> tuple[Any, ...]:
        return tuple(row for fold in self.folds for row in fold.rows)

    def stats(self, rows: Sequence[Any] | None = None) -> ErrorStats:
        return error_stats(list(self.rows if rows is None else rows))

    def stats_by_source(self) -> tuple[tuple[str, ErrorStats], ...]:
        return summarize(self.rows).by_source

    def parameter_range(self, name: str) -> tuple[float, float] | None:
        """Smallest and largest value of a parameter over the folds (None if never fitted)."""
        fits = [f for fold in self.folds for f in (fold.fit, fold.graph_replay) if f is not None]
        values = [p.value for fit in fits for p in fit.parameters
                  if p.name == name and p.standard_error is not None]
        return (min(values), max(values)) if values else None

    def summary_dict(self) -> dict[str, Any]:
        """``cv_mape``, ``cv_median``, ``cv_within_10`` and ``cv_by_source`` (JSON summary)."""
        overall = self.stats()
        by_source = summarize(self.rows).by_source
        return {
            "cv_mape": overall.mape, "cv_median": overall.median_abs_error,
            "cv_within_10": overall.within_10pct, "cv_within_20": overall.within_20pct,
            "cv_num_rows": overall.count, "cv_method": "leave-one-source-out",
            "cv_by_source": {s: {"n": st.count, "mape": st.mape, "median": st.median_abs_error}
                             for s, st in by_source},
            "cv_moe_routing": {f.source_id: {"dropless_load_imbalance": f.routing.value,
                                             "standard_error": f.routing.estimate.standard_error,
                                             "pairs": len(f.routing.pairs),
                                             "fallback": f.routing.fallback}
                               for f in self.folds if f.routing is not None},
            "cv_graph_kernel_gap_s": {f.source_id: {p.name: p.value
                                                    for p in f.graph_replay.parameters}
                                      for f in self.folds if f.graph_replay is not None},
        }


def cross_validate_training(data: TrainingData) -> CrossValidation:
    """Leave-one-source-out over every source of ``data`` (module docstring)."""
    from perfcast.estimate.training import estimate_training

    backend = data.backend or _backend(data.kernel_backend)
    base = data.table.calibration
    base_estimator = partial(estimate_training, kernel_backend=backend, calibration=base)
    routings: dict[tuple[str, ...], RoutingFit] = {}
    with_pairs = _pair_sources(data.rows)
    folds = []
    for source in sorted({row.source_id for row in data.rows}):
        mask = data.fit_mask(exclude_source=source)
        # the same pairs give the same fit: refit only when the held-out source holds some
        key = tuple(sorted(with_pairs - {source}))
        if with_pairs and key not in routings:
            routings[key] = fit_routing(data.rows, base_estimator, exclude_source=source)
        routing = routings.get(key) if with_pairs else None
        fold_routing = routing_calibration(routing) if routing is not None else None
        fold_data = _retabulated(data, fold_routing, source, backend)
        fit = fit_training(fold_data, mask) if mask.any() else None
        cal = fit.calibration if fit else base
        if fold_routing is not None:
            cal = cal.replace(moe_routing=fold_routing)
        estimator = partial(estimate_training, kernel_backend=backend, calibration=cal)
        held_out = [compare_row(row, estimator) for row in data.rows if row.source_id == source]
        folds.append(FoldResult(source, fit, tuple(r for r in held_out
                                                   if isinstance(r, RowResult)), routing))
    return CrossValidation(tuple(folds))


def cross_validate_inference(rows: ServingRows, base: Calibration,
                             table: ServingTable | None = None,
                             gaps: GapTable | None = None) -> CrossValidation:
    """Leave-one-source-out over every source of ``rows`` (module docstring); ``table``: the
    ``ServingTable`` of ``rows.fit_cases()`` under ``base``, ``gaps``: the ``GapTable`` of
    ``rows.cases`` under ``base`` (each built when None)."""
    from perfcast.estimate.inference import estimate_inference
    from perfcast.estimate.serving import estimate_serving
    from perfcast.validate.inference_compare import compare_serving_case
    from perfcast.validate.serving_compare import ServingReportCache
    from perfcast.validate.serving_rows import ServingCase

    table = table or ServingTable(rows.fit_cases(), base, estimate_inference)
    gaps = gaps or build_gap_table(rows.cases, base)
    folds = []
    for source in sorted({case.source_id for case in rows.cases}):
        left = [c for c in table.cases if c.source_id != source]
        fit = fit_inference(rows, base, exclude_source=source, table=table) if left else None
        graph = (fit_graph_replay(gaps, exclude_source=source)
                 if (gaps.source_ids != source).any() else None)
        cal = fit.calibration if fit else base
        if graph is not None:
            cal = cal.replace(graph_replay=graph.calibration)
        estimator = partial(estimate_inference, calibration=cal)
        simulations = ServingReportCache(partial(estimate_serving, calibration=cal))
        held_out = [compare_serving_case(c, simulations) if isinstance(c, ServingCase)
                    else compare_case(c, estimator)
                    for c in rows.cases if c.source_id == source]
        folds.append(FoldResult(source, fit, tuple(
            r for r in held_out if isinstance(r, InferenceRowResult)), graph_replay=graph))
    return CrossValidation(tuple(folds))


def _retabulated(data: TrainingData, routing, source: str, backend) -> TrainingData:
    """``data`` whose rows that take the learned imbalance (other sources than ``source``)
    are re-tabulated under ``routing`` when it differs from the table's value; else ``data``."""
    from perfcast.estimate.training import estimate_training
    from perfcast.graph.stage import learned_imbalance_applies
    from perfcast.validate.response_table import ResponseTable

    table = data.table
    old = table.calibration.routing.dropless_load_imbalance.value
    if routing is None or routing.dropless_load_imbalance.value == old:
        return data
    rows = [r for r in data.rows if r.source_id != source and r.model.is_moe
            and learned_imbalance_applies(r.strategy)]
    if not rows:
        return data
    sub = ResponseTable(rows, table.calibration.replace(moe_routing=routing), backend,
                        table.parameters, estimate_training)
    return replace(data, table=table.with_rows_of(sub))


def _pair_sources(rows) -> frozenset[str]:
    """Sources holding a forced-balance / dropless pair."""
    from perfcast.validate.fit_moe_routing import find_pairs

    return frozenset(p.forced.source_id for p in find_pairs(rows))


def _backend(name: str):
    from perfcast.kernels.backend import get_backend

    return get_backend(name)
