"""PNG/SVG plot of an ``infer-search`` result: the Pareto front of tokens/s/GPU against
tokens/s/user of aggregated and of disaggregated deployments in one picture, with the targets
(matplotlib imported lazily, Agg backend)."""

from __future__ import annotations

from pathlib import Path

from perfcast.serving_search.run import InferSearchResult

STYLES = {"aggregated": "o-", "disaggregated": "s--"}


def plot_fronts(result: InferSearchResult, path: Path | str) -> Path:
    """One front per searched mode, the best deployment marked; returns the path."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    modes = ("aggregated", "disaggregated") if result.disaggregated else ("aggregated",)
    for mode in modes:
        front = result.pareto_of(mode)
        if front:
            ax.plot([r.output_tokens_per_s_per_user for r in front],
                    [r.output_tokens_per_s_per_gpu for r in front], STYLES[mode],
                    label=f"{mode} ({len(front)} on the front)")
    if result.best:
        b = result.best[0]
        ax.plot([b.output_tokens_per_s_per_user], [b.output_tokens_per_s_per_gpu], "*",
                markersize=14, label=f"best: {b.deployment.label()}")
    per_user = result.targets.min_tokens_per_s_per_user
    if result.targets.tpot_s is not None:
        per_user = max(per_user or 0.0, 1.0 / result.targets.tpot_s)
    if per_user:
        ax.axvline(per_user, color="grey", linestyle=":", label="per-user target (TPOT)")
    ax.set_xlabel("output tokens/s per user (1/TPOT)")
    ax.set_ylabel("output tokens/s per GPU")
    ax.set_title(f"{result.model} on {result.num_gpus}× {result.gpu}, {result.input_len} in / "
                 f"{result.output_len} out, {result.engine}")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    out = Path(path)
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)
    return out
