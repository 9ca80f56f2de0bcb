"""``perfcast comm``: time, algbw, busbw and algorithm of one collective on a catalog system."""

from __future__ import annotations

from enum import Enum
from typing import Annotated

import typer

from perfcast.cli.errors import handle_input_errors
from perfcast.cli.options import GPU_HELP, SYSTEM_HELP


class CollectiveOpt(str, Enum):
    all_reduce = "all-reduce"
    all_gather = "all-gather"
    reduce_scatter = "reduce-scatter"
    all_to_all = "all-to-all"
    send_recv = "send-recv"


class AlgorithmOpt(str, Enum):
    ring = "ring"
    tree = "tree"
    nvls = "nvls"
    hierarchical = "hierarchical"
    direct = "direct"
    pxn = "pxn"
    p2p = "p2p"


@handle_input_errors
def comm_command(
    collective: Annotated[CollectiveOpt, typer.Argument(help="Collective operation.")],
    size_bytes: Annotated[float, typer.Option(
        "--size-bytes", help="Bytes (nccl-tests size: the full buffer).")],
    gpus: Annotated[int, typer.Option("--gpus", "-g", help="GPUs in the group.")],
    system: Annotated[str, typer.Option("--system", "-s", help=SYSTEM_HELP)] = "dgx-h100",
    gpu: Annotated[str | None, typer.Option("--gpu", help=GPU_HELP)] = None,
    stride: Annotated[int, typer.Option(
        "--stride", help="Rank distance between group members (1 = consecutive GPUs).")] = 1,
    algorithm: Annotated[AlgorithmOpt | None, typer.Option(
        "--algorithm", help="Force an algorithm (default: what NCCL would pick).")] = None,
    json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Forecast one collective: time, algbw, busbw, algorithm and tiers crossed."""
    from perfcast.catalog.systems import load_system
    from perfcast.comm import estimate_collective
    from perfcast.errors import InputError
    from perfcast.specs.limits import (
        MAX_GPUS,
        MAX_MESSAGE_BYTES,
        check_at_most,
        check_non_negative,
        check_positive,
    )

    check_non_negative("size_bytes", size_bytes, MAX_MESSAGE_BYTES)
    check_positive("gpus", gpus, MAX_GPUS)
    if stride < 1:
        raise InputError("stride", stride, "must be a positive integer")
    check_at_most("gpus*stride", gpus * stride, MAX_GPUS)
    spec = load_system(system, gpu=gpu)
    estimate = estimate_collective(collective.value.replace("-", "_"), size_bytes, spec, gpus,
                                   stride, algorithm.value if algorithm else None)
    from perfcast.calibration.comm_alpha_beta import load_comm_alpha_beta

    default = ("scale_up" in estimate.tiers_crossed
               and load_comm_alpha_beta().uses_default(spec.gpu.generation))
    if json:
        from perfcast.report.json_out import to_json

        print(to_json({**estimate.to_dict(), "calibration_default": default}))
        return
    from perfcast.report.comm_text import render_collective
    from perfcast.report.console import make_console

    console = make_console()
    render_collective(estimate, console)
    if default:
        console.print(f"calibration: no collective measurements on {spec.gpu.generation} GPUs: "
                      "the scale-up efficiency fitted on other GPUs (comm_alpha_beta.yaml "
                      "'default', possibly another vendor's) stands in", highlight=False)
