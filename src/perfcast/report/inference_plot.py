"""PNG/SVG plot of a throughput-vs-latency curve (matplotlib imported lazily, Agg backend)."""

from __future__ import annotations

from pathlib import Path

from perfcast.estimate.inference_report import InferenceCurve


def plot_curve(curve: InferenceCurve, path: Path | str) -> Path:
    """Tokens/s/GPU against tokens/s/user, one labelled point per batch size; returns the path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    fits = [p for p in curve.points if p.fits]
    over = [p for p in curve.points if not p.fits]
    for points, style, label in ((fits, "o-", "fits"), (over, "x", "does not fit")):
        if points:
            ax.plot([p.tokens_per_s_per_user for p in points],
                    [p.output_tokens_per_s_per_gpu for p in points], style, label=label)
    for p in curve.points:
        ax.annotate(str(p.batch_size), (p.tokens_per_s_per_user, p.output_tokens_per_s_per_gpu),
                    textcoords="offset points", xytext=(4, 4), fontsize=8)
    base = curve.base
    ax.set_xlabel("tokens/s per user (1/TPOT)")
    ax.set_ylabel("output tokens/s per GPU")
    ax.set_title(f"{base.model} on {base.num_gpus}× {base.gpu}, {base.workload.input_len} in / "
                 f"{base.workload.output_len} out")
    ax.grid(True, alpha=0.3)
    ax.legend()
    out = Path(path)
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)
    return out
