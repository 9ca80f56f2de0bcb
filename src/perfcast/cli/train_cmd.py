"""``perfcast train``: step time, throughput, MFU and where the time goes."""

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
    RunArgs,
    run_options,
)


class ScheduleOpt(str, Enum):
    auto = "auto"
    one_f_one_b = "1f1b"
    interleaved = "interleaved"
    gpipe = "gpipe"
    zb_h1 = "zb-h1"
    zb_v = "zb-v"
    dualpipe = "dualpipe"


@run_options
@handle_input_errors
def train_command(
    args: RunArgs,
    pipeline_schedule: Annotated[ScheduleOpt, typer.Option(
        "--pipeline-schedule", help="Pipeline schedule (auto: interleaved if vpp > 1).")
    ] = ScheduleOpt.auto,
    kernel_backend: KernelBackendOption = DEFAULT_KERNEL_BACKEND_OPT,
    kernel_table: KernelTableOption = None,
    calibration: CalibrationOption = None,
    trace: Annotated[Path | None, typer.Option(
        "--trace", help="Write the step as Chrome-trace / Perfetto JSON to this file.")] = None,
    plot: Annotated[Path | None, typer.Option(
        "--plot", help="Write PNG and SVG plots (Gantt, memory, breakdowns, roofline) here.")] = None,
    report: Annotated[Path | None, typer.Option(
        "--report", help="Write one self-contained HTML report to this file.")] = None,
    train_tokens: Annotated[float | None, typer.Option(
        "--train-tokens", help="Also report time, GPU-hours, energy and cost to train this "
        "many tokens.")] = None,
    price_per_gpu_hour: Annotated[float | None, typer.Option(
        "--price-per-gpu-hour", help="$ per GPU-hour for the cost of --train-tokens.")] = None,
) -> None:
    """Forecast one training step."""
    from perfcast.calibration.bundle import load_calibration
    from perfcast.cli.build import build_specs
    from perfcast.cli.build import kernel_backend as make_backend
    from perfcast.cli.paths import check_output_dir, check_output_file
    from perfcast.estimate.training import estimate_training

    check_output_file("trace", trace)
    check_output_dir("plot", plot)
    check_output_file("report", report)
    _check_budget(train_tokens, price_per_gpu_hour)
    specs = build_specs(args)
    strategy = specs.strategy
    if pipeline_schedule != ScheduleOpt.auto:
        strategy = strategy.model_validate(
            {**strategy.model_dump(), "pipeline_schedule": pipeline_schedule.value})
    backend = make_backend(kernel_backend.value, kernel_table)
    cal = load_calibration(calibration)
    result = estimate_training(specs.model, specs.system, strategy, specs.workload,
                               kernel_backend=backend, calibration=cal)
    if trace or plot or report:
        from perfcast.cli.app_group import invocation_text
        from perfcast.report.step_exports import write_step_exports

        write_step_exports(result, specs.model, specs.system, specs.workload, trace, plot, report,
                           command=invocation_text(), kernel_backend=backend, calibration=cal)
    advice = None
    if not result.memory.fits:
        from perfcast.search.fit_advice import fit_advice

        advice = fit_advice(specs.model, specs.system, strategy, specs.workload,
                            kernel_backend=backend, calibration=cal)
    budget = None
    if train_tokens is not None:
        from perfcast.estimate.training_budget import training_budget

        budget = training_budget(result.tokens_per_s_per_gpu, result.num_gpus,
                                 specs.system.gpu, train_tokens, price_per_gpu_hour)
    if args.json:
        from perfcast.report.json_out import to_json

        out = specs.with_assumptions(result.to_dict())
        if budget is not None:
            out["training_budget"] = budget.to_dict()
        if not result.memory.fits:
            out["fit_advice"] = advice.to_dict() if advice is not None else None
        print(to_json(out))
        return
    from perfcast.report.console import make_console
    from perfcast.report.memory_text import render_fit_advice
    from perfcast.report.training_text import render_training

    console = make_console()
    console.print(_verdict(result.memory, advice), highlight=False, soft_wrap=True)
    render_training(result, console)
    if budget is not None:
        from perfcast.report.training_budget_text import render_training_budget

        render_training_budget(budget, console)
    if specs.framework is not None:
        from perfcast.report.assumptions_text import render_assumptions

        render_assumptions(specs.framework, specs.assumptions, console)
    if not result.memory.fits:
        render_fit_advice(advice, console)


def _check_budget(train_tokens: float | None, price_per_gpu_hour: float | None) -> None:
    """``--train-tokens`` positive and bounded; ``--price-per-gpu-hour`` non-negative, bounded
    and only with ``--train-tokens``."""
    from perfcast.errors import InputError
    from perfcast.specs.limits import (
        MAX_PRICE_PER_GPU_HOUR,
        MAX_TOKEN_BUDGET,
        check_non_negative,
        check_positive,
    )

    if train_tokens is not None:
        check_positive("train_tokens", train_tokens, MAX_TOKEN_BUDGET)
    if price_per_gpu_hour is not None:
        if train_tokens is None:
            raise InputError("price_per_gpu_hour", price_per_gpu_hour,
                             "needs --train-tokens (the cost is of training that many tokens)")
        check_non_negative("price_per_gpu_hour", price_per_gpu_hour, MAX_PRICE_PER_GPU_HOUR)


def _verdict(memory, advice) -> str:
    """The fit verdict line (with the cheapest change that fits when it does not)."""
    from perfcast.memory.fit_advice import fit_verdict

    return fit_verdict(memory, advice)
