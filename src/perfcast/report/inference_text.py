"""Terminal rendering of an ``InferenceReport`` (and of a throughput-vs-latency curve)."""

from __future__ import annotations

from perfcast.estimate.inference_report import InferenceCurve, InferenceReport
from perfcast.units import GiB

_LABELS = {
    "gemm": "GEMMs (weights streamed)",
    "attention": "attention (KV cache)",
    "memory_bound": "memory-bound ops",
    "tp_comm": "tensor-parallel all-reduce",
    "ep_comm": "expert-parallel all-to-all",
    "pp_comm": "pipeline send/recv",
    "offload": "offload I/O (not hidden)",
    "overhead": "host/framework overhead (calibrated)",
}


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.2f} ms"


def render_inference(report: InferenceReport, console) -> None:
    """Headline (TTFT, TPOT, throughput, max batch), phase breakdowns and memory."""
    from rich.table import Table

    st, w, p = report.strategy, report.workload, report.precision
    console.print(
        f"[bold]{report.model}[/bold] on {report.num_gpus} × {report.gpu} ({report.system}): "
        f"TP {st.tp} · PP {st.pp} · EP {st.ep} · {report.replicas} replica(s)"
        f"{' · attention-DP' if report.attention_dp else ''}; {w.batching} batching, batch "
        f"{w.batch_size}, {w.input_len} in / {w.output_len} out; weights {p.weights}, "
        f"activations {p.activations}, KV {p.kv_cache}")
    head = Table(show_header=False, box=None)
    head.add_row("TTFT", _ms(report.ttft_s))
    head.add_row("TPOT", f"{_ms(report.tpot_s)}  ({report.tokens_per_s_per_user:,.1f} tokens/s/user)")
    head.add_row("end-to-end latency", _ms(report.e2e_latency_s))
    head.add_row("output tokens/s", f"{report.output_tokens_per_s:,.0f} total, "
                 f"{report.output_tokens_per_s_per_gpu:,.0f} per GPU")
    if report.interval is not None:
        band = report.interval
        head.add_row("80% band", f"±{band.half_width(report.output_tokens_per_s_per_gpu):.0%} "
                     f"(80%): {band.low:,.0f}-{band.high:,.0f} tokens/s/GPU; {band.basis}")
    head.add_row("max batch that fits", f"{report.max_batch_size:,}")
    if report.speculation:
        s = report.speculation
        head.add_row("speculation", f"draft {s.draft_model}, k {s.num_draft_tokens}, "
                     f"α {s.acceptance_rate}: {s.tokens_per_target_step:.2f} tokens/target step")
    note = report.calibration.note() if report.calibration else None
    if note:
        head.add_row("calibration", note)
    console.print(head)
    table = Table(title="Where the time goes", title_justify="left")
    table.add_column("part")
    table.add_column("prefill" if w.batching == "static" else "mixed step", justify="right")
    table.add_column("decode step", justify="right")
    prefill, decode = report.prefill.to_dict(), report.decode.to_dict()
    for key, label in _LABELS.items():
        if prefill[key] > 0 or decode[key] > 0:
            table.add_row(label, _ms(prefill[key]), _ms(decode[key]))
    table.add_row("[bold]total[/bold]", _ms(sum(prefill.values())), _ms(sum(decode.values())))
    console.print(table)
    mem = report.memory
    memory = Table(title="Memory per GPU", title_justify="left")
    memory.add_column("part")
    memory.add_column("GiB", justify="right")
    for label, value in (("weights", mem.weights_bytes), ("KV cache", mem.kv_cache_bytes),
                         ("activation workspace", mem.workspace_bytes),
                         ("runtime", mem.runtime_bytes)):
        memory.add_row(label, f"{value / GiB:,.2f}")
    style = "green" if mem.fits else "red"
    memory.add_row(f"[bold]total[/bold] (capacity {mem.capacity_bytes / GiB:,.1f})",
                   f"[{style}]{mem.total_bytes / GiB:,.2f}[/{style}]")
    console.print(memory)


def render_curve(curve: InferenceCurve, console) -> None:
    """One row per batch size: TTFT, TPOT, tokens/s/user and tokens/s/GPU."""
    from rich.table import Table

    table = Table(title=f"Throughput vs latency: {curve.base.model} on {curve.base.gpu}",
                  title_justify="left")
    for column in ("batch", "TTFT", "TPOT", "tokens/s/user", "tokens/s/GPU", "fits"):
        table.add_column(column, justify="right")
    for p in curve.points:
        table.add_row(str(p.batch_size), _ms(p.ttft_s), _ms(p.tpot_s),
                      f"{p.tokens_per_s_per_user:,.1f}", f"{p.output_tokens_per_s_per_gpu:,.0f}",
                      "yes" if p.fits else "[red]no[/red]")
    console.print(table)
