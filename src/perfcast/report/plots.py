"""Figures of a training step: Gantt chart, activation memory over time, time breakdown,
memory breakdown per stage, and the roofline of the step's operators.

matplotlib is imported inside the functions with the non-interactive Agg backend, so importing
this module (and ``perfcast --help``) never loads it. Each ``*_figure`` returns a Figure;
``step_figures`` titles every figure with the run (model, GPUs, system, strategy) and
``write_plots`` saves all of them as PNG and SVG.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from perfcast.estimate.training_report import TrainingReport
from perfcast.estimate.training_timeline import OperatorPoint
from perfcast.schedule.timeline import EventKind, PipelineTimeline
from perfcast.units import GiB

COLORS = {EventKind.FORWARD: "#4C72B0", EventKind.INPUT_GRAD: "#DD8452",
          EventKind.WEIGHT_GRAD: "#55A868", EventKind.BUBBLE: "#DDDDDD"}
_LABELS = {EventKind.FORWARD: "F (forward)", EventKind.INPUT_GRAD: "B (input grad)",
           EventKind.WEIGHT_GRAD: "W (weight grad)", EventKind.BUBBLE: "bubble"}


def _pyplot():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _finish(fig, ax, xlabel: str, ylabel: str, title: str):
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=7, ncols=2)
    fig.tight_layout()
    return fig


def gantt_figure(timeline: PipelineTimeline):
    """One row per stage, one bar per pass (bubbles grey)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(10, 1 + 0.45 * timeline.num_stages))
    for st in timeline.stages:
        for kind in EventKind:
            spans = [(e.start_s, e.duration_s) for e in st.events if e.kind == kind]
            if spans:
                ax.broken_barh(spans, (st.stage - 0.4, 0.8), facecolors=COLORS[kind],
                               edgecolor="white", linewidth=0.3)
    ax.set_yticks(range(timeline.num_stages), [f"stage {i}" for i in range(timeline.num_stages)])
    ax.invert_yaxis()
    ax.set_xlabel("time (s)")
    ax.set_title(f"{timeline.schedule}: {timeline.num_micro_batches} micro-batches, bubble "
                 f"{timeline.bubble_fraction:.1%} of the pipeline phase")
    handles = [plt.Rectangle((0, 0), 1, 1, color=COLORS[k]) for k in EventKind]
    ax.legend(handles, [_LABELS[k] for k in EventKind], loc="upper right", fontsize=7, ncols=4)
    fig.tight_layout()
    return fig


def memory_over_time_figure(timeline: PipelineTimeline, bytes_per_unit: Sequence[float] | None = None):
    """Activation memory per stage over the pipeline phase (GiB when ``bytes_per_unit`` gives
    each stage's activations per micro-batch, else micro-batches in flight)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(10, 4))
    for st in timeline.stages:
        scale = bytes_per_unit[st.stage] / GiB if bytes_per_unit else 1.0
        times = [t for t, _ in st.memory] + [timeline.step_time_s]
        held = [u * scale for _, u in st.memory] + [st.memory[-1][1] * scale]
        ax.step(times, held, where="post", label=f"stage {st.stage}")
    return _finish(fig, ax, "time (s)",
                   "activations (GiB)" if bytes_per_unit else "micro-batches in flight",
                   "Activation memory over the step")


def time_breakdown_figure(report: TrainingReport):
    plt = _pyplot()
    parts = {k: v for k, v in report.breakdown.to_dict().items() if v > 0}
    fig, ax = plt.subplots(figsize=(8, 0.8 + 0.35 * len(parts)))
    ax.barh(list(parts), list(parts.values()), color="#4C72B0")
    ax.invert_yaxis()
    ax.set_xlabel("seconds per step")
    ax.set_title(f"Where the {report.step_time_s:.3f} s step goes (critical stage "
                 f"{report.critical_stage})")
    fig.tight_layout()
    return fig


def memory_breakdown_figure(report: TrainingReport):
    plt = _pyplot()
    stages = report.memory.stages
    fig, ax = plt.subplots(figsize=(8, 4))
    bottom = [0.0] * len(stages)
    x = [st.stage for st in stages]
    for label, field in (("weights", "weights_bytes"), ("gradients", "grads_bytes"),
                         ("optimizer", "optimizer_bytes"), ("activations", "activations_bytes"),
                         ("other", "other_bytes")):
        values = [getattr(st, field) / GiB for st in stages]
        ax.bar(x, values, bottom=bottom, label=label)
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    ax.axhline(report.memory.capacity_bytes / GiB, color="black", linestyle="--", linewidth=1,
               label="HBM capacity")
    ax.set_xticks(x, [str(s) for s in x])
    ax.set_xlim(min(x) - 0.6, max(x) + 0.6)
    ax.set_ylim(0, max(max(bottom), report.memory.capacity_bytes / GiB) * 1.15)
    return _finish(fig, ax, "pipeline stage", "GiB per GPU", "Memory per GPU by stage")


def roofline_figure(points: Sequence[OperatorPoint], peak_flops: float, hbm_Bps: float):
    """Achieved FLOP/s against arithmetic intensity, under the roofline min(P, I·BW)
    (Williams, Waterman, Patterson, CACM 2009)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 5))
    shown = [p for p in points if p.flops > 0 and p.bytes_moved > 0 and p.time_s > 0]
    lo = min([p.intensity for p in shown] + [1.0]) / 2
    hi = max([p.intensity for p in shown] + [peak_flops / hbm_Bps * 4]) * 2
    ridge = peak_flops / hbm_Bps
    ax.plot([lo, ridge, hi], [lo * hbm_Bps, peak_flops, peak_flops], color="black", linewidth=1)
    for kind, color in (("gemm", "#4C72B0"), ("attention", "#DD8452")):
        sel = [p for p in shown if p.kind == kind]
        ax.scatter([p.intensity for p in sel], [p.achieved_flops for p in sel], s=14,
                   color=color, label=kind)
    ax.set_xscale("log")
    ax.set_yscale("log")
    return _finish(fig, ax, "arithmetic intensity (FLOP/byte)", "achieved FLOP/s",
                   "Roofline of the critical stage's operators")


def run_title(report: TrainingReport) -> str:
    """``llama-3-8b on 8 × h100-sxm (dgx-h100) · TP 2 · PP 1 · CP 1 · DP 4 · EP 1 · bf16``."""
    s = report.strategy
    return (f"{report.model} on {report.num_gpus:,} × {report.gpu} ({report.system}) · "
            f"TP {s.tp} · PP {s.pp} · CP {s.cp} · DP {s.dp} · EP {s.ep} · {s.precision}")


def step_figures(report: TrainingReport, timeline: PipelineTimeline,
                 points: Sequence[OperatorPoint], hbm_Bps: float) -> dict:
    """Name → Figure for every plot of the step, each titled with ``run_title``."""
    per_unit = [st.layer_activations_bytes / st.inflight_micro_batches
                if st.inflight_micro_batches else 0.0 for st in report.memory.stages]
    figures = {
        "gantt": gantt_figure(timeline),
        "memory_over_time": memory_over_time_figure(timeline, per_unit),
        "time_breakdown": time_breakdown_figure(report),
        "memory_breakdown": memory_breakdown_figure(report),
        "roofline": roofline_figure(points, report.peak_flops, hbm_Bps),
    }
    title = run_title(report)
    for fig in figures.values():
        fig.suptitle(title, fontsize=9)
        fig.tight_layout()
    return figures


def write_plots(figures: dict, out_dir) -> list[Path]:
    """Save each figure as ``NAME.png`` and ``NAME.svg`` in ``out_dir``; returns the paths."""
    plt = _pyplot()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, fig in figures.items():
        for ext in ("png", "svg"):
            path = out / f"{name}.{ext}"
            fig.savefig(path, dpi=120)
            paths.append(path)
        plt.close(fig)
    return paths


def figure_svg(fig) -> str:
    """The figure as inline SVG text (no external references)."""
    import io

    buffer = io.StringIO()
    fig.savefig(buffer, format="svg")
    text = buffer.getvalue()
    text = text[text.index("<svg"):]
    if "<metadata>" in text:  # RDF/creator block: resource URIs, nothing to render
        text = text[:text.index("<metadata>")] + text[text.index("</metadata>") + len("</metadata>"):]
    return text
