"""The ``perfcast`` command. Thin: parse flags, build specs, call the API, render.

Heavy modules (numpy-based estimators, renderers) are imported inside commands so that
``perfcast --help`` stays fast.
"""

from __future__ import annotations

from typing import Annotated

import typer

from perfcast.cli.app_group import OneLineErrorGroup, use_wrapping_help
from perfcast.cli.blas_threads import limit_blas_threads
from perfcast.cli.calibrate_cmd import calibrate_command
from perfcast.cli.catalog_cmd import models_command, systems_command
from perfcast.cli.comm_cmd import comm_command
from perfcast.cli.hardware_cmd import catalog_app
from perfcast.cli.infer_cmd import infer_command
from perfcast.cli.infer_search_cmd import infer_search_command
from perfcast.cli.kernels_cmd import kernels_app
from perfcast.cli.memory_cmd import memory_command
from perfcast.cli.profile_cmd import profile_command
from perfcast.cli.schedule_cmd import schedule_command
from perfcast.cli.search_cmd import search_command
from perfcast.cli.serve_cmd import serve_command
from perfcast.cli.sweep_cmd import sweep_command
from perfcast.cli.train_cmd import train_command
from perfcast.cli.validate_cmd import validate_command

app = typer.Typer(
    name="perfcast",
    help="Forecast LLM training and inference performance on GPU clusters without running them.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    cls=OneLineErrorGroup,
    rich_markup_mode=None,
)


def _print_version(value: bool) -> None:
    if value:
        from perfcast import __version__

        typer.echo(f"perfcast {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[bool, typer.Option(
        "--version", callback=_print_version, is_eager=True,
        help="Print the perfcast version and exit.")] = False,
) -> None:
    """Forecast LLM training and inference performance on GPU clusters without running them."""

app.command("memory", help="Memory per GPU and per pipeline stage; does the run fit?")(
    memory_command
)
app.command("train", help="Training step time, tokens/s/GPU, MFU and where the time goes.")(
    train_command
)
app.command("infer", help="Serving forecast: TTFT, TPOT, tokens/s/GPU, memory, max batch.")(infer_command)
app.command("validate", help="Forecast every row of a measured-training CSV and report errors.")(
    validate_command
)
app.command("calibrate", help="Fit the calibration files on measured runs (training and/or "
            "inference CSVs); use them with --calibration DIR.")(calibrate_command)
app.add_typer(kernels_app, name="kernels", help="Time one GEMM or attention kernel on one GPU.")
app.command("profile", help="Measure kernels on this machine's GPU into a kernel table (torch).")(
    profile_command
)
app.command("comm", help="Time, algbw and busbw of one collective; the algorithm NCCL picks.")(
    comm_command
)
app.command("search", help="Best parallel strategies: enumerate, evaluate in bulk, rank.")(
    search_command
)
app.command("infer-search", help="Best serving deployments (TP/PP/EP/attention-DP, replicas, "
            "precision, concurrency, disaggregated xPyD) under TTFT/TPOT targets.")(
    infer_search_command
)
app.command("sweep", help="Best strategy over GPU counts, systems and hardware parameters.")(
    sweep_command
)
app.command("schedule", help="Simulate a pipeline schedule: step time, bubble, memory.")(schedule_command)
app.command("serve", help="Local web explorer: Train, Serve, Search, Compare pages.")(serve_command)
app.command("models", help="List catalog models.")(models_command)
app.command("systems", help="List catalog systems and GPUs.")(systems_command)
app.add_typer(catalog_app, name="catalog",
              help="Templates for your own hardware (--system FILE.yaml, --gpu FILE.yaml).")
use_wrapping_help(app)


def run() -> None:
    """Console-script entry point (one BLAS thread unless the user chose: ``blas_threads``)."""
    limit_blas_threads()
    app()


if __name__ == "__main__":  # pragma: no cover
    run()
