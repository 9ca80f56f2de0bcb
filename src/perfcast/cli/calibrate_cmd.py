"""``perfcast calibrate``: fit the calibration files on a user's measured runs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from perfcast.cli.errors import handle_input_errors
from perfcast.cli.options import DEFAULT_KERNEL_BACKEND_OPT, KernelBackendOption

DataFiles = Annotated[list[Path], typer.Option(
    "--data", help="Measured runs: a CSV with the ground_truth training.csv or inference.csv "
    "schema (detected from the header); repeatable.")]
OutDir = Annotated[Path, typer.Option(
    "--out", help="Directory for the calibration files (use it with --calibration DIR).")]


@handle_input_errors
def calibrate_command(
    data: DataFiles,
    out: OutDir,
    kernel_backend: KernelBackendOption = DEFAULT_KERNEL_BACKEND_OPT,
    json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Fit overheads, overlap share and fitted kernel ratios on measured runs; write YAMLs."""
    from perfcast.errors import InputError
    from perfcast.validate.calibrate import calibrate

    for path in data:
        if not path.is_file():
            raise InputError("data", str(path), "file not found")
    if out.exists() and not out.is_dir():
        raise InputError("out", str(out), "exists and is not a directory")
    result = calibrate(list(data), out, kernel_backend.value)
    if json:
        from perfcast.report.json_out import to_json

        print(to_json(result.to_dict()))
        return
    from perfcast.report.calibrate_text import render_calibration
    from perfcast.report.console import make_console

    render_calibration(result, make_console())
