"""One self-contained HTML report of a training step: tables and inline SVG plots, no network.

Nothing is linked: no scripts, style sheets, fonts or images from elsewhere; every figure is
inline SVG (``report.plots.figure_svg``). The report states every input (model, system, GPUs,
sequence length, global batch, strategy, kernel backend), the assumptions and calibration
caveats of the forecast, the command line and the perfcast version; fractions are shown as
percentages, flags as yes/no, and strategy fields that do not apply (MoE fields of a dense
model, FP8 recipe fields of a BF16 run, unset options) are left out.
"""

from __future__ import annotations

import html
from typing import Any

from perfcast.estimate.training_report import TrainingReport, strategy_dict
from perfcast.schedule.timeline import PipelineTimeline
from perfcast.units import GiB

_STYLE = """body{font-family:sans-serif;margin:2em;max-width:1100px}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:3px 8px}
td.num{text-align:right}h2{margin-top:1.5em}svg{max-width:100%;height:auto}
footer{margin-top:2em;color:#555;font-size:90%}"""
_MOE_FIELDS = ("ep", "etp", "ep_overlap")
_FP8_FIELDS = ("fp8_param",)


class Percent(float):
    """A fraction shown as a percentage."""


def _cell(value: Any) -> str:
    if isinstance(value, Percent):
        return f'<td class="num">{value:.1%}</td>'
    if isinstance(value, bool):
        return f"<td>{'yes' if value else 'no'}</td>"
    if isinstance(value, float):
        return f'<td class="num">{value:,.4g}</td>'
    if isinstance(value, int):
        return f'<td class="num">{value:,}</td>'
    if isinstance(value, tuple | list):
        value = ", ".join(map(str, value)) or "none"
    return f"<td>{html.escape(str(value))}</td>"


def _table(header: list[str], rows: list[list]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(_cell(v) for v in row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def strategy_rows(report: TrainingReport, is_moe: bool) -> list[list]:
    """Strategy fields that apply to this run (module docstring), as (field, value) rows."""
    rows = []
    fp8 = report.strategy.precision == "fp8"
    for key, value in strategy_dict(report.strategy).items():
        if value is None:
            continue
        if not is_moe and (key.startswith("moe_") or key in _MOE_FIELDS):
            continue
        if not fp8 and (key.startswith("fp8_") or key in _FP8_FIELDS):
            continue
        rows.append([key, value])
    return rows


def training_html(report: TrainingReport, timeline: PipelineTimeline, svgs: dict[str, str],
                  is_moe: bool = False, command: str | None = None) -> str:
    """The HTML text: inputs, results, strategy, time breakdown, pipeline, memory,
    assumptions, plots, then the command line and version."""
    from perfcast import __version__

    mem = report.memory
    inputs: list[list[Any]] = [["model", report.model], ["system", report.system], ["GPU", report.gpu],
              ["GPUs", report.num_gpus], ["sequence length (tokens)", report.seq_length],
              ["global batch (sequences)", report.global_batch_size],
              ["micro-batches per step", report.num_micro_batches],
              ["precision", report.strategy.precision], ["kernel backend", report.kernel_backend]]
    results: list[list[Any]] = [["step time (s)", report.step_time_s],
               ["tokens/s/GPU", report.tokens_per_s_per_gpu],
               ["model TFLOP/s/GPU", report.tflops_per_gpu],
               ["MFU (of dense BF16 peak)", Percent(report.mfu)],
               ["HFU (of dense BF16 peak)", Percent(report.hfu)],
               ["peak memory per GPU (GiB)", mem.peak_bytes / GiB],
               ["GPU memory (GiB)", mem.capacity_bytes / GiB],
               ["fits in memory", mem.fits]]
    if report.interval is not None:
        results.insert(2, ["tokens/s/GPU, 80% band", f"{report.interval.low:,.0f} to "
                           f"{report.interval.high:,.0f}"])
    breakdown = [[k, v, Percent(v / report.step_time_s)]
                 for k, v in report.breakdown.to_dict().items() if v > 0]
    pipeline = [[st.stage, st.busy_s, st.idle_s, st.peak_in_flight] for st in timeline.stages]
    memory = [[st.stage, st.num_layers, st.weights_bytes / GiB, st.grads_bytes / GiB,
               st.optimizer_bytes / GiB, st.activations_bytes / GiB, st.other_bytes / GiB,
               st.total_bytes / GiB] for st in mem.stages]
    notes = list(report.assumptions)
    note = report.calibration.note() if report.calibration else None
    if note:
        notes.append(f"calibration: {note}")
    assumptions = "<ul>" + "".join(f"<li>{html.escape(a)}</li>" for a in notes) + "</ul>"
    figures = "".join(f"<h3>{html.escape(name.replace('_', ' '))}</h3>{svg}"
                      for name, svg in svgs.items())
    title = f"perfcast: {report.model} on {report.num_gpus} × {report.gpu} ({report.system})"
    footer = f"perfcast {html.escape(__version__)}"
    if command:
        footer += f"; command: <code>{html.escape(command)}</code>"
    return (
        f"<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title>"
        f"<style>{_STYLE}</style></head><body><h1>{html.escape(title)}</h1>"
        + "<h2>Inputs</h2>" + _table(["input", "value"], inputs)
        + "<h2>Forecast</h2>" + _table(["metric", "value"], results)
        + "<h2>Strategy</h2>" + _table(["field", "value"], strategy_rows(report, is_moe))
        + "<h2>Where the step time goes</h2>" + _table(["part", "seconds", "share"], breakdown)
        + f"<h2>Pipeline ({html.escape(timeline.schedule)}, {timeline.num_micro_batches} "
          f"micro-batches)</h2><p>bubble {timeline.bubble_fraction:.1%} of the pipeline phase "
          f"({timeline.bubble_over_ideal:.1%} of ideal)</p>"
        + _table(["stage", "busy (s)", "idle (s)", "peak micro-batches in flight"], pipeline)
        + "<h2>Memory per GPU (GiB)</h2>"
        + _table(["stage", "layers", "weights", "grads", "optimizer", "activations", "other",
                  "total"], memory)
        + "<h2>Assumptions</h2>" + assumptions
        + f"<h2>Plots</h2>{figures}<footer>{footer}</footer></body></html>")
