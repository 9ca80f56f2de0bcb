"""Cross-validation of one measured-data file as ``perfcast validate --cross-validate`` shows it.

``cross_validate_file`` runs the leave-one-source-out loop for a training or inference CSV and
returns the JSON summary fields (``cv_mape``, ``cv_median``, ``cv_within_10``,
``cv_by_source``; for serving rows also ``cv_by_scope``: rows at static/batch-1 batching vs
rows served at concurrency, whose scheduler is not modelled yet) and the held-out rows;
``cv_band_coverage``: the share of held-out rows inside the 80% band built from the OTHER
sources' held-out residuals (``validate/interval_coverage.py``), overall, averaged over
sources, and per class -- whether the forecast bands hold for these data.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from perfcast.calibration.bundle import Calibration
from perfcast.validate.cross_validate import (
    CrossValidation,
    cross_validate_inference,
    cross_validate_training,
)
from perfcast.validate.error_stats import ErrorStats
from perfcast.validate.fit_inference import load_inference_cases
from perfcast.validate.fit_training import load_training_data
from perfcast.validate.interval_coverage import CoverageReport, coverage
from perfcast.validate.intervals import NOMINAL, residuals_serving, residuals_training


@dataclass(frozen=True)
class CrossValidationOutput:
    """Summary fields, held-out rows and grouped statistics of one cross-validation."""

    validation: CrossValidation
    groups: tuple[tuple[str, ErrorStats], ...]
    """("overall", ...), then per scope (serving) and per architecture (training)."""
    band_coverage: CoverageReport | None = None
    """Held-out coverage of the forecast bands (None without bands in the calibration)."""

    @property
    def summary(self) -> dict[str, Any]:
        out = self.validation.summary_dict()
        band = self.band_coverage
        if band is not None:
            out["cv_band_coverage"] = {
                "rows": band.rows.share, "n": band.rows.total,
                "without_band": band.without_band,
                "mean_over_sources": band.source_share,
                "median_half_width": band.median_half_width,
                "by_class": {c.name: {"n": c.total, "inside": c.share} for c in band.by_class}}
        out["cv_by_group"] = {name: {"n": s.count, "mape": s.mape, "median": s.median_abs_error,
                                     "within_10": s.within_10pct}
                              for name, s in self.groups}
        return out

    @property
    def rows(self) -> list[dict[str, Any]]:
        return [{"row_id": r.row_id, "source_id": r.source_id, "predicted": r.predicted,
                 "measured": r.measured, "error": r.error} for r in self.validation.rows]


def cross_validate_file(path: Path, inference: bool, calibration: Calibration, backend: Any,
                        qualities: Sequence[str] | None = None) -> CrossValidationOutput:
    """Leave-one-source-out cross-validation of the rows of ``path``."""
    bands = calibration.intervals
    if inference:
        serving = load_inference_cases([path])
        cv = cross_validate_inference(serving, calibration)
        memory = [r for r in cv.rows if r.metric == "gpu_memory_usage"]
        static = [r for r in cv.rows if r not in memory
                  and r.row_id not in serving.concurrency_ids]
        concurrency = [r for r in cv.rows if r.row_id in serving.concurrency_ids]
        groups: tuple[tuple[str, ErrorStats], ...] = (
            ("overall", cv.stats()), ("static/batch-1 (time)", cv.stats(static)),
                  ("concurrency (time)", cv.stats(concurrency)), ("memory", cv.stats(memory)))
        residuals = residuals_serving(cv.rows, serving.concurrency_ids)
        settings = bands.serving.settings if bands else NOMINAL
    else:
        data = load_training_data([path], calibration, backend, qualities)
        cv = cross_validate_training(data)
        groups = (("overall", cv.stats()),) + tuple(
            (kind, cv.stats([r for r in cv.rows if r.arch_type == kind]))
            for kind in ("dense", "moe"))
        residuals = residuals_training(cv.rows)
        settings = bands.training.settings if bands else NOMINAL
    band_coverage = (coverage(residuals, settings, bands.min_sources, bands.widen_factor)
                     if bands is not None and residuals else None)
    return CrossValidationOutput(cv, groups, band_coverage)
