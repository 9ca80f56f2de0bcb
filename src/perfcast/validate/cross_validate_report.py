"""Cross-validation of one measured-data file as ``perfcast validate --cross-validate`` shows it.

``cross_validate_file`` runs the leave-one-source-out loop for a training or inference CSV and
returns the JSON summary fields (``cv_mape``, ``cv_median``, ``cv_within_10``,
``cv_by_source``; for serving rows also ``cv_by_scope``: rows at static/batch-1 batching vs
rows served at concurrency, whose scheduler is not modelled yet) and the held-out rows.
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


@dataclass(frozen=True)
class CrossValidationOutput:
    """Summary fields, held-out rows and grouped statistics of one cross-validation."""

    validation: CrossValidation
    groups: tuple[tuple[str, ErrorStats], ...]
    """("overall", ...), then per scope (serving) and per architecture (training)."""

    @property
    def summary(self) -> dict[str, Any]:
        out = self.validation.summary_dict()
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
    if inference:
        serving = load_inference_cases([path])
        cv = cross_validate_inference(serving, calibration)
        memory = [r for r in cv.rows if r.metric == "gpu_memory_usage"]
        static = [r for r in cv.rows if r not in memory
                  and r.row_id not in serving.concurrency_ids]
        concurrency = [r for r in cv.rows if r.row_id in serving.concurrency_ids]
        groups = (("overall", cv.stats()), ("static/batch-1 (time)", cv.stats(static)),
                  ("concurrency (time)", cv.stats(concurrency)), ("memory", cv.stats(memory)))
    else:
        data = load_training_data([path], calibration, backend, qualities)
        cv = cross_validate_training(data)
        groups = (("overall", cv.stats()),) + tuple(
            (kind, cv.stats([r for r in cv.rows if r.arch_type == kind]))
            for kind in ("dense", "moe"))
    return CrossValidationOutput(cv, groups)
