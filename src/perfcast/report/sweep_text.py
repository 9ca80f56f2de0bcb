"""Terminal rendering of sweep rows."""

from __future__ import annotations


def render_sweep(rows: list[dict], console, out=None, plots=()) -> None:
    from rich.table import Table

    table = Table(title="best strategy per sweep point")
    for col in ("system", "GPUs", "GBS", "vary", "tp", "pp", "cp", "dp", "recompute", "prec",
                "tok/s/GPU", "MFU"):
        table.add_column(col, justify="right")
    for r in rows:
        vary = f"{r['parameter']} x{r['factor']:g}" if r.get("parameter") else "-"
        table.add_row(r["system"], str(r["num_gpus"]), str(r["global_batch_size"]), vary,
                      *(str(r.get(f"strategy_{k}", "-")) for k in ("tp", "pp", "cp", "dp",
                                                                   "recompute", "precision")),
                      f"{r['tokens_per_s_per_gpu']:,.0f}", f"{r.get('mfu', float('nan')):.3f}")
    console.print(table)
    if out is not None:
        console.print(f"rows written to {out}")
    for path in plots:
        console.print(f"plot written to {path}")
