"""One self-contained HTML report of a training step: tables and inline SVG plots, no network.

Nothing is linked: no scripts, style sheets, fonts or images from elsewhere; every figure is
inline SVG (``report.plots.figure_svg``).
"""

from __future__ import annotations

import html

from perfcast.estimate.training_report import TrainingReport, strategy_dict
from perfcast.schedule.timeline import PipelineTimeline
from perfcast.units import GiB

_STYLE = """body{font-family:sans-serif;margin:2em;max-width:1100px}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:3px 8px}
td.num{text-align:right}h2{margin-top:1.5em}svg{max-width:100%;height:auto}"""


def _table(header: list[str], rows: list[list]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join(
        "<tr>" + "".join(f'<td class="num">{v:,.4g}</td>' if isinstance(v, float)
                         else f"<td>{html.escape(str(v))}</td>" for v in row) + "</tr>"
        for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def training_html(report: TrainingReport, timeline: PipelineTimeline, svgs: dict[str, str]) -> str:
    """The HTML text: headline, strategy, time breakdown, pipeline, memory, then the plots."""
    headline = [["step time (s)", report.step_time_s],
                ["tokens/s/GPU", report.tokens_per_s_per_gpu],
                ["model TFLOP/s/GPU", report.tflops_per_gpu],
                ["MFU", report.mfu], ["HFU", report.hfu],
                ["fits in memory", "yes" if report.memory.fits else "no"]]
    strategy = [[k, v] for k, v in strategy_dict(report.strategy).items()]
    breakdown = [[k, v, v / report.step_time_s] for k, v in report.breakdown.to_dict().items()]
    pipeline = [[st.stage, st.busy_s, st.idle_s, st.peak_in_flight] for st in timeline.stages]
    memory = [[st.stage, st.num_layers, st.weights_bytes / GiB, st.grads_bytes / GiB,
               st.optimizer_bytes / GiB, st.activations_bytes / GiB, st.other_bytes / GiB,
               st.total_bytes / GiB] for st in report.memory.stages]
    figures = "".join(f"<h3>{html.escape(name.replace('_', ' '))}</h3>{svg}"
                      for name, svg in svgs.items())
    title = f"perfcast: {report.model} on {report.num_gpus} × {report.gpu}"
    return (
        f"<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title>"
        f"<style>{_STYLE}</style></head><body><h1>{html.escape(title)}</h1>"
        + _table(["metric", "value"], headline)
        + "<h2>Strategy</h2>" + _table(["field", "value"], strategy)
        + "<h2>Where the step time goes</h2>" + _table(["part", "seconds", "share"], breakdown)
        + f"<h2>Pipeline ({html.escape(timeline.schedule)}, {timeline.num_micro_batches} "
          f"micro-batches)</h2><p>bubble {timeline.bubble_fraction:.1%} of the pipeline phase "
          f"({timeline.bubble_over_ideal:.1%} of ideal)</p>"
        + _table(["stage", "busy (s)", "idle (s)", "peak micro-batches in flight"], pipeline)
        + "<h2>Memory per GPU (GiB)</h2>"
        + _table(["stage", "layers", "weights", "grads", "optimizer", "activations", "other",
                  "total"], memory)
        + f"<h2>Plots</h2>{figures}</body></html>")
