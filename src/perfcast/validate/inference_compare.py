"""Predicted vs measured inference metrics over an inference.csv-schema file.

``validate_inference(path)`` parses every row (``validate.inference_rows``), forecasts each
with ``estimate_inference`` (imported lazily) and converts the forecast to the row's metric and
unit (``inference_rows.METRICS``); error = (predicted − measured)/measured. The report has the
same shape as the training validation (rows with ``row_id``, ``predicted``, ``measured``,
``error``; skipped rows with reasons; a summary per source, ``error_stats.summarize``) plus the
statistics per metric.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfcast.validate.catalog_lookup import CatalogLookup
from perfcast.validate.error_stats import ErrorStats, ValidationSummary, error_stats, summarize
from perfcast.validate.inference_rows import (
    InferenceCase,
    is_inference_schema,
    metric_quantity,
    parse_inference_row,
)
from perfcast.validate.serving_compare import (
    ServingEstimator,
    ServingReportCache,
    predict_serving,
)
from perfcast.validate.serving_rows import ServingCase
from perfcast.validate.training_rows import SkippedRow, read_rows

InferenceEstimator = Callable[..., Any]
"""``estimate_inference``-shaped: (model, system, strategy, **options) -> InferenceReport."""


@dataclass(frozen=True)
class InferenceRowResult:
    """One forecast metric against its measurement (in the row's unit)."""

    row_id: str
    source_id: str
    model: str
    gpu: str
    metric: str
    unit: str
    predicted: float
    measured: float
    error: float
    batch_size: int
    engine: str = ""
    """Serving engine of a simulated row ("" = static/batch-1 estimate)."""
    statistic: str = "mean"

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class InferenceValidationReport:
    rows: tuple[InferenceRowResult, ...]
    skipped: tuple[SkippedRow, ...]
    summary: ValidationSummary
    by_metric: tuple[tuple[str, ErrorStats], ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": "inference",
            "rows": [row.to_dict() for row in self.rows],
            "skipped": [{"row_id": s.row_id, "reason": s.reason} for s in self.skipped],
            "summary": {**self.summary.to_dict(),
                        "by_metric": {m: s.to_dict() for m, s in self.by_metric},
                        "num_rows": len(self.rows), "num_skipped": len(self.skipped)},
        }


def report_quantity(report: Any, name: str) -> float:
    """A forecast quantity by name (``METRICS`` values), SI units."""
    if name == "generated_tokens_per_s_incl_prefill":
        # gpt-fast: generated tokens / wall time of generate(), prefill included.
        return report.workload.output_len / report.e2e_latency_s
    if name == "memory_total_bytes":
        return report.memory.total_bytes
    return float(getattr(report, name))


def default_inference_estimator() -> InferenceEstimator:
    from perfcast.estimate.inference import estimate_inference

    return estimate_inference


def compare_case(case: InferenceCase, estimator: InferenceEstimator
                 ) -> InferenceRowResult | SkippedRow:
    """Forecast one case; an estimator failure becomes a ``SkippedRow``."""
    quantity, factor = metric_quantity(case.metric, case.unit)
    try:
        report = estimator(case.model, case.system, case.strategy, **case.options)
        predicted = report_quantity(report, quantity) * factor
    except Exception as exc:  # noqa: BLE001 - one failing row must not stop the validation
        message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return SkippedRow(case.row_id, f"estimate: {message}", case.source_id)
    if not math.isfinite(predicted) or predicted <= 0:
        return SkippedRow(case.row_id, f"estimate: {quantity}={predicted!r}", case.source_id)
    return InferenceRowResult(
        row_id=case.row_id, source_id=case.source_id, model=case.model.name,
        gpu=case.system.gpu.name, metric=case.metric, unit=case.unit, predicted=predicted,
        measured=case.measured, error=(predicted - case.measured) / case.measured,
        batch_size=case.options["batch_size"])


def compare_serving_case(case: ServingCase, cache: ServingReportCache
                         ) -> InferenceRowResult | SkippedRow:
    """Simulate one serving case (shared per configuration); a failure becomes a skip."""
    try:
        predicted = predict_serving(case, cache)
    except Exception as exc:  # noqa: BLE001 - one failing row must not stop the validation
        message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return SkippedRow(case.row_id, f"estimate: {message}", case.source_id)
    return InferenceRowResult(
        row_id=case.row_id, source_id=case.source_id, model=case.model.name,
        gpu=case.system.gpu.name, metric=case.metric, unit=case.unit, predicted=predicted,
        measured=case.measured, error=(predicted - case.measured) / case.measured,
        batch_size=case.workload.concurrency or case.workload.num_requests,
        engine=case.engine, statistic=case.statistic)


def compare_cases(parsed, skipped, estimator: InferenceEstimator,
                  serving_estimator: ServingEstimator | None = None) -> InferenceValidationReport:
    results: list[InferenceRowResult] = []
    all_skipped = list(skipped)
    cache: ServingReportCache | None = None  # built at the first serving case
    for case in parsed:
        if isinstance(case, ServingCase):
            if cache is None:
                cache = ServingReportCache(serving_estimator)
            outcome = compare_serving_case(case, cache)
        else:
            outcome = compare_case(case, estimator)
        if isinstance(outcome, InferenceRowResult):
            results.append(outcome)
        else:
            all_skipped.append(outcome)
    metrics = sorted({r.metric for r in results})
    by_metric = tuple((m, error_stats([r for r in results if r.metric == m])) for m in metrics)
    return InferenceValidationReport(rows=tuple(results), skipped=tuple(all_skipped),
                                     summary=summarize(results), by_metric=by_metric)


def parse_inference_rows(rows, catalog: CatalogLookup | None = None
                         ) -> tuple[list[InferenceCase | ServingCase], list[SkippedRow]]:
    parsed: list[InferenceCase | ServingCase] = []
    skipped: list[SkippedRow] = []
    for row in rows:
        result = parse_inference_row(row, catalog)
        if isinstance(result, SkippedRow):
            skipped.append(result)
        else:
            parsed.append(result)
    return parsed, skipped


def is_inference_file(path: Path | str) -> bool:
    """Whether the CSV's header has the inference.csv columns (``metric``, ``value``, ``unit``)."""
    import csv

    try:
        with Path(path).open(newline="", encoding="utf-8") as handle:
            header = next(csv.reader(handle), [])
    except (OSError, UnicodeDecodeError, csv.Error):
        return False
    return is_inference_schema(header)


def validate_inference(path: Path | str, estimator: InferenceEstimator | None = None,
                       catalog: CatalogLookup | None = None,
                       serving_estimator: ServingEstimator | None = None
                       ) -> InferenceValidationReport:
    """Forecast every row of an inference.csv-schema file and compare with the measurements
    (``estimator``: static/batch-1 rows, ``serving_estimator``: engine-simulated rows; each
    None: the shipped calibration)."""
    parsed, skipped = parse_inference_rows(read_rows(Path(path)), catalog)
    return compare_cases(parsed, skipped, estimator or default_inference_estimator(),
                         serving_estimator)
