"""``perfcast infer-search``: the best serving deployments of a model on N GPUs under TTFT,
TPOT and tokens/s/user targets, aggregated and (optionally) disaggregated prefill/decode."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from perfcast.cli.errors import handle_input_errors
from perfcast.cli.options import (
    SERVING_KERNEL_BACKEND_OPT,
    CalibrationOption,
    KernelBackendOption,
    KernelTableOption,
)


class SearchEngineOpt(str, Enum):
    vllm = "vllm"
    sglang = "sglang"
    trtllm = "trtllm"
    tensorrt_llm = "tensorrt-llm"


ENGINE_PROFILES = {"vllm": "vllm", "sglang": "sglang", "trtllm": "tensorrt-llm",
                   "tensorrt-llm": "tensorrt-llm"}
"""Engine profile (``catalog/data/frameworks/serving``) of each ``--engine`` value."""


PLOT_SUFFIXES = (".png", ".svg", ".pdf")
"""Figure formats ``--plot`` writes (matplotlib picks the format from the suffix)."""


def _opt(*names: str, help: str):
    return typer.Option(*names, help=help)


@handle_input_errors
def infer_search_command(
    model: Annotated[str, _opt("--model", "-m", help="Catalog name, HF config.json or YAML/JSON file.")],
    gpus: Annotated[int, _opt("--gpus", "-g", help="Total GPUs to deploy on.")],
    system: Annotated[str, _opt("--system", "-s", help="Catalog system name.")] = "dgx-h100",
    input_len: Annotated[int, _opt("--input-len", help="Prompt tokens per request.")] = 1024,
    output_len: Annotated[int, _opt("--output-len", help="Generated tokens per request.")] = 1024,
    ttft_ms: Annotated[float | None, _opt("--ttft-ms", help="Mean TTFT target, ms.")] = None,
    tpot_ms: Annotated[float | None, _opt("--tpot-ms", help="Mean TPOT target, ms.")] = None,
    min_tokens_per_s_per_user: Annotated[float | None, _opt(
        "--min-tokens-per-s-per-user", help="Least output tokens/s each user sees (1/TPOT).")] = None,
    engine: Annotated[SearchEngineOpt, _opt(
        "--engine", help="Serving engine profile.")] = SearchEngineOpt.vllm,
    disaggregated: Annotated[bool, typer.Option(
        "--disaggregated/--no-disaggregated",
        help="Also search disaggregated prefill/decode pools (xPyD).")] = False,
    top: Annotated[int, _opt("--top", help="How many best deployments to show.")] = 5,
    json: Annotated[bool, _opt("--json", help="Print one JSON object.")] = False,
    plot: Annotated[Path | None, _opt(
        "--plot", help="Write the Pareto fronts (tokens/s/user vs tokens/s/GPU) as PNG/SVG.")] = None,
    kernel_backend: KernelBackendOption = SERVING_KERNEL_BACKEND_OPT,
    kernel_table: KernelTableOption = None,
    calibration: CalibrationOption = None,
) -> None:
    """Search serving deployments: screen all in bulk, re-score the best as `infer` does, rank."""
    from perfcast.calibration.bundle import load_calibration
    from perfcast.catalog.models import load_model
    from perfcast.catalog.systems import load_system
    from perfcast.cli.build import kernel_backend as make_backend
    from perfcast.cli.paths import check_output_file
    from perfcast.errors import InputError
    from perfcast.serving_search import Targets, search_deployments
    from perfcast.specs.limits import (
        MAX_SEARCH_TOP,
        MAX_SERVING_SEARCH_GPUS,
        MAX_TIME_S,
        MAX_TOKEN_RATE,
        check_at_most,
        check_positive,
        check_request_lengths,
    )

    check_output_file("plot", plot)
    if plot is not None and plot.suffix.lower() not in PLOT_SUFFIXES:
        raise InputError("plot", str(plot), f"give a {'/'.join(PLOT_SUFFIXES)} file name")
    check_positive("gpus", gpus, MAX_SERVING_SEARCH_GPUS)
    check_request_lengths(input_len, output_len)
    check_positive("top", top, MAX_SEARCH_TOP)
    for name, value in (("ttft_ms", ttft_ms), ("tpot_ms", tpot_ms)):
        if value is not None:
            check_positive(name, value)
            check_at_most(f"{name}/1000", value / 1e3, MAX_TIME_S)
    if min_tokens_per_s_per_user is not None:
        check_positive("min_tokens_per_s_per_user", min_tokens_per_s_per_user, MAX_TOKEN_RATE)
    targets = Targets(ttft_s=ttft_ms / 1e3 if ttft_ms is not None else None,
                      tpot_s=tpot_ms / 1e3 if tpot_ms is not None else None,
                      min_tokens_per_s_per_user=min_tokens_per_s_per_user)
    cal = load_calibration(calibration)
    backend = make_backend(kernel_backend.value, kernel_table)
    spec_model = load_model(model)
    spec_system = load_system(system, num_gpus=gpus)
    result = search_deployments(spec_model, spec_system, gpus, input_len, output_len,
                                targets=targets, engine=ENGINE_PROFILES[engine.value],
                                disaggregated=disaggregated, top=top, calibration=cal,
                                kernel_backend=backend)
    if plot is not None:
        from perfcast.report.infer_search_plot import plot_fronts

        plot_fronts(result, plot)
    if json:
        from perfcast.report.json_out import to_json

        print(to_json(result.to_dict()))
        return
    from perfcast.report.console import make_console
    from perfcast.report.infer_search_text import render_infer_search

    console = make_console()
    render_infer_search(result, console, model_arg=model, system_arg=system,
                        calibration_arg=str(calibration) if calibration is not None else None,
                        kernel_args=(None if kernel_backend == SERVING_KERNEL_BACKEND_OPT
                                     else kernel_backend.value,
                                     str(kernel_table) if kernel_table is not None else None))
    if plot is not None:
        console.print(f"plot written to {plot}")
