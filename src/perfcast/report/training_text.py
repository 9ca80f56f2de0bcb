"""Terminal rendering of a ``TrainingReport``: headline metrics, time breakdown, memory."""

from __future__ import annotations

from perfcast.estimate.training_report import TrainingReport
from perfcast.report.memory_text import render_memory

_LABELS = {
    "compute_gemm": "compute: GEMMs",
    "compute_attention": "compute: attention",
    "compute_memory_bound": "compute: memory-bound ops",
    "recompute": "recompute",
    "tp_comm": "exposed comm: tensor parallel",
    "cp_comm": "exposed comm: context parallel",
    "ep_comm": "exposed comm: expert parallel",
    "host": "host: launches and syncs",
    "pp_comm": "exposed comm: pipeline send/recv",
    "dp_comm": "exposed comm: data parallel / FSDP",
    "pipeline_bubble": "pipeline bubble",
    "optimizer": "optimizer step",
    "other": "other (calibrated overhead)",
    "offload": "exposed activation offload copies",
}


def tp2d_label(strategy) -> str:
    """`` (2D 2×4, ...)`` after the TP size for a 2D TP grid, saying no framework runs it."""
    rows = getattr(strategy, "tp2d_rows", 1)
    if rows == 1:
        return ""
    return f" (2D {rows}×{strategy.tp // rows}, which no listed framework runs)"


def cp_comm_label(strategy) -> str:
    """`` (a2a)`` after the CP size when context parallelism runs a non-default exchange."""
    if strategy.cp <= 1 or strategy.cp_comm_type == "p2p":
        return ""
    if strategy.cp_comm_type == "a2a+p2p":
        a2a = strategy.cp_a2a_size
        return f" (a2a {a2a} × p2p {strategy.cp // a2a})"
    return f" ({strategy.cp_comm_type})"


def render_training(report: TrainingReport, console) -> None:
    """Print the headline, the breakdown table (sums to the step) and the memory table."""
    from rich.table import Table

    st = report.strategy
    console.print(
        f"[bold]{report.model}[/bold] on {report.num_gpus} × {report.gpu} ({report.system}): "
        f"TP {st.tp}{tp2d_label(st)} · PP {st.pp} (v {st.vpp}, {st.schedule}) · "
        f"CP {st.cp}{cp_comm_label(st)} · DP {st.dp} · EP {st.ep}; micro-batch {st.micro_batch_size}, "
        f"global batch {report.global_batch_size} × {report.seq_length} tokens, "
        f"{report.num_micro_batches} micro-batches; {st.precision}; recompute "
        f"{st.recompute}"
    )
    headline = Table(show_header=False, box=None)
    headline.add_row("step time", f"{report.step_time_s:,.3f} s")
    tps = report.tokens_per_s_per_gpu
    band = report.interval
    headline.add_row("tokens/s/GPU", f"{tps:,.0f}" + (
        f"  ±{band.half_width(tps):.0%} (80%): {band.low:,.0f}-{band.high:,.0f}"
        if band else ""))
    if band is not None:
        headline.add_row("band basis", band.basis)
    headline.add_row("model TFLOP/s/GPU", f"{report.tflops_per_gpu:,.1f}")
    headline.add_row("MFU / HFU", f"{report.mfu:.1%} / {report.hfu:.1%}  (of dense BF16 peak)")
    headline.add_row("pipeline bubble", f"{report.bubble_fraction:.1%} of ideal")
    note = report.calibration.note() if report.calibration else None
    if note:
        headline.add_row("calibration", note)
    console.print(headline)
    table = Table(title="Where the step time goes (critical stage "
                  f"{report.critical_stage})", title_justify="left")
    table.add_column("part")
    table.add_column("seconds", justify="right")
    table.add_column("share", justify="right")
    for key, value in report.breakdown.to_dict().items():
        if value <= 0:
            continue
        table.add_row(_LABELS.get(key, key), f"{value:,.4f}", f"{value / report.step_time_s:.1%}")
    table.add_row("[bold]step[/bold]", f"[bold]{report.step_time_s:,.4f}[/bold]", "100.0%")
    console.print(table)
    if report.kernel_table_fallback_ops:
        ops = report.kernel_table_fallback_ops
        console.print(f"kernel table: {len(ops)} op(s) not covered, timed analytically: "
                      + ", ".join(ops))
    render_memory(report.memory, console)
