"""Terminal rendering of a ``ServingReport``: fits / does not fit first, then latencies."""

from __future__ import annotations

from perfcast.estimate.serving_report import ServingReport
from perfcast.units import GiB


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.2f} ms"


def fit_line(fits: bool, detail: str) -> str:
    """The first line of every serving forecast."""
    return f"[bold green]fits[/bold green]: {detail}" if fits else \
        f"[bold red]does NOT fit[/bold red]: {detail}"


def render_serving(report: ServingReport, console) -> None:
    """Fit verdict, workload, latency statistics, throughput and the memory split."""
    from rich.table import Table

    mem, w, st = report.memory, report.workload, report.strategy
    detail = (f"weights {mem.weights_bytes / GiB:,.1f} GiB per GPU, KV pool "
              f"{max(mem.kv_pool_bytes, 0) / GiB:,.1f} GiB = {mem.kv_pool_tokens:,} tokens, "
              f"{report.max_concurrent_seqs:,} sequences of {w.context_tokens:,} tokens")
    console.print(fit_line(report.fits, detail))
    load = {"concurrency": f"concurrency {w.concurrency}",
            "request_rate": f"{w.request_rate_per_s} requests/s (Poisson)",
            "offline": "offline (all requests queued)"}[w.mode]
    console.print(
        f"[bold]{report.model}[/bold] on {report.num_gpus} × {report.gpu}: TP {st.tp} · PP {st.pp}"
        f" · {report.replicas} replica(s); {report.engine} {report.engine_version or '(latest)'};"
        f" {load}, {w.num_requests} requests, {w.input_len} in / {w.output_len} out")
    if not report.fits:
        return
    table = Table(title="Latency per request", title_justify="left")
    for column in ("", "mean", "median", "p90", "p99"):
        table.add_column(column, justify="right")
    for label, s in (("TTFT", report.ttft), ("TPOT", report.tpot), ("ITL", report.itl),
                     ("end-to-end", report.e2e_latency)):
        table.add_row(label, _ms(s.mean_s), _ms(s.median_s), _ms(s.p90_s), _ms(s.p99_s))
    console.print(table)
    head = Table(show_header=False, box=None)
    head.add_row("output tokens/s", f"{report.output_tokens_per_s:,.0f} total, "
                 f"{report.output_tokens_per_s / report.num_gpus:,.0f} per GPU")
    head.add_row("requests/s", f"{report.requests_per_s:,.2f}")
    head.add_row("simulated", f"{report.num_steps:,} engine steps over {report.duration_s:,.1f} s")
    console.print(head)
