"""Terminal and CSV renderers of a ``SearchResult``."""

from __future__ import annotations

import csv
import io
import shlex

from perfcast.search.result import SearchCandidate, SearchResult
from perfcast.units import GiB

CSV_STRATEGY_FIELDS = ("tp", "pp", "vpp", "cp", "ep", "etp", "dp", "micro_batch_size",
                       "sequence_parallel", "zero_stage", "fsdp", "distributed_optimizer",
                       "recompute", "recompute_num_layers", "precision", "fp8_recipe",
                       "tp_comm_overlap", "cp_comm_type", "hierarchical_cp_a2a_size", "tp2d_rows",
                       "pipeline_schedule",
                       "cuda_graphs", "cpu_offload_activation_layers", "recompute_modules",
                       "fp8_gemm_scope")
CSV_METRICS = ("tokens_per_s_per_gpu", "step_time_s", "memory_bytes", "memory_headroom_bytes",
               "mfu", "time_to_train_s", "cost_usd")


def _sharding(strategy) -> str:
    if strategy.fsdp:
        return "fsdp"
    if strategy.distributed_optimizer:
        return "dist-opt"
    return f"zero{strategy.zero_stage}" if strategy.zero_stage else "-"


def _recompute(strategy) -> str:
    if strategy.recompute == "full" and strategy.recompute_num_layers:
        return f"full:{strategy.recompute_num_layers}"
    if strategy.recompute == "selective" and strategy.recompute_modules != ("core_attn",):
        return f"sel:{','.join(strategy.recompute_modules)}"  # Megatron's default: core_attn
    return strategy.recompute


def _precision(strategy) -> str:
    if strategy.precision != "fp8":
        return strategy.precision
    scope = f":{strategy.fp8_gemm_scope}" if strategy.fp8_gemm_scope != "all" else ""
    return f"fp8:{strategy.fp8_recipe}{scope}"


def _csv_value(value):
    """A strategy field as one CSV cell (a module list comma-joined)."""
    return ",".join(value) if isinstance(value, list | tuple) else value


def render_search(result: SearchResult, console, timings: bool = False) -> None:
    """Counts, then a table of the best strategies and one of the Pareto front (``timings``
    adds the wall seconds of the bulk evaluation)."""
    from rich.table import Table

    took = f" in {result.evaluate_s:.2f} s" if timings else ""
    offload = (f", {result.offload_layer_variants:,} only in the offloaded layer count"
               if result.offload_layer_variants else "")
    offload += (f", {result.recompute_module_variants:,} only in the recompute module set"
                if result.recompute_module_variants else "")
    offload += (f", {result.fp8_scope_variants:,} only in the FP8 GEMM scope"
                if result.fp8_scope_variants else "")
    shown = result.best + result.pareto
    optional = [col for col in OPTIONAL_COLUMNS if any(_varies(col, c) for c in shown)]
    console.print(
        f"[bold]{result.model}[/] on {result.num_gpus} x {result.gpu} ({result.system}), "
        f"seq {result.seq_length}, global batch {result.global_batch_size}, rules of "
        f"{result.framework}: {result.evaluated:,} evaluated{took} "
        f"({result.distinct:,} distinct; {result.recompute_layer_variants:,} differ from "
        f"another only in the recompute layer count{offload}), "
        f"{result.feasible:,} fit in memory, {result.infeasible:,} do not, "
        f"{result.invalid:,} invalid layouts pruned")
    for title, rows in ((f"best by {result.objective}", result.best),
                        ("Pareto front: tokens/s/GPU vs memory headroom", result.pareto)):
        table = Table(title=title)
        for col in ("#", "tp", "pp", "vpp", "cp", "ep", "dp", "mbs", "schedule", "sp",
                    "recompute", *optional, "shard", "prec", "tok/s/GPU", "MFU", "step s",
                    "mem GiB"):
            table.add_column(col, justify="right")
        for rank, c in enumerate(rows, 1):
            table.add_row(str(rank), *_cells(c, optional))
        console.print(table)
    needs: dict[tuple[str, ...], list[int]] = {}
    for rank, c in enumerate(result.best, start=1):
        if c.framework_flags:
            needs.setdefault(c.framework_flags, []).append(rank)
    if needs:
        parts = [f"#{','.join(map(str, ranks))}: {shlex.join(flags)}"
                 for flags, ranks in needs.items()]
        console.print(f"pipeline split of the best layouts needs: {'; '.join(parts)}",
                      markup=False, highlight=False)


OPTIONAL_COLUMNS = ("graphs", "offload")
"""Columns shown only when a listed strategy uses the option: CUDA-graph scope, offloaded
layers."""


def _optional_cell(col: str, strategy) -> str:
    if col == "graphs":
        return strategy.cuda_graphs
    return str(strategy.cpu_offload_activation_layers) if strategy.cpu_offload_activation_layers \
        else "-"


def _varies(col: str, c: SearchCandidate) -> bool:
    return _optional_cell(col, c.report.strategy) not in ("none", "-")


def _cells(c: SearchCandidate, optional: list[str]) -> list[str]:
    s, r = c.report.strategy, c.report
    cp = f"{s.cp}:{s.cp_comm_type}" if s.cp > 1 and s.cp_comm_type != "p2p" else str(s.cp)
    if s.cp > 1 and s.cp_comm_type == "a2a+p2p":  # --hierarchical-context-parallel-sizes A,P
        cp += f"({s.cp_a2a_size}x{s.cp // s.cp_a2a_size})"
    tp = f"{s.tp}:{s.tp2d_rows}x{s.tp2d_cols}" if s.tp2d_rows > 1 else str(s.tp)
    return [tp, str(s.pp), str(s.vpp), cp, str(s.ep), str(s.dp),
            str(s.micro_batch_size), s.schedule,
            ("y+overlap" if s.tp_comm_overlap else "y") if s.sequence_parallel else "-",
            _recompute(s), *(_optional_cell(col, s) for col in optional),
            _sharding(s), _precision(s),
            f"{r.tokens_per_s_per_gpu:,.0f}", f"{r.mfu:.3f}",
            f"{r.step_time_s:.3f}", f"{r.memory.peak_bytes / GiB:.1f}"]


def search_csv(result: SearchResult) -> str:
    """One CSV row per best strategy: rank, strategy fields, metrics."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(("rank",) + CSV_STRATEGY_FIELDS + CSV_METRICS)
    for rank, c in enumerate(result.best, 1):
        d = c.to_dict()
        writer.writerow((rank,) + tuple(_csv_value(d["strategy"][f]) for f in CSV_STRATEGY_FIELDS)
                        + tuple(d[m] for m in CSV_METRICS))
    return out.getvalue()
