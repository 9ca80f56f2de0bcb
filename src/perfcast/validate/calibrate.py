"""``calibrate(paths, out_dir)``: fit every calibration a set of measured runs supports and
write it (the API behind ``perfcast calibrate``).

Training CSVs (training.csv schema) fit the training overheads, the stream-overlap share and
the fitted attention-kernel ratios (``fit_training``); inference CSVs (inference.csv schema,
told apart by their header) fit the serving overheads (``fit_inference``) and the device time per
kernel boundary of a replayed graph per GPU vendor (``fit_graph_replay``). The leave-one-
source-out range of each training parameter and of each kernel gap is written beside its
value. Training CSVs also
fit the MoE dropless-routing imbalance (``fit_moe_routing``) on their forced-balance / real-
routing pairs, first: the overhead fit forecasts the dropless rows with it; data without such
a pair keep the base file's value (as a user without serving rows keeps the serving file).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from perfcast.calibration.bundle import Calibration, load_calibration
from perfcast.calibration.forecast_intervals import ForecastIntervals, ResidualBands
from perfcast.errors import InputError
from perfcast.validate.calibration_writer import (
    write_graph_replay_file,
    write_inference_file,
    write_intervals_file,
    write_routing_file,
    write_training_files,
)
from perfcast.validate.cross_validate import (
    CrossValidation,
    cross_validate_inference,
    cross_validate_training,
)
from perfcast.validate.fit_graph_replay import GraphReplayFit, build_gap_table, fit_graph_replay
from perfcast.validate.fit_inference import InferenceFit, fit_inference, load_inference_cases
from perfcast.validate.fit_moe_routing import RoutingFit, fit_routing, routing_calibration
from perfcast.validate.fit_training import (
    TrainingData,
    TrainingFit,
    data_sha256,
    fit_training,
    load_training_data,
)
from perfcast.validate.inference_compare import is_inference_file
from perfcast.validate.interval_coverage import choose_band_settings
from perfcast.validate.intervals import (
    LEVEL,
    MIN_SOURCES,
    WIDEN_FACTOR,
    Residual,
    build_bands,
    residuals_serving,
    residuals_training,
)
from perfcast.validate.serving_table import ServingTable


@dataclass(frozen=True)
class CalibrationResult:
    """What ``calibrate`` fitted and wrote."""

    training: TrainingFit | None
    training_cv: CrossValidation | None
    inference: InferenceFit | None
    written: tuple[Path, ...] = field(default=())
    intervals: ForecastIntervals | None = None
    """The 80% bands from the held-out residuals, with their held-out coverage."""
    routing: RoutingFit | None = None
    """The MoE dropless-routing imbalance fitted on the training rows' forced/real pairs."""
    graph_replay: GraphReplayFit | None = None
    """The graph kernel gap per vendor fitted on the engine-simulated decode rows."""
    serving_cv: CrossValidation | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"written": [str(p) for p in self.written]}
        for key, fit in (("training", self.training), ("inference", self.inference)):
            if fit is None:
                out[key] = None
                continue
            out[key] = {
                "rows_used": fit.rows_used, "rows_by_generation": fit.rows_by_generation,
                "fallback_generations": list(fit.fallback_generations),
                "parameters": {p.name: p.to_dict() for p in fit.parameters},
            }
        if self.routing is not None:
            out["moe_routing"] = {"parameter": self.routing.estimate.to_dict(),
                                  "pairs": [p.label for p in self.routing.pairs],
                                  "fallback": self.routing.fallback}
        if self.graph_replay is not None:
            out["graph_replay"] = {
                "rows_used": self.graph_replay.rows_used,
                "rows_by_vendor": self.graph_replay.rows_by_vendor,
                "fallback_vendors": list(self.graph_replay.fallback_vendors),
                "parameters": {p.name: p.to_dict() for p in self.graph_replay.parameters}}
            if self.serving_cv is not None:
                out["graph_replay"]["cv_ranges"] = {
                    p.name: self.serving_cv.parameter_range(p.name)
                    for p in self.graph_replay.parameters}
        if self.intervals is not None:
            out["intervals"] = {kind: {k: getattr(getattr(self.intervals, kind), k) for k in
                                       ("prior_sources", "within_tail", "between_tail", "cv_coverage",
                                        "cv_coverage_by_source", "cv_median_half_width")}
                                for kind in ("training", "serving")}
        if self.training_cv is not None and self.training is not None:  # CV implies a fit
            out["training"]["cv"] = self.training_cv.summary_dict()
            out["training"]["cv_ranges"] = {
                p.name: self.training_cv.parameter_range(p.name) for p in self.training.parameters}
        return out


def split_by_schema(paths: Sequence[Path]) -> tuple[list[Path], list[Path]]:
    """(training CSVs, inference CSVs) by header."""
    training: list[Path] = []
    inference: list[Path] = []
    for path in paths:
        (inference if is_inference_file(path) else training).append(Path(path))
    return training, inference


def calibrate(paths: Sequence[Path], out_dir: Path | None, kernel_backend: str,
              base: Calibration | None = None, training_data: TrainingData | None = None,
              serving_table: ServingTable | None = None) -> CalibrationResult:
    """Fit on ``paths`` and, with ``out_dir``, write the files; ``base`` supplies every value
    not fitted (the shipped calibration when None). ``training_data`` / ``serving_table``:
    already built response tables of the same files and base (rebuilt when None)."""
    base = base or load_calibration()
    training_paths, inference_paths = split_by_schema(paths)
    training = cv = inference = routing = graph = None
    written: list[Path] = []
    if training_paths:
        routing = _fit_routing(training_paths, training_data, base, kernel_backend)
        if training_data is None and not routing.fallback:
            base = base.replace(moe_routing=routing_calibration(routing))
        data = training_data or load_training_data(training_paths, base, kernel_backend)
        if not data.rows:
            raise InputError("data", ",".join(map(str, training_paths)), "no row can be forecast")
        training = fit_training(data)
        cv = cross_validate_training(data)
        if out_dir is not None:
            ranges = {p.name: cv.parameter_range(p.name) for p in training.parameters}
            written += write_training_files(
                training.calibration, training.parameters, out_dir, training.data_sha256,
                training.rows_used, training.kernel_backend,
                {k: v for k, v in ranges.items() if v is not None})
            if not routing.fallback:  # no pair: the base (shipped) file still holds
                written.append(write_routing_file(routing, out_dir, training.data_sha256,
                                                  training.kernel_backend))
    serving_cv = None
    if inference_paths:
        cases = load_inference_cases(inference_paths)
        inference = fit_inference(cases, base, table=serving_table)
        gaps = build_gap_table(cases.cases, base)
        graph = fit_graph_replay(gaps) if len(gaps.row_ids) else None
        serving_cv = cross_validate_inference(cases, base, serving_table, gaps)
        if out_dir is not None:
            written.append(write_inference_file(
                inference.calibration.inference_overheads, inference.parameters, out_dir,
                data_sha256(inference_paths), inference.rows_used))
            if graph is not None:  # no graphed decode row: the base (shipped) file holds
                ranges = {p.name: serving_cv.parameter_range(p.name) for p in graph.parameters}
                written.append(write_graph_replay_file(
                    graph, out_dir, data_sha256(inference_paths),
                    {k: v for k, v in ranges.items() if v is not None}))
    intervals = forecast_intervals(base, cv, serving_cv,
                                   cases.concurrency_ids if inference_paths else frozenset())
    if out_dir is not None:
        written.append(write_intervals_file(
            intervals, out_dir, data_sha256(list(paths)),
            (training.rows_used if training else 0) + (inference.rows_used if inference else 0),
            training.kernel_backend if training else kernel_backend))
    return CalibrationResult(training, cv, inference, tuple(written), intervals, routing,
                             graph, serving_cv)


def _fit_routing(paths: Sequence[Path], data: TrainingData | None, base: Calibration,
                 kernel_backend: str) -> RoutingFit:
    """The routing imbalance on the pairs of ``data``'s rows (parsed from ``paths`` when
    None), forecast with ``base``."""
    from perfcast.estimate.training import estimate_training
    from perfcast.validate.training_rows import parse_rows, read_rows

    rows = data.rows if data is not None else parse_rows(
        [row for p in paths for row in read_rows(Path(p))])[0]
    backend = data.backend if data is not None and data.backend else kernel_backend
    return fit_routing(rows, partial(estimate_training, kernel_backend=backend,
                                     calibration=base))


def forecast_intervals(base: Calibration, training_cv: CrossValidation | None,
                       serving_cv: CrossValidation | None,
                       concurrency_ids: frozenset[str]) -> ForecastIntervals:
    """Bands from the cross-validated residuals, with the prior strength that gives
    leave-one-source-out coverage closest to the level; a kind without data keeps ``base``'s
    bands."""
    old = base.intervals
    empty = ResidualBands(groups={})
    old_training = old.training if old else empty
    old_serving = old.serving if old else empty
    training = (_bands(residuals_training(training_cv.rows), old_training) if training_cv
                else old_training)
    serving = (_bands(residuals_serving(serving_cv.rows, concurrency_ids), old_serving)
               if serving_cv else old_serving)
    return ForecastIntervals(level=LEVEL, min_sources=MIN_SOURCES, widen_factor=WIDEN_FACTOR,
                             training=training, serving=serving)


def _bands(residuals: Sequence[Residual], old: ResidualBands) -> ResidualBands:
    """All residuals' bands under the chosen prior, with their held-out coverage; ``old``
    when the data come from fewer than ``MIN_SOURCES`` sources (no band can be built)."""
    if len({r.source_id for r in residuals}) < MIN_SOURCES:
        return old
    check = choose_band_settings(residuals, LEVEL, MIN_SOURCES, WIDEN_FACTOR)
    bands = build_bands(residuals, check.settings, min_sources=MIN_SOURCES)
    return bands.model_copy(update={"cv_coverage": check.rows.share,
                                    "cv_coverage_by_source": check.source_share,
                                    "cv_median_half_width": check.median_half_width})
