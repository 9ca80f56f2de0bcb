"""``perfcast sweep --serving``: the best serving deployment over systems × GPU counts ×
latency targets (``serving_search.sweep``) on the sweep engines (local or Dask, durable rows)."""

from __future__ import annotations

from pathlib import Path

from perfcast.cli.infer_search_cmd import ENGINE_PROFILES
from perfcast.errors import InputError


def _targets_ms(text: str | None, name: str) -> list[float | None]:
    """``"50,30"`` -> [0.05, 0.03] seconds; None -> [None] (no target)."""
    from perfcast.specs.limits import MAX_TIME_S, check_at_most, check_positive

    if text is None:
        return [None]
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise InputError(name, text, "expected comma-separated milliseconds, e.g. 50,30") from None
    if not values:
        raise InputError(name, text, "expected at least one value in milliseconds")
    for v in values:
        check_positive(name, v)
        check_at_most(f"{name}/1000", v / 1e3, MAX_TIME_S)
    return [v / 1e3 for v in dict.fromkeys(values)]


def run_serving_sweep(*, model: str, systems: list[str], gpu_counts: list[int], input_len: int,
                      output_len: int, ttft_ms: str | None, tpot_ms: str | None,
                      min_tokens_per_s_per_user: float | None, serving_engine: str,
                      disaggregated: bool, out: Path | None, plot: Path | None, engine: str,
                      scheduler: str | None, workers: int | None, json: bool,
                      calibration: Path | None, kernel_backend: str,
                      kernel_table: str | None) -> None:
    from perfcast.search.sweep import run_sweep
    from perfcast.serving_search.sweep import (
        run_serving_task,
        serving_row_columns,
        serving_sweep_tasks,
    )
    from perfcast.specs.limits import (
        MAX_SERVING_SEARCH_GPUS,
        MAX_TOKEN_RATE,
        check_at_most,
        check_positive,
        check_request_lengths,
    )

    if plot is not None:
        raise InputError("plot", str(plot), "sweep plots are drawn for training sweeps; "
                         "use infer-search --plot for a serving Pareto front")
    if serving_engine not in ENGINE_PROFILES:
        raise InputError("serving_engine", serving_engine, f"choose from {sorted(ENGINE_PROFILES)}")
    for gpus in gpu_counts:
        check_at_most("gpus", gpus, MAX_SERVING_SEARCH_GPUS)
    check_request_lengths(input_len, output_len)
    if min_tokens_per_s_per_user is not None:
        check_positive("min_tokens_per_s_per_user", min_tokens_per_s_per_user, MAX_TOKEN_RATE)
    if calibration is not None:
        from perfcast.calibration.bundle import load_calibration

        load_calibration(calibration)  # fail early, once, on a bad directory
    tasks = serving_sweep_tasks(model, systems, gpu_counts, input_len, output_len,
                                _targets_ms(ttft_ms, "ttft_ms"), _targets_ms(tpot_ms, "tpot_ms"),
                                min_tokens_per_s_per_user, ENGINE_PROFILES[serving_engine],
                                disaggregated, str(calibration.resolve()) if calibration else "",
                                kernel_backend, kernel_table)
    rows = run_sweep(tasks, out, engine, scheduler, workers, run=run_serving_task,
                     columns=serving_row_columns())
    if json:
        from perfcast.report.json_out import to_json

        print(to_json({"rows": rows, "out": str(out) if out else None, "plots": []}))
        return
    from perfcast.report.console import make_console
    from perfcast.report.serving_sweep_text import render_serving_sweep

    render_serving_sweep(rows, make_console(), out)
