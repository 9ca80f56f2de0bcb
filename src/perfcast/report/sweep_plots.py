"""Plots of sweep rows (matplotlib, Agg backend, imported lazily)."""

from __future__ import annotations

from pathlib import Path


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_sweep(rows: list[dict], out_dir: Path) -> list[Path]:
    """Write throughput vs GPUs per system, time-breakdown stacked bars and (when hardware
    parameters were varied) a sensitivity heat map; return the files written."""
    import pandas as pd

    plt = _pyplot()
    out_dir.mkdir(parents=True, exist_ok=True)
    frame = pd.DataFrame(rows)
    base = frame[frame["parameter"].fillna("") == ""]
    written = []

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for system, group in base.groupby("system"):
        group = group.sort_values("num_gpus")
        ax.plot(group["num_gpus"], group["tokens_per_s_per_gpu"], marker="o", label=system)
    ax.set(xscale="log", xlabel="GPUs", ylabel="tokens/s/GPU (best strategy)",
           title="Throughput vs GPUs")
    ax.legend()
    written.append(_save(fig, out_dir / "throughput_vs_gpus.png", plt))

    parts = [c for c in base.columns if c.startswith("time_") and c.endswith("_s")]
    if parts:
        fig, ax = plt.subplots(figsize=(max(6, 0.6 * len(base)), 4.5))
        labels = [f"{r.system}\n{r.num_gpus}" for r in base.itertuples()]
        bottom = [0.0] * len(base)
        for part in parts:
            values = base[part].fillna(0.0).tolist()
            ax.bar(labels, values, bottom=bottom, label=part[5:-2])
            bottom = [b + v for b, v in zip(bottom, values, strict=True)]
        ax.set(ylabel="seconds per step", title="Where the step time goes (best strategy)")
        ax.legend(fontsize=7, ncol=2)
        written.append(_save(fig, out_dir / "time_breakdown.png", plt))

    varied = frame[frame["parameter"].fillna("") != ""]
    if len(varied):
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
        ax.set_title("Sensitivity to hardware parameters")
        written.append(_save(fig, out_dir / "sensitivity.png", plt))
    return written


def _save(fig, path: Path, plt) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
