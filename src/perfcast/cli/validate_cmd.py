"""``perfcast validate``: forecast every row of a ground-truth training CSV and score it."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from perfcast.cli.errors import handle_input_errors
from perfcast.cli.options import (
    DEFAULT_KERNEL_BACKEND_OPT,
    CalibrationOption,
    KernelBackendOption,
    KernelTableOption,
)

DataOption = Annotated[
    Path, typer.Option("--data", help="CSV with the ground_truth training.csv or inference.csv schema.")
]
JsonFlag = Annotated[bool, typer.Option("--json", help="Print one JSON object.")]
QualityOption = Annotated[
    str | None, typer.Option("--quality", help="Quality grades to keep, e.g. A,B.")
]



class CrossValidateOpt(str, Enum):
    source = "source"


CrossValidateOption = Annotated[CrossValidateOpt | None, typer.Option(
    "--cross-validate", help="Refit the calibration with each source left out and forecast "
    "that source's rows (out-of-sample accuracy, shown first).")]


def _qualities(text: str | None) -> tuple[str, ...] | None:
    """'A,B' -> ('A', 'B'); None or blank -> None (all grades)."""
    if text is None or not text.strip():
        return None
    return tuple(part.strip().upper() for part in text.split(",") if part.strip())


@handle_input_errors
def validate_command(
    data: DataOption, json: JsonFlag = False, quality: QualityOption = None,
    kernel_backend: KernelBackendOption = DEFAULT_KERNEL_BACKEND_OPT,
    kernel_table: KernelTableOption = None,
    calibration: CalibrationOption = None,
    cross_validate: CrossValidateOption = None,
) -> None:
    """Forecast every measured row (training tokens/s/GPU, or each inference row's metric in its
    unit) and report the errors per source; with --cross-validate, out-of-sample first."""
    from functools import partial

    from perfcast.calibration.bundle import load_calibration
    from perfcast.cli.build import kernel_backend as make_backend
    from perfcast.estimate.inference import estimate_inference
    from perfcast.estimate.training import estimate_training
    from perfcast.validate.compare import ValidationReport, validate_training
    from perfcast.validate.csv_schema import check_csv_schema
    from perfcast.validate.inference_compare import InferenceValidationReport, validate_inference

    if not data.is_file():
        raise FileNotFoundError(f"--data {data}: file not found")
    cal = load_calibration(calibration)
    inference = check_csv_schema(data) == "inference"
    backend = make_backend(kernel_backend.value, kernel_table)
    report: ValidationReport | InferenceValidationReport
    if inference:
        from perfcast.estimate.serving import estimate_serving

        report = validate_inference(
            data, partial(estimate_inference, calibration=cal),
            serving_estimator=partial(estimate_serving, calibration=cal))
    else:
        estimator = partial(estimate_training, kernel_backend=backend, calibration=cal)
        report = validate_training(data, estimator=estimator, qualities=_qualities(quality))
    cv = None
    if cross_validate is not None:
        from perfcast.validate.cross_validate_report import cross_validate_file

        cv = cross_validate_file(data, inference, cal, backend, _qualities(quality))
    if json:
        from perfcast.report.json_out import to_json

        out = report.to_dict()
        if cv is not None:
            out["summary"] |= cv.summary
            out["cv_rows"] = cv.rows
        print(to_json(out))
        return
    from rich.console import Console

    from perfcast.report.validation_text import render_validation

    if cv is not None:
        from perfcast.report.cross_validation_text import render_cross_validation

        render_cross_validation(cv, Console())
    if isinstance(report, InferenceValidationReport):  # the inference schema's report
        from perfcast.report.inference_validation_text import render_inference_validation

        render_inference_validation(report, Console())
    else:
        render_validation(report, Console())
    if cv is not None:
        from perfcast.report.cross_validation_text import render_cross_validation_footer

        render_cross_validation_footer(cv, report.summary.overall, Console())
