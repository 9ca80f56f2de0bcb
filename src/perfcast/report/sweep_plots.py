"""Plots of sweep rows (matplotlib, Agg backend, imported lazily).

Each ``*_figure`` returns a Figure (tests inspect them); ``plot_sweep`` saves them. Every figure
is titled with the model and systems; the breakdown names each point's best strategy under its
bar. Colours come from the qualitative ``tab20`` palette (20 distinct colours, one per step
part), the GPU axis has plain integer ticks at the swept counts (not 3×10²), and legends sit
outside the axes so they cover no bar.
"""

from __future__ import annotations

from pathlib import Path

PALETTE = "tab20"
"""Qualitative matplotlib colormap: 20 distinct colours (more than the StepBreakdown parts)."""


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _base(frame):
    return frame[frame["parameter"].fillna("") == ""]


def _subject(frame) -> str:
    models = ", ".join(sorted(map(str, frame["model"].unique())))
    systems = ", ".join(sorted(map(str, frame["system"].unique())))
    return f"{models} on {systems}"


def strategy_label(row) -> str:
    """Short best-strategy label of one sweep row (``TP2 PP4 DP8``; CP/EP when > 1)."""
    def part(name: str, key: str) -> str:
        value = getattr(row, f"strategy_{key}", None)
        if value is None or value != value:  # NaN: no feasible strategy
            return ""
        return f"{name}{int(value)}" if key in ("tp", "pp", "dp") or int(value) > 1 else ""
    text = " ".join(p for p in (part("TP", "tp"), part("PP", "pp"), part("CP", "cp"),
                                part("EP", "ep"), part("DP", "dp")) if p)
    return text or "no fit"


def throughput_figure(frame):
    """Best tokens/s/GPU against GPU count, one line per system, integer GPU ticks."""
    from matplotlib.ticker import NullFormatter, NullLocator

    plt = _pyplot()
    base = _base(frame)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for system, group in base.groupby("system"):
        group = group.sort_values("num_gpus")
        ax.plot(group["num_gpus"], group["tokens_per_s_per_gpu"], marker="o", label=str(system))
    counts = sorted({int(n) for n in base["num_gpus"]})
    ax.set_xscale("log")
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xticks(counts, [f"{n:,}" for n in counts])
    ax.set(xlabel="GPUs", ylabel="tokens/s/GPU (best strategy)",
           title=f"{_subject(frame)}: throughput vs GPUs")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    fig.tight_layout()
    return fig


def breakdown_figure(frame):
    """Stacked step-time parts of each point's best strategy; one distinct colour per part,
    parts that are zero everywhere left out; the strategy under each bar."""
    plt = _pyplot()
    base = _base(frame)
    parts = [c for c in base.columns if c.startswith("time_") and c.endswith("_s")
             and base[c].fillna(0.0).gt(0).any()]
    if not parts:
        return None
    colors = plt.get_cmap(PALETTE).colors
    fig, ax = plt.subplots(figsize=(max(6.0, 1.3 * len(base) + 3.0), 5))
    labels = [f"{r.system}\n{int(r.num_gpus):,} GPUs\n{strategy_label(r)}"
              for r in base.itertuples()]
    positions = list(range(len(base)))
    bottom = [0.0] * len(base)
    for i, part in enumerate(parts):
        values = base[part].fillna(0.0).tolist()
        ax.bar(positions, values, bottom=bottom, label=part[5:-2].replace("_", " "),
               color=colors[i % len(colors)], width=0.7)
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    ax.set_xticks(positions, labels, fontsize=8)
    ax.set(ylabel="seconds per step",
           title=f"{_subject(frame)}: where the step time goes (best strategy)")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7)
    fig.tight_layout()
    return fig


def sensitivity_figure(frame):
    """Mean speed-up per varied hardware parameter and factor (None when nothing varied)."""
    import pandas as pd

    varied = frame[frame["parameter"].fillna("") != ""]
    if not len(varied):
        return None
    plt = _pyplot()
    base = _base(frame)
    ref = {(r.system, r.num_gpus): r.tokens_per_s_per_gpu for r in base.itertuples()}
    rel = varied.assign(speedup=[
        r.tokens_per_s_per_gpu / ref.get((r.system, r.num_gpus), float("nan"))
        for r in varied.itertuples()])
    table = rel.groupby(["parameter", "factor"])["speedup"].mean().unstack("factor")
    fig, ax = plt.subplots(figsize=(6, 0.6 * len(table) + 2))
    image = ax.imshow(table.values, cmap="RdYlGn", aspect="auto")
    ax.set_xticks(range(len(table.columns)), [f"{f:g}x" for f in table.columns])
    ax.set_yticks(range(len(table.index)), table.index)
    for (i, j), value in pd.DataFrame(table.values).stack().items():
        ax.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=8)
    fig.colorbar(image, label="tokens/s/GPU vs catalog hardware")
    ax.set_title(f"{_subject(frame)}: sensitivity to hardware parameters")
    fig.tight_layout()
    return fig


def sweep_figures(rows: list[dict]) -> dict:
    """File stem -> Figure for every plot the rows support."""
    import pandas as pd

    frame = pd.DataFrame(rows)
    figures = {"throughput_vs_gpus": throughput_figure(frame),
               "time_breakdown": breakdown_figure(frame),
               "sensitivity": sensitivity_figure(frame)}
    return {name: fig for name, fig in figures.items() if fig is not None}


def plot_sweep(rows: list[dict], out_dir: Path) -> list[Path]:
    """Write throughput vs GPUs per system, time-breakdown stacked bars and (when hardware
    parameters were varied) a sensitivity heat map as PNG; return the files written."""
    plt = _pyplot()
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, fig in sweep_figures(rows).items():
        path = out_dir / f"{name}.png"
        fig.savefig(path, dpi=110, bbox_inches="tight")
        plt.close(fig)
        written.append(path)
    return written
