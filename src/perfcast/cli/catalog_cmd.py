"""``perfcast models`` and ``perfcast systems``: list the catalog."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from perfcast.cli.errors import handle_input_errors

JsonFlag = Annotated[bool, typer.Option("--json", help="Print one JSON object.")]


NameArgument = Annotated[str | None, typer.Argument(
    help="Show this entry in full, with its sources (default: list all).")]


@handle_input_errors
def models_command(name: NameArgument = None, json: JsonFlag = False) -> None:
    """List catalog models with their parameter counts and sources (or show one: NAME)."""
    if name is not None:
        from perfcast.cli.catalog_entry import model_entry, render_entry

        render_entry(model_entry(name), json)
        return
    from perfcast.catalog.models import list_models
    from perfcast.graph.params import count_params

    rows: list[dict[str, Any]] = []
    for model in list_models():
        counts = count_params(model)
        rows.append({
            "name": model.name,
            "arch_type": model.arch_type,
            "params_total": counts.total,
            "params_active": counts.active,
            "layers": model.num_hidden_layers,
            "num_layers": model.num_hidden_layers,
            "hidden_size": model.hidden_size,
            "source": model.source,
        })
    if json:
        from perfcast.report.json_out import to_json

        print(to_json({"models": rows}))
        return
    from rich.table import Table

    from perfcast.report.console import make_console

    table = Table(title="perfcast models")
    for column in ("name", "type", "params (B)", "active (B)", "layers", "hidden"):
        table.add_column(column, justify="left" if column in ("name", "type") else "right")
    for r in rows:
        table.add_row(r["name"], r["arch_type"], f"{r['params_total'] / 1e9:,.2f}",
                      f"{r['params_active'] / 1e9:,.2f}", str(r["layers"]), str(r["hidden_size"]))
    make_console().print(table)


@handle_input_errors
def systems_command(name: NameArgument = None, json: JsonFlag = False) -> None:
    """List catalog systems (and the GPUs they are built from), or show one system or GPU."""
    if name is not None:
        from perfcast.cli.catalog_entry import render_entry, system_entry

        render_entry(system_entry(name), json)
        return
    from perfcast.catalog.gpus import list_gpus
    from perfcast.catalog.systems import list_systems

    systems: list[dict[str, Any]] = [
        {
            "name": s.name,
            "gpu": s.gpu.name,
            "gpus_per_node": s.gpus_per_node,
            "scale_up_domain_gpus": s.scale_up_domain_gpus,
            "scale_up_bandwidth_Bps": s.scale_up_bandwidth_Bps,
            "scale_out_bandwidth_Bps": s.scale_out_bandwidth_Bps,
            "hbm_capacity_bytes": s.gpu.hbm_capacity_bytes,
            "peak_bf16_flops": s.gpu.peak_bf16_flops,
            "source": s.source,
        }
        for s in list_systems()
    ]
    gpus: list[dict[str, Any]] = [
        {"name": g.name, "display_name": g.display_name, "generation": g.generation,
         "peak_bf16_flops": g.peak_bf16_flops, "peak_fp8_flops": g.peak_fp8_flops,
         "hbm_capacity_bytes": g.hbm_capacity_bytes, "hbm_bandwidth_Bps": g.hbm_bandwidth_Bps,
         "source": g.source}
        for g in list_gpus()
    ]
    if json:
        from perfcast.report.json_out import to_json

        print(to_json({"systems": systems, "gpus": gpus}))
        return
    from rich.table import Table

    from perfcast.report.console import make_console

    table = Table(title="perfcast systems")
    for column in ("name", "gpu", "GPUs/node", "scale-up domain", "scale-up GB/s",
                   "scale-out GB/s", "HBM GB", "BF16 TFLOP/s"):
        table.add_column(column, justify="left" if column in ("name", "gpu") else "right")
    for s in systems:
        table.add_row(s["name"], s["gpu"], str(s["gpus_per_node"]), str(s["scale_up_domain_gpus"]),
                      f"{s['scale_up_bandwidth_Bps'] / 1e9:,.0f}",
                      f"{s['scale_out_bandwidth_Bps'] / 1e9:,.1f}",
                      f"{s['hbm_capacity_bytes'] / 1e9:,.0f}", f"{s['peak_bf16_flops'] / 1e12:,.0f}")
    make_console().print(table)
    make_console().print(f"{len(gpus)} GPUs in the catalog (each also a --system: its default "
                         "system, else a node from its own row): "
                         + ", ".join(g["name"] for g in gpus))
