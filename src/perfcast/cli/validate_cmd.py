"""``perfcast validate``: forecast every row of a ground-truth training CSV and score it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from perfcast.cli.errors import handle_input_errors
from perfcast.cli.options import DEFAULT_KERNEL_BACKEND_OPT, KernelBackendOption, KernelTableOption

DataOption = Annotated[
    Path, typer.Option("--data", help="CSV with the ground_truth training.csv or inference.csv schema.")
]
JsonFlag = Annotated[bool, typer.Option("--json", help="Print one JSON object.")]
QualityOption = Annotated[
    str | None, typer.Option("--quality", help="Quality grades to keep, e.g. A,B.")
]


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
) -> None:
    """Forecast every measured row (training tokens/s/GPU, or each inference row's metric in its
    unit) and report the errors per source."""
    from functools import partial

    from perfcast.cli.build import kernel_backend as make_backend
    from perfcast.estimate.training import estimate_training
    from perfcast.validate.compare import validate_training
    from perfcast.validate.csv_schema import check_csv_schema
    from perfcast.validate.inference_compare import validate_inference

    if not data.is_file():
        raise FileNotFoundError(f"--data {data}: file not found")
    inference = check_csv_schema(data) == "inference"
    if inference:
        report = validate_inference(data)
    else:
        estimator = partial(estimate_training,
                            kernel_backend=make_backend(kernel_backend.value, kernel_table))
        report = validate_training(data, estimator=estimator, qualities=_qualities(quality))
    if json:
        from perfcast.report.json_out import to_json

        print(to_json(report.to_dict()))
        return
    from rich.console import Console

    from perfcast.report.validation_text import render_validation

    if inference:
        from perfcast.report.inference_validation_text import render_inference_validation

        render_inference_validation(report, Console())
        return
    render_validation(report, Console())
