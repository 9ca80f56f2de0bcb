"""``perfcast schedule``: a pipeline-schedule study on given per-micro-batch times."""

from __future__ import annotations

from enum import Enum
from typing import Annotated

import typer

from perfcast.cli.errors import handle_input_errors
from perfcast.errors import InputError


class ScheduleChoice(str, Enum):
    gpipe = "gpipe"
    one_f_one_b = "1f1b"
    interleaved = "interleaved"
    zb_h1 = "zb-h1"
    zb_v = "zb-v"
    dualpipe = "dualpipe"


@handle_input_errors
def schedule_command(
    schedule: Annotated[ScheduleChoice, typer.Option("--schedule", help="Pipeline schedule.")],
    stages: Annotated[int, typer.Option("--stages", min=1, help="Pipeline stages P.")],
    micro_batches: Annotated[int, typer.Option("--micro-batches", min=1,
                                               help="Micro-batches per step M.")],
    forward_time: Annotated[float, typer.Option("--forward-time", min=0.0,
                                                help="Forward time F of one stage, one micro-batch.")],
    backward_time: Annotated[float, typer.Option(
        "--backward-time", min=0.0, help="Backward time B (input + weight gradient).")],
    weight_grad_fraction: Annotated[float, typer.Option(
        "--weight-grad-fraction", min=0.0, max=1.0,
        help="Share of B that is weight gradient (deferrable by zb-h1/zb-v/dualpipe).")] = 0.5,
    virtual_stages: Annotated[int, typer.Option(
        "--virtual-stages", min=1, help="Model chunks per stage (interleaved).")] = 1,
    p2p_time: Annotated[float, typer.Option("--p2p-time", min=0.0,
                                            help="Send/recv latency between stages.")] = 0.0,
    json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Simulate one pipeline step: step time, bubble, micro-batches in flight per stage."""
    from perfcast.schedule.simulate import simulate_pipeline
    from perfcast.schedule.timeline import PassTimes
    from perfcast.specs.limits import (
        MAX_PIPELINE_PASS_STAGES,
        MAX_PIPELINE_PASSES,
        MAX_TIME_S,
        check_at_most,
        check_non_negative,
        check_positive,
    )

    check_positive("forward_time", forward_time, MAX_TIME_S)
    check_positive("backward_time", backward_time, MAX_TIME_S)
    check_non_negative("p2p_time", p2p_time, MAX_TIME_S)
    chunks = {ScheduleChoice.interleaved: virtual_stages, ScheduleChoice.zb_v: 2,
              ScheduleChoice.dualpipe: 2}.get(schedule, 1)
    passes = stages * micro_batches * chunks
    check_at_most("stages*micro_batches*chunks", passes, MAX_PIPELINE_PASSES)
    check_at_most("passes*stages", passes * stages, MAX_PIPELINE_PASS_STAGES)
    if schedule in (ScheduleChoice.gpipe, ScheduleChoice.one_f_one_b,
                    ScheduleChoice.zb_h1) and virtual_stages != 1:
        raise InputError("virtual_stages", virtual_stages,
                         f"--schedule {schedule.value} runs one chunk per stage (give 1)")
    if schedule == ScheduleChoice.interleaved and virtual_stages < 2:
        raise InputError("virtual_stages", virtual_stages, "--schedule interleaved needs >= 2")
    weight = backward_time * weight_grad_fraction
    times = [PassTimes(forward_time, backward_time - weight, weight)] * stages
    timeline = simulate_pipeline(schedule.value, times, micro_batches, virtual_stages, p2p_time)
    if json:
        from perfcast.report.json_out import to_json

        print(to_json(timeline.to_dict()))
        return
    from perfcast.report.console import make_console
    from perfcast.report.schedule_text import render_schedule

    render_schedule(timeline, make_console())
