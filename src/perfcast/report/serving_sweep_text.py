"""Terminal table of a serving sweep: the best deployment at each point."""

from __future__ import annotations

import math

from perfcast.serving_search.sweep import NO_DEPLOYMENT


def _ms(value: float) -> str:
    return "-" if math.isnan(value) else f"{value * 1e3:,.1f}"


def render_serving_sweep(rows: list[dict], console, out=None) -> None:
    from rich.table import Table

    table = Table(title="best serving deployment per sweep point")
    for col in ("system", "GPUs", "TTFT target ms", "TPOT target ms", "best deployment",
                "TTFT ms", "TPOT ms", "tok/s/GPU", "tok/s/user"):
        table.add_column(col, justify="left" if col == "best deployment" else "right")
    for r in rows:
        rate = r["best_output_tokens_per_s_per_gpu"]
        table.add_row(r["system"], str(r["num_gpus"]), _ms(r["target_ttft_s"]),
                      _ms(r["target_tpot_s"]), r["best_deployment"] if r["best_deployment"] != NO_DEPLOYMENT
                      else "none meets the targets",
                      _ms(r["best_ttft_s"]), _ms(r["best_tpot_s"]),
                      "-" if math.isnan(rate) else f"{rate:,.0f}",
                      "-" if math.isnan(rate) else f"{r['best_output_tokens_per_s_per_user']:,.1f}")
    console.print(table)
    if out is not None:
        console.print(f"rows written to {out}")
