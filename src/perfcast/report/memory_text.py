"""Terminal rendering of a ``MemoryReport`` (rich table, one row per pipeline stage)."""

from __future__ import annotations

from perfcast.memory.report import MemoryReport
from perfcast.units import GiB


def _gib(value: float) -> str:
    return f"{value / GiB:,.2f}"


def render_memory(report: MemoryReport, console) -> None:
    """Print the per-stage memory table and the fit verdict."""
    from rich.table import Table

    title = (
        f"Memory per GPU — {report.model} on {report.system} ({report.gpu}), "
        f"{report.num_micro_batches} micro-batches/step"
    )
    table = Table(title=title, title_justify="left")
    for column in ("stage", "layers", "params/GPU", "weights", "grads", "optimizer",
                   "activations", "other", "total (GiB)"):
        table.add_column(column, justify="right")
    for st in report.stages:
        table.add_row(
            str(st.stage), str(st.num_layers), f"{st.params / 1e9:,.3f} B",
            _gib(st.weights_bytes), _gib(st.grads_bytes), _gib(st.optimizer_bytes),
            _gib(st.activations_bytes), _gib(st.other_bytes), _gib(st.total_bytes),
        )
    console.print(table)
    console.print(
        f"params: {report.params_total / 1e9:,.2f} B total, {report.params_active / 1e9:,.2f} B "
        f"active   capacity: {_gib(report.capacity_bytes)} GiB   peak: "
        f"{_gib(report.peak_bytes)} GiB (stage {report.peak_stage})"
    )
    verdict = "[green]fits[/green]" if report.fits else "[red]does not fit[/red]"
    console.print(f"verdict: {verdict}")


def render_fit_advice(advice, console) -> None:
    """One line: the cheapest change that fits (``search.fit_advice.FitAdvice``), or none."""
    if advice is None:
        console.print("fit: no single change or pair of changes tried makes it fit")
        return
    console.print(f"{advice.text}   (peak {_gib(advice.peak_bytes)} GiB, "
                  f"step {advice.step_time_s:,.2f} s)")

