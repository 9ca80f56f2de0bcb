"""Terminal rendering of a ``ValidationReport``: per-row table, summary per source, skips."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from perfcast.validate.compare import ValidationReport
from perfcast.validate.error_stats import ErrorStats

if TYPE_CHECKING:
    from perfcast.validate.inference_compare import InferenceValidationReport

SKIP_REASON_WIDTH = 110


def _pct(value: float, signed: bool = False) -> str:
    if value != value:  # NaN
        return "-"
    return f"{value * 100:+.1f}%" if signed else f"{value * 100:.1f}%"


def _rate(value: float) -> str:
    return f"{value:,.1f}" if value < 100 else f"{value:,.0f}"


def _error_style(error: float) -> str:
    size = abs(error)
    return "green" if size <= 0.10 else ("yellow" if size <= 0.20 else "red")


def render_rows(report: ValidationReport, console) -> None:
    """One line per forecast row: forecast, measured and relative error of tokens/s/GPU."""
    from rich.table import Table

    table = Table(title="Training throughput: forecast vs measured (tokens/s/GPU)",
                  title_justify="left")
    for column in ("row", "source", "q", "model", "gpu"):
        table.add_column(column)
    for column in ("forecast", "measured", "error"):
        table.add_column(column, justify="right")
    table.add_column("measured from")
    for row in report.rows:
        style = _error_style(row.error)
        table.add_row(
            row.row_id, row.source_id, row.quality, row.model, row.gpu,
            _rate(row.predicted), _rate(row.measured),
            f"[{style}]{_pct(row.error, signed=True)}[/{style}]", row.measured_from,
        )
    console.print(table)


def _stats_row(name: str, stats: ErrorStats) -> tuple[str, ...]:
    worst = ", ".join(f"{rid} ({_pct(err, signed=True)})" for rid, err in stats.worst)
    return (name, str(stats.count), _pct(stats.mape), _pct(stats.median_abs_error),
            _pct(stats.within_10pct), _pct(stats.within_20pct), worst or "-")


def render_summary(report: ValidationReport | InferenceValidationReport, console) -> None:
    """Error statistics per source and overall."""
    from rich.table import Table

    table = Table(title="Error by source", title_justify="left")
    table.add_column("source")
    for column in ("rows", "MAPE", "median |err|", "<=10%", "<=20%"):
        table.add_column(column, justify="right")
    table.add_column("worst rows")
    for source, stats in report.summary.by_source:
        table.add_row(*_stats_row(source, stats))
    table.add_section()
    for scale, stats in report.summary.by_scale:
        table.add_row(*_stats_row(scale, stats))
    table.add_row(*_stats_row("overall", report.summary.overall), style="bold")
    console.print(table)


def render_skipped(report: ValidationReport | InferenceValidationReport, console) -> None:
    """Skipped rows with their reasons, then the reasons by count."""
    from rich.table import Table

    if not report.skipped:
        console.print("skipped: none")
        return
    table = Table(title=f"Skipped rows ({len(report.skipped)})", title_justify="left")
    table.add_column("row")
    table.add_column("source")
    table.add_column("reason", max_width=SKIP_REASON_WIDTH)
    for skipped in report.skipped:
        table.add_row(skipped.row_id, skipped.source_id, skipped.reason)
    console.print(table)
    counts = Counter(s.source_id or "?" for s in report.skipped)
    console.print("skipped by source: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))


def render_validation(report: ValidationReport, console) -> None:
    """Per-row table, summary per source and overall, skipped rows."""
    if report.rows:
        render_rows(report, console)
        render_summary(report, console)
    else:
        console.print("no row could be forecast")
    render_skipped(report, console)
