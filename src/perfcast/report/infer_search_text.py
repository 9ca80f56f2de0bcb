"""Terminal renderer of an ``infer-search`` result: the verdict first, then the ranked table,
the best of each mode, the Pareto front, and the ``perfcast infer`` line that reproduces the
best aggregated deployment."""

from __future__ import annotations

import shlex

from perfcast.serving_search.exact import DeploymentResult
from perfcast.serving_search.run import InferSearchResult

COLUMNS = ("#", "deployment", "GPUs", "conc", "TTFT ms", "TPOT ms", "tok/s/GPU", "tok/s/user")


def _targets(result: InferSearchResult) -> str:
    t = result.targets
    parts = ([f"TTFT ≤ {t.ttft_s * 1e3:g} ms"] if t.ttft_s is not None else []) + \
        ([f"TPOT ≤ {t.tpot_s * 1e3:g} ms"] if t.tpot_s is not None else []) + \
        ([f"≥ {t.min_tokens_per_s_per_user:g} tok/s/user"]
         if t.min_tokens_per_s_per_user is not None else [])
    return ", ".join(parts) if parts else "no latency targets"


def verdict(result: InferSearchResult) -> str:
    """One line: the best deployment and its numbers, or that none meets the targets."""
    if not result.best:
        return (f"no deployment meets {_targets(result)} ({result.rescored.__len__()} re-scored "
                f"of {result.evaluated:,} screened)")
    b = result.best[0]
    return (f"best: {b.deployment.label()}: {b.output_tokens_per_s_per_gpu:,.0f} output tok/s/GPU, "
            f"TTFT {b.ttft_s * 1e3:,.0f} ms, TPOT {b.tpot_s * 1e3:.1f} ms ({_targets(result)})")


def _row(rank: str, r: DeploymentResult) -> list[str]:
    d = r.deployment
    return [rank, d.label(), str(d.num_gpus), str(d.concurrency), f"{r.ttft_s * 1e3:,.0f}",
            f"{r.tpot_s * 1e3:.1f}", f"{r.output_tokens_per_s_per_gpu:,.0f}",
            f"{r.output_tokens_per_s_per_user:,.1f}"]


def render_infer_search(result: InferSearchResult, console, model_arg: str,
                        system_arg: str, calibration_arg: str | None = None,
                        kernel_args: tuple[str | None, str | None] = (None, None)) -> None:
    """The search as tables and the ``perfcast infer`` line of the best aggregated deployment
    (``calibration_arg``, ``kernel_args`` = (``--kernel-backend``, ``--kernel-table``): the
    arguments the search ran with, None where it took the default)."""
    from rich.table import Table

    console.print(verdict(result), highlight=False, soft_wrap=True)
    console.print(
        f"[bold]{result.model}[/] on {result.num_gpus} x {result.gpu} ({result.system}), "
        f"{result.input_len} in / {result.output_len} out, {result.engine}: "
        f"{result.evaluated:,} deployments screened, {result.feasible:,} meet the targets on "
        f"the screen, {len(result.rescored)} re-scored by the request simulation")
    modes = ("aggregated", "disaggregated") if result.disaggregated else ("aggregated",)
    best_mode = [(m, b) for m in modes if (b := result.best_of(m)) is not None]
    for title, rows in (("best deployments (re-scored)", [(str(i), r) for i, r in
                                                           enumerate(result.best, 1)]),
                        ("best of each mode", best_mode),
                        ("Pareto front: tokens/s/GPU vs tokens/s/user", [
                            (str(i), r) for i, r in enumerate(result.pareto, 1)])):
        if not rows:
            continue
        table = Table(title=title)
        for col in COLUMNS:
            table.add_column(col, justify="left" if col == "deployment" else "right")
        for rank, r in rows:
            table.add_row(*_row(rank, r))
        console.print(table)
    agg = result.best_of("aggregated")
    if agg is not None:
        args = agg.deployment.infer_args(model_arg, system_arg, result.input_len,
                                         result.output_len, result.engine,
                                         calibration=calibration_arg,
                                         kernel_backend=kernel_args[0],
                                         kernel_table=kernel_args[1])
        console.print("reproduce the best aggregated deployment: perfcast "
                      + " ".join(shlex.quote(a) for a in args), highlight=False, soft_wrap=True)
