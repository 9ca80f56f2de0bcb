"""Terminal rendering of an ``InferenceValidationReport``: rows, error per source and metric."""

from __future__ import annotations

from perfcast.report.validation_text import _error_style, _pct, _stats_row, render_skipped, render_summary
from perfcast.validate.inference_compare import InferenceValidationReport


def render_inference_validation(report: InferenceValidationReport, console) -> None:
    """Per-row table (metric in its unit), summary per source and per metric, skipped rows."""
    from rich.table import Table

    if not report.rows:
        console.print("no row could be forecast")
        render_skipped(report, console)
        return
    table = Table(title="Inference: forecast vs measured (each row in its own unit)",
                  title_justify="left")
    for column in ("row", "source", "model", "gpu", "metric", "batch"):
        table.add_column(column)
    for column in ("forecast", "measured", "error"):
        table.add_column(column, justify="right")
    table.add_column("unit")
    for row in report.rows:
        style = _error_style(row.error)
        table.add_row(row.row_id, row.source_id[:32], row.model, row.gpu, row.metric,
                      str(row.batch_size), f"{row.predicted:,.4g}", f"{row.measured:,.4g}",
                      f"[{style}]{_pct(row.error, signed=True)}[/{style}]", row.unit[:16])
    console.print(table)
    render_summary(report, console)
    metrics = Table(title="Error by metric", title_justify="left")
    metrics.add_column("metric")
    for column in ("rows", "MAPE", "median |err|", "<=10%", "<=20%"):
        metrics.add_column(column, justify="right")
    metrics.add_column("worst rows")
    for metric, stats in report.by_metric:
        metrics.add_row(*_stats_row(metric, stats))
    console.print(metrics)
    render_skipped(report, console)
