"""``perfcast search``: the best parallel strategies for a model on a number of GPUs."""

from __future__ import annotations

from enum import Enum
from typing import Annotated

import typer

from perfcast.cli.errors import handle_input_errors
from perfcast.cli.options import (
    DEFAULT_KERNEL_BACKEND_OPT,
    GPU_HELP,
    SYSTEM_HELP,
    CalibrationOption,
    KernelBackendOption,
    KernelTableOption,
)

PROGRESS_MIN_STRATEGIES = 200_000
"""Show a progress bar when a search evaluates at least this many strategies."""


class ObjectiveOpt(str, Enum):
    throughput = "throughput"
    time = "time"
    cost = "cost"


def _opt(*names: str, help: str):
    return typer.Option(*names, help=help)


@handle_input_errors
def search_command(
    model: Annotated[str, typer.Option("--model", "-m", help="Catalog name, HF config.json or YAML/JSON file.")],
    gpus: Annotated[int, typer.Option("--gpus", "-g", help="Total GPUs.")],
    system: Annotated[str, typer.Option("--system", "-s", help=SYSTEM_HELP)] = "dgx-h100",
    gpu: Annotated[str | None, typer.Option("--gpu", help=GPU_HELP)] = None,
    global_batch_size: Annotated[int, typer.Option("--global-batch-size", "--gbs", help="Sequences per step.")] = 512,
    seq_length: Annotated[int, typer.Option("--seq-length", "--seq-len", help="Tokens per sequence.")] = 4096,
    top: Annotated[int, typer.Option("--top", min=1, help="How many best strategies to show.")] = 5,
    objective: Annotated[ObjectiveOpt, typer.Option("--objective", help="Rank by tokens/s/GPU, time or cost to train --token-budget.")] = ObjectiveOpt.throughput,
    token_budget: Annotated[float, typer.Option("--token-budget", help="Tokens to train (time and cost objectives).")] = 1e12,
    price_per_gpu_hour: Annotated[float | None, typer.Option("--price-per-gpu-hour", help="$ per GPU-hour (cost objective).")] = None,
    tp: Annotated[int | None, _opt("--tp", "--tensor-model-parallel-size", help="Fix TP.")] = None,
    pp: Annotated[int | None, _opt("--pp", "--pipeline-model-parallel-size", help="Fix PP.")] = None,
    cp: Annotated[int | None, _opt("--cp", "--context-parallel-size", help="Fix CP.")] = None,
    ep: Annotated[int | None, _opt("--ep", "--expert-model-parallel-size", help="Fix EP.")] = None,
    vpp: Annotated[int | None, _opt("--vpp", help="Fix model chunks per pipeline rank.")] = None,
    micro_batch_size: Annotated[int | None, _opt("--micro-batch-size", "--mbs", help="Fix the micro-batch.")] = None,
    min_tp: Annotated[int, typer.Option("--min-tp", help="Smallest TP.")] = 1,
    max_tp: Annotated[int | None, _opt("--max-tp", help="Largest TP.")] = None,
    min_pp: Annotated[int, typer.Option("--min-pp", help="Smallest PP.")] = 1,
    max_pp: Annotated[int | None, _opt("--max-pp", help="Largest PP.")] = None,
    max_cp: Annotated[int, typer.Option("--max-cp", help="Largest CP.")] = 16,
    max_ep: Annotated[int | None, _opt("--max-ep", help="Largest EP.")] = None,
    max_vpp: Annotated[int, typer.Option("--max-vpp", help="Most model chunks per pipeline rank.")] = 8,
    max_micro_batch_size: Annotated[int, typer.Option("--max-micro-batch-size", help="Largest micro-batch.")] = 8,
    no_fp8: Annotated[bool, typer.Option("--no-fp8", help="Do not try FP8.")] = False,
    framework: Annotated[str, typer.Option("--framework", help="Training framework profile NAME[@VERSION] whose rules the layouts obey and whose defaults fill the options not searched.")] = "megatron-core",
    fix: Annotated[list[str] | None, typer.Option("--fix", help="Pin a dimension: KEY=VALUE (tp, pp, vpp, cp, ep, etp, mbs, schedule, recompute, sharding, precision, fp8_recipe, sp, tp_comm_overlap, ep_overlap, dispatcher, cp_comm_type, cp_a2a, tp2d_rows, cuda_graphs, offload, recompute_modules=core_attn,mlp, fp8_gemm_scope); repeatable.")] = None,
    exclude: Annotated[list[str] | None, typer.Option("--exclude", help="Never try KEY=VALUE (same keys as --fix); repeatable.")] = None,
    jobs: Annotated[int | None, typer.Option("--jobs", "-j", help="Worker processes (default: every core when the space has at least 500,000 strategies, else 1); the result does not depend on it.")] = None,
    timings: Annotated[bool, typer.Option("--timings", help="Add the wall seconds of the evaluation (varies run to run).")] = False,
    kernel_backend: KernelBackendOption = DEFAULT_KERNEL_BACKEND_OPT,
    kernel_table: KernelTableOption = None,
    calibration: CalibrationOption = None,
    json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    csv: Annotated[bool, typer.Option("--csv", help="Print the best strategies as CSV.")] = False,
) -> None:
    """Enumerate every valid strategy, evaluate them in bulk, show the best and the Pareto front."""
    from perfcast.calibration.bundle import load_calibration
    from perfcast.catalog.models import load_model
    from perfcast.catalog.systems import load_system
    from perfcast.cli.build import kernel_backend as make_backend
    from perfcast.search.pins import Pin
    from perfcast.search.run import search_strategies
    from perfcast.search.space import SearchConstraints
    from perfcast.specs.limits import (
        MAX_BATCH_SEQUENCES,
        MAX_GPUS,
        MAX_MICRO_BATCH_SIZE,
        MAX_PARALLEL_SIZE,
        MAX_PRICE_PER_GPU_HOUR,
        MAX_SEARCH_JOBS,
        MAX_SEARCH_MICRO_BATCH_SIZE,
        MAX_SEQ_LENGTH,
        MAX_TOKEN_BUDGET,
        check_non_negative,
        check_positive,
    )
    from perfcast.specs.workload import Workload

    check_positive("gpus", gpus, MAX_GPUS)
    check_positive("global_batch_size", global_batch_size, MAX_BATCH_SEQUENCES)
    check_positive("seq_length", seq_length, MAX_SEQ_LENGTH)
    check_positive("top", top, MAX_BATCH_SEQUENCES)
    check_positive("token_budget", token_budget, MAX_TOKEN_BUDGET)
    if price_per_gpu_hour is not None:
        check_non_negative("price_per_gpu_hour", price_per_gpu_hour, MAX_PRICE_PER_GPU_HOUR)
    check_positive("max_micro_batch_size", max_micro_batch_size, MAX_SEARCH_MICRO_BATCH_SIZE)
    if jobs is not None:
        check_positive("jobs", jobs, MAX_SEARCH_JOBS)
    if micro_batch_size is not None:
        check_positive("micro_batch_size", micro_batch_size, MAX_MICRO_BATCH_SIZE)
    for name, value in (("tp", tp), ("pp", pp), ("cp", cp), ("ep", ep), ("vpp", vpp),
                        ("min_tp", min_tp), ("max_tp", max_tp), ("min_pp", min_pp),
                        ("max_pp", max_pp), ("max_cp", max_cp), ("max_ep", max_ep),
                        ("max_vpp", max_vpp)):
        if value is not None:
            check_positive(name, value, MAX_PARALLEL_SIZE)
    constraints = SearchConstraints(
        tp=tp, pp=pp, cp=cp, ep=ep, vpp=vpp, micro_batch_size=micro_batch_size, min_tp=min_tp,
        max_tp=max_tp, min_pp=min_pp, max_pp=max_pp, max_cp=max_cp, max_ep=max_ep,
        max_vpp=max_vpp, max_micro_batch_size=max_micro_batch_size, fp8=not no_fp8,
        fixed=tuple(map(Pin.parse, fix or ())), excluded=tuple(map(Pin.parse, exclude or ())))
    spec_model = load_model(model)
    spec_system = load_system(system, num_gpus=gpus, gpu=gpu)
    workload = Workload(seq_length=seq_length, global_batch_size=global_batch_size)
    kwargs = dict(constraints=constraints, objective=objective.value, top=top,
                  token_budget=token_budget, price_per_gpu_hour=price_per_gpu_hour,
                  kernel_backend=make_backend(kernel_backend.value, kernel_table),
                  calibration=load_calibration(calibration), framework=framework, jobs=jobs)
    result = _with_progress(search_strategies, spec_model, spec_system, workload, gpus, kwargs)
    if json:
        from perfcast.report.json_out import to_json

        print(to_json(result.to_dict(timings=timings)))
    elif csv:
        from perfcast.report.search_text import search_csv

        print(search_csv(result), end="")
    else:
        from perfcast.report.console import make_console
        from perfcast.report.search_text import render_search

        render_search(result, make_console(), timings=timings)


def _with_progress(search, model, system, workload, gpus, kwargs):
    """Run ``search`` with a rich progress bar on stderr once it proves long (only where stderr
    is a terminal: stdout stays the report, JSON or CSV alone)."""
    from rich.console import Console
    from rich.progress import Progress

    console = Console(stderr=True)
    if not console.is_terminal:
        return search(model, system, workload, gpus, **kwargs)
    with Progress(transient=True, console=console) as bar:
        task = bar.add_task("evaluating strategies", total=None, visible=False)

        def progress(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total,
                       visible=total >= PROGRESS_MIN_STRATEGIES)

        return search(model, system, workload, gpus, progress=progress, **kwargs)
