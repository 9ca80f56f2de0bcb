"""``perfcast memory``: memory per GPU per pipeline stage."""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated

import typer

from perfcast.cli.errors import handle_input_errors
from perfcast.cli.options import RunArgs, run_options
from perfcast.cli.train_cmd import ScheduleOpt


@run_options
@handle_input_errors
def memory_command(
    args: RunArgs,
    pipeline_schedule: Annotated[ScheduleOpt, typer.Option(
        "--pipeline-schedule", help="Pipeline schedule (auto: interleaved if vpp > 1); sets the "
        "in-flight micro-batches (DualPipe: two stages per device).")] = ScheduleOpt.auto,
) -> None:
    """Forecast memory per GPU for every pipeline stage and whether it fits."""
    from perfcast.cli.build import build_specs
    from perfcast.memory.estimate import estimate_memory

    specs = build_specs(args)
    if pipeline_schedule != ScheduleOpt.auto:
        strategy = specs.strategy.model_validate(
            {**specs.strategy.model_dump(), "pipeline_schedule": pipeline_schedule.value})
        specs = replace(specs, strategy=strategy)  # keeps the framework and its assumptions
    report = estimate_memory(specs.model, specs.system, specs.strategy, specs.workload)
    advice = None
    if not report.fits:
        from perfcast.search.fit_advice import fit_advice

        advice = fit_advice(specs.model, specs.system, specs.strategy, specs.workload)
    if args.json:
        from perfcast.report.json_out import to_json

        out = specs.with_assumptions(report.to_dict())
        if not report.fits:
            out["fit_advice"] = advice.to_dict() if advice is not None else None
        print(to_json(out))
        return
    from perfcast.cli.train_cmd import _verdict
    from perfcast.report.console import make_console
    from perfcast.report.memory_text import render_fit_advice, render_memory

    console = make_console()
    console.print(_verdict(report, advice), highlight=False, soft_wrap=True)
    render_memory(report, console)
    if specs.framework is not None:
        from perfcast.report.assumptions_text import render_assumptions

        render_assumptions(specs.framework, specs.assumptions, console)
    if not report.fits:
        render_fit_advice(advice, console)
