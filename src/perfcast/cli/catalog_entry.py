"""``perfcast models NAME`` / ``perfcast systems NAME``: one catalog entry, every field with
its value, and the sources it came from (model config, hardware datasheet rows)."""

from __future__ import annotations

from typing import Any


def model_entry(name: str) -> dict[str, Any]:
    """The catalog model ``name`` (or alias, or file) as a dict with its parameter counts."""
    from perfcast.catalog.models import load_model
    from perfcast.graph.params import count_params

    model = load_model(name)
    counts = count_params(model)
    return {**model.model_dump(mode="json"), "params_total": counts.total,
            "params_active": counts.active}


def system_entry(name: str) -> dict[str, Any]:
    """The catalog system ``name`` (with its GPU), or the catalog GPU of that name."""
    from perfcast.catalog.gpus import load_gpu
    from perfcast.catalog.systems import load_system
    from perfcast.errors import InputError

    try:
        return {"kind": "system", **load_system(name).model_dump(mode="json")}
    except InputError:
        try:
            return {"kind": "gpu", **load_gpu(name).model_dump(mode="json")}
        except InputError:
            raise InputError("name", name, "is neither a catalog system nor a catalog GPU "
                             "(perfcast systems lists both)") from None


def render_entry(entry: dict[str, Any], as_json: bool) -> None:
    """Print ``entry``: JSON, or a two-column table with nested parts (a system's GPU) flattened
    as ``gpu.field`` and every ``source`` printed in full below it."""
    if as_json:
        from perfcast.report.json_out import to_json

        print(to_json(entry))
        return
    from rich.table import Table

    from perfcast.report.console import make_console

    flat = dict(_flatten(entry, ""))
    sources = {k: v for k, v in flat.items() if k.endswith("source") and v}
    table = Table(title=str(entry.get("name", "")), show_header=False)
    table.add_column("field")
    table.add_column("value", overflow="fold")
    for key, value in flat.items():
        if key not in sources:
            table.add_row(key, _text(value))
    console = make_console()
    console.print(table)
    for key, text in sources.items():
        console.print(f"[bold]{key}[/bold]: {text}", soft_wrap=False)


def _flatten(data: dict[str, Any], prefix: str):
    for key, value in data.items():
        if isinstance(value, dict):
            yield from _flatten(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


def _text(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.6g}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)
