"""Terminal rendering of a ``KernelReport``."""

from __future__ import annotations

from perfcast.report.kernel_report import KernelReport


def render_kernel(report: KernelReport, console) -> None:
    """One table: shape, time, TFLOP/s, % of peak, bound and tile."""
    from rich.table import Table

    table = Table(title=f"{report.kernel} on {report.gpu} ({report.backend} backend)")
    table.add_column("quantity")
    table.add_column("value", justify="right")
    shape = ", ".join(f"{k}={v}" for k, v in report.shape.items())
    rows = [("shape", shape), ("precision", report.precision),
            ("time", f"{report.time_s * 1e6:,.1f} µs"), ("TFLOP/s", f"{report.tflops:,.1f}"),
            ("% of peak", f"{report.pct_of_peak:.1f}%"), ("bound", report.bound)]
    if report.tile is not None:
        rows += [("tile", report.tile), ("waves", f"{report.waves:g}")]
    if report.table_fallback is not None:
        rows.append(("kernel table", "not covered: analytical model" if report.table_fallback
                     else "measured point / interpolated"))
    if report.calibration_default:
        rows.append(("calibration", "no kernel measurements on this GPU's generation: "
                     "efficiencies fitted on other GPUs (possibly another vendor's) stand in"))
    for name, value in rows:
        table.add_row(name, str(value))
    console.print(table)
