"""``perfcast sweep``: the best strategy over GPU counts, systems and hardware parameters."""

from __future__ import annotations

from collections.abc import Sequence
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from perfcast.cli.errors import handle_input_errors
from perfcast.cli.options import (
    DEFAULT_KERNEL_BACKEND_OPT,
    SERVING_KERNEL_BACKEND_OPT,
    CalibrationOption,
    KernelBackendOpt,
    KernelTableOption,
)

SweepKernelBackendOption = Annotated[KernelBackendOpt | None, typer.Option(
    "--kernel-backend", help="Kernel time model: roofline, analytical (tile/wave) or measured "
    f"(default {DEFAULT_KERNEL_BACKEND_OPT.value}; with --serving "
    f"{SERVING_KERNEL_BACKEND_OPT.value}, the serving forecasts' own).")]


class EngineOpt(str, Enum):
    local = "local"
    dask = "dask"


class ScalingOpt(str, Enum):
    strong = "strong"
    weak = "weak"


def _ints(text: str, name: str) -> list[int]:
    from perfcast.errors import InputError
    from perfcast.specs.limits import MAX_GPUS, check_at_most

    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise InputError(name, text, "expected comma-separated integers") from None
    if not values:
        raise InputError(name, text, "expected at least one integer, e.g. 8,16")
    for value in values:
        if value <= 0:
            raise InputError(name, value, "must be a positive number of GPUs")
        check_at_most(name, value, MAX_GPUS)
    return list(dict.fromkeys(values))


def _vary(items: list[str]) -> dict[str, Sequence[float]]:
    """``peak_flops=0.5,1,2`` -> {"peak_flops": [0.5, 1.0, 2.0]} (factors in (0, 1000])."""
    from perfcast.errors import InputError
    from perfcast.specs.limits import MAX_HARDWARE_FACTOR, check_positive

    out: dict[str, Sequence[float]] = {}
    for item in items:
        name, _, values = item.partition("=")
        try:
            out[name.strip()] = [float(v) for v in values.split(",") if v]
        except ValueError:
            raise InputError("vary", item, "expected NAME=F1,F2,...") from None
        if not out[name.strip()]:
            raise InputError("vary", item, "expected NAME=F1,F2,...")
        from perfcast.search.sweep import HARDWARE_PARAMETERS

        if name.strip() not in HARDWARE_PARAMETERS:
            raise InputError("vary", name.strip(), f"choose from {sorted(HARDWARE_PARAMETERS)}")
        for factor in out[name.strip()]:
            check_positive(f"vary {name.strip()}", factor, MAX_HARDWARE_FACTOR)
    return out


@handle_input_errors
def sweep_command(
    model: Annotated[str, typer.Option("--model", "-m", help="Catalog name, HF config.json or YAML/JSON file.")],
    gpus: Annotated[str, typer.Option("--gpus", "-g", help="Comma-separated GPU counts, e.g. 64,128,256.")],
    systems: Annotated[str, typer.Option("--systems", "--system", "-s", help="Comma-separated systems, e.g. dgx-a100,dgx-h100: catalog systems or GPUs, or system/GPU YAML files.")] = "dgx-h100",
    global_batch_size: Annotated[int, typer.Option("--global-batch-size", "--gbs", help="Sequences per step (at the smallest GPU count with --scaling weak).")] = 512,
    seq_length: Annotated[int, typer.Option("--seq-length", "--seq-len", help="Tokens per sequence.")] = 4096,
    scaling: Annotated[ScalingOpt, typer.Option("--scaling", help="strong: fixed global batch; weak: batch grows with GPUs.")] = ScalingOpt.strong,
    vary: Annotated[list[str] | None, typer.Option("--vary", help="Hardware factors, e.g. peak_flops=0.5,1,2 (repeatable): peak_flops, hbm_bandwidth, hbm_capacity, scale_up_bandwidth, scale_out_bandwidth.")] = None,
    max_cp: Annotated[int, typer.Option("--max-cp", help="Largest CP searched.")] = 16,
    out: Annotated[Path | None, typer.Option("--out", help="Write rows to FILE.parquet or FILE.csv (re-run to resume).")] = None,
    plot: Annotated[Path | None, typer.Option("--plot", help="Write PNG plots into this directory.")] = None,
    engine: Annotated[EngineOpt, typer.Option("--engine", help="Run tasks in-process or on Dask.")] = EngineOpt.local,
    scheduler: Annotated[str | None, typer.Option("--scheduler", help="Dask scheduler address (default: a local cluster).")] = None,
    workers: Annotated[int | None, typer.Option("--workers", min=1, help="Workers of the local Dask cluster.")] = None,
    kernel_backend: SweepKernelBackendOption = None,
    kernel_table: KernelTableOption = None,
    calibration: CalibrationOption = None,
    json: Annotated[bool, typer.Option("--json", help="Print the rows as one JSON object.")] = False,
    serving: Annotated[bool, typer.Option("--serving", help="Sweep serving deployments (infer-search) instead of training strategies.")] = False,
    input_len: Annotated[int, typer.Option("--input-len", help="--serving: prompt tokens per request.")] = 1024,
    output_len: Annotated[int, typer.Option("--output-len", help="--serving: generated tokens per request.")] = 1024,
    ttft_ms: Annotated[str | None, typer.Option("--ttft-ms", help="--serving: comma-separated TTFT targets, ms.")] = None,
    tpot_ms: Annotated[str | None, typer.Option("--tpot-ms", help="--serving: comma-separated TPOT targets, ms.")] = None,
    min_tokens_per_s_per_user: Annotated[float | None, typer.Option("--min-tokens-per-s-per-user", help="--serving: least tokens/s per user.")] = None,
    serving_engine: Annotated[str, typer.Option("--serving-engine", help="--serving: vllm, sglang or trtllm.")] = "vllm",
    disaggregated: Annotated[bool, typer.Option("--disaggregated/--no-disaggregated", help="--serving: also search prefill/decode pools.")] = False,
) -> None:
    """Search the best strategy (or, with --serving, deployment) at every point; write a table and plots."""
    from perfcast.cli.paths import check_output_dir, check_output_file
    from perfcast.errors import InputError
    from perfcast.search.space import SearchConstraints
    from perfcast.search.sweep import run_sweep, sweep_tasks
    from perfcast.specs.limits import (
        MAX_BATCH_SEQUENCES,
        MAX_PARALLEL_SIZE,
        MAX_SEQ_LENGTH,
        check_positive,
    )

    if out is not None and out.suffix not in (".csv", ".parquet"):
        raise InputError("out", str(out), "must end in .csv or .parquet")
    check_output_file("out", out)
    check_output_dir("plot", plot)
    check_positive("global_batch_size", global_batch_size, MAX_BATCH_SEQUENCES)
    check_positive("seq_length", seq_length, MAX_SEQ_LENGTH)
    check_positive("max_cp", max_cp, MAX_PARALLEL_SIZE)
    if serving:
        from perfcast.cli.serving_sweep_run import run_serving_sweep

        run_serving_sweep(
            model=model, systems=[s.strip() for s in systems.split(",") if s.strip()],
            gpu_counts=_ints(gpus, "gpus"), input_len=input_len, output_len=output_len,
            ttft_ms=ttft_ms, tpot_ms=tpot_ms, min_tokens_per_s_per_user=min_tokens_per_s_per_user,
            serving_engine=serving_engine, disaggregated=disaggregated, out=out, plot=plot,
            engine=engine.value, scheduler=scheduler, workers=workers, json=json,
            calibration=calibration,
            kernel_backend=(kernel_backend or SERVING_KERNEL_BACKEND_OPT).value,
            kernel_table=_table((kernel_backend or SERVING_KERNEL_BACKEND_OPT).value,
                                kernel_table))
        return
    kernel_backend = kernel_backend or DEFAULT_KERNEL_BACKEND_OPT
    if calibration is not None:
        from perfcast.calibration.bundle import load_calibration

        load_calibration(calibration)  # fail early, once, on a bad directory
    tasks = sweep_tasks(model, [s.strip() for s in systems.split(",") if s.strip()],
                        _ints(gpus, "gpus"), global_batch_size, seq_length, scaling.value,
                        _vary(vary or []), SearchConstraints(max_cp=max_cp), kernel_backend.value,
                        _table(kernel_backend.value, kernel_table),
                        str(calibration.resolve()) if calibration else "")
    if json:
        rows = run_sweep(tasks, out, engine.value, scheduler, workers)
    else:
        from rich.progress import Progress

        with Progress(transient=True) as bar:
            task = bar.add_task("sweep", total=len(tasks))
            rows = run_sweep(tasks, out, engine.value, scheduler, workers,
                             progress=lambda done, total: bar.update(task, completed=done))
    written = []
    if plot is not None:
        from perfcast.report.sweep_plots import plot_sweep

        written = plot_sweep(rows, plot)
    if json:
        from perfcast.estimate.training_report import MFU_BASIS
        from perfcast.report.json_out import to_json
        from perfcast.search.sweep import json_row

        print(to_json({"rows": [json_row(r) for r in rows], "mfu_basis": MFU_BASIS,
                       "out": str(out) if out else None,
                       "plots": [str(p) for p in written]}))
        return
    from perfcast.report.console import make_console
    from perfcast.report.sweep_text import render_sweep

    render_sweep(rows, make_console(), out, written)


def _table(backend: str, table: Path | None) -> str | None:
    """The ``--kernel-table`` path, checked (it must load and needs the measured backend)."""
    if table is None:
        return None
    from perfcast.cli.build import kernel_backend as make_backend

    make_backend(backend, table)
    return str(table)
