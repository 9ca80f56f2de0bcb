"""The ``perfcast`` command. Thin: parse flags, build specs, call the API, render.

Heavy modules (numpy-based estimators, renderers) are imported inside commands so that
``perfcast --help`` stays fast.
"""

from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass
from typing import Annotated, Any

import typer

from perfcast.cli import typer_defaults
from perfcast.cli.app_group import OneLineErrorGroup, use_wrapping_help
from perfcast.cli.blas_threads import limit_blas_threads
from perfcast.cli.pydantic_plugins import skip_pydantic_plugins


@dataclass(frozen=True)
class CommandEntry:
    """One subcommand: where its function (or sub-``Typer``) lives and its one-line help.

    Commands are imported only when registered, so ``perfcast train`` loads the train module
    and not the search, serving, web or validation modules (issue 18 item 5)."""

    name: str
    module: str
    attribute: str
    help: str
    is_group: bool = False


COMMANDS: tuple[CommandEntry, ...] = (
    CommandEntry("memory", "perfcast.cli.memory_cmd", "memory_command",
                 "Memory per GPU and per pipeline stage; does the run fit?"),
    CommandEntry("train", "perfcast.cli.train_cmd", "train_command",
                 "Training step time, tokens/s/GPU, MFU and where the time goes."),
    CommandEntry("infer", "perfcast.cli.infer_cmd", "infer_command",
                 "Serving forecast: TTFT, TPOT, tokens/s/GPU, memory, max batch."),
    CommandEntry("validate", "perfcast.cli.validate_cmd", "validate_command",
                 "Forecast every row of a measured-training CSV and report errors."),
    CommandEntry("calibrate", "perfcast.cli.calibrate_cmd", "calibrate_command",
                 "Fit the calibration files on measured runs (training and/or "
                 "inference CSVs); use them with --calibration DIR."),
    CommandEntry("kernels", "perfcast.cli.kernels_cmd", "kernels_app",
                 "Time one GEMM or attention kernel on one GPU.", is_group=True),
    CommandEntry("profile", "perfcast.cli.profile_cmd", "profile_command",
                 "Measure kernels on this machine's GPU into a kernel table (torch)."),
    CommandEntry("comm", "perfcast.cli.comm_cmd", "comm_command",
                 "Time, algbw and busbw of one collective; the algorithm NCCL picks."),
    CommandEntry("search", "perfcast.cli.search_cmd", "search_command",
                 "Best parallel strategies: enumerate, evaluate in bulk, rank."),
    CommandEntry("infer-search", "perfcast.cli.infer_search_cmd", "infer_search_command",
                 "Best serving deployments (TP/PP/EP/attention-DP, replicas, "
                 "precision, concurrency, disaggregated xPyD) under TTFT/TPOT targets."),
    CommandEntry("sweep", "perfcast.cli.sweep_cmd", "sweep_command",
                 "Best strategy over GPU counts, systems and hardware parameters."),
    CommandEntry("schedule", "perfcast.cli.schedule_cmd", "schedule_command",
                 "Simulate a pipeline schedule: step time, bubble, memory."),
    CommandEntry("serve", "perfcast.cli.serve_cmd", "serve_command",
                 "Local web explorer: Train, Serve, Search, Compare pages."),
    CommandEntry("models", "perfcast.cli.catalog_cmd", "models_command",
                 "List catalog models."),
    CommandEntry("systems", "perfcast.cli.catalog_cmd", "systems_command",
                 "List catalog systems and GPUs."),
    CommandEntry("catalog", "perfcast.cli.hardware_cmd", "catalog_app",
                 "Templates for your own hardware (--system FILE.yaml, --gpu FILE.yaml).",
                 is_group=True),
)


def _print_version(value: bool) -> None:
    if value:
        from perfcast import __version__

        typer.echo(f"perfcast {__version__}")
        raise typer.Exit()


def _root(
    version: Annotated[bool, typer.Option(
        "--version", callback=_print_version, is_eager=True,
        help="Print the perfcast version and exit.")] = False,
) -> None:
    """Forecast LLM training and inference performance on GPU clusters without running them."""


def build_app(only: str | None = None) -> typer.Typer:
    """The ``perfcast`` Typer app with every command, or with only the command named ``only``
    (what ``run`` uses when the command line names one: nothing else is imported or built)."""
    app = typer.Typer(
        name="perfcast",
        help="Forecast LLM training and inference performance on GPU clusters without "
             "running them.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        cls=OneLineErrorGroup,
        rich_markup_mode=None,
    )
    app.callback()(_root)
    for entry in COMMANDS:
        if only is not None and entry.name != only:
            continue
        target = getattr(importlib.import_module(entry.module), entry.attribute)
        if entry.is_group:
            app.add_typer(target, name=entry.name, help=entry.help)
        else:
            app.command(entry.name, help=entry.help)(target)
    use_wrapping_help(app)
    return app


_FULL_APP: list[typer.Typer] = []


def __getattr__(name: str) -> Any:
    """``perfcast.cli.main.app``: the full app, built on first use (tests, the web runner)."""
    if name == "app":
        if not _FULL_APP:
            _FULL_APP.append(build_app())
        return _FULL_APP[0]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _named_command(argv: list[str]) -> str | None:
    """The subcommand the command line names first, or None (``--help``, ``--version``, none)."""
    names = {entry.name for entry in COMMANDS}
    return argv[0] if argv and argv[0] in names else None


def run() -> None:
    """Console-script entry point (one BLAS thread and no pydantic plugin discovery unless the
    user chose otherwise: ``blas_threads``, ``pydantic_plugins``; options left at their defaults
    build no typer validator: ``typer_defaults``)."""
    limit_blas_threads()
    skip_pydantic_plugins()
    typer_defaults.install()
    build_app(_named_command(sys.argv[1:]))()


if __name__ == "__main__":  # pragma: no cover
    run()
