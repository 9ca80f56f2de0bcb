"""Terminal rendering of a ``PipelineTimeline``: a per-stage table and an ASCII Gantt chart."""

from __future__ import annotations

from perfcast.schedule.timeline import EventKind, PipelineTimeline

GANTT_MAX_COLUMNS = 160
"""Gantt charts wider than this (in time steps) are not drawn."""
_LETTER = {EventKind.FORWARD: "F", EventKind.INPUT_GRAD: "B", EventKind.WEIGHT_GRAD: "W"}


def ascii_gantt(timeline: PipelineTimeline, columns: int = GANTT_MAX_COLUMNS) -> list[str] | None:
    """One text row per stage, one character per time slot: F/B/W or '.' for a bubble.
    None when the step needs more than ``columns`` slots of the shortest pass."""
    passes = [e for st in timeline.stages for e in st.events if e.kind != EventKind.BUBBLE]
    durations = [e.duration_s for e in passes if e.duration_s > 0]
    if not durations:
        return None
    slot = min(durations)
    width = round(timeline.step_time_s / slot)
    if width > columns:
        return None
    rows = []
    for stage in timeline.stages:
        row = ["."] * width
        for e in stage.events:
            if e.kind == EventKind.BUBBLE:
                continue
            for i in range(round(e.start_s / slot), min(round(e.end_s / slot), width)):
                row[i] = _LETTER[e.kind]
        rows.append(f"stage {stage.stage:>2} |" + "".join(row) + "|")
    return rows


def render_schedule(timeline: PipelineTimeline, console) -> None:
    """Headline, per-stage busy/idle/peak table, and the Gantt chart for small cases."""
    from rich.table import Table

    console.print(
        f"[bold]{timeline.schedule}[/bold]: {timeline.num_stages} stages, "
        f"{timeline.num_micro_batches} micro-batches, {timeline.num_chunks} chunk(s) per stage")
    console.print(
        f"step time {timeline.step_time_s:,.4g}   ideal {timeline.ideal_time_s:,.4g}   bubble "
        f"{timeline.bubble_fraction:.1%} of the step ({timeline.bubble_over_ideal:.1%} of ideal)")
    table = Table(title_justify="left")
    for column in ("stage", "busy", "idle", "peak in-flight micro-batches"):
        table.add_column(column, justify="right")
    for stage in timeline.stages:
        table.add_row(str(stage.stage), f"{stage.busy_s:,.4g}", f"{stage.idle_s:,.4g}",
                      f"{stage.peak_in_flight:g}")
    console.print(table)
    rows = ascii_gantt(timeline)
    if rows is not None:
        console.print("\n".join(rows), markup=False, highlight=False)
