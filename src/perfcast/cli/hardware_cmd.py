"""``perfcast catalog``: templates and schemas for one's own hardware files.

``perfcast catalog template gpu|system`` prints a commented, filled-in file to copy and edit
(``--gpu FILE.yaml`` / ``--system FILE.yaml``); ``perfcast catalog check FILE`` loads one and
prints the spec perfcast would use, or the one-line error naming the wrong field.
"""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from perfcast.cli.errors import handle_input_errors

TEMPLATES = Path(__file__).resolve().parents[1] / "catalog" / "data" / "templates"


class HardwareKind(str, Enum):
    gpu = "gpu"
    system = "system"


catalog_app = typer.Typer(
    help="Templates for your own hardware: --system FILE.yaml, --gpu FILE.yaml.",
    no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False)


def template_text(kind: HardwareKind | str) -> str:
    """The shipped template of ``kind`` (``gpu`` or ``system``)."""
    return (TEMPLATES / f"{HardwareKind(kind).value}.yaml").read_text(encoding="utf-8")


@catalog_app.command("template")
@handle_input_errors
def template_command(kind: Annotated[HardwareKind, typer.Argument(
        help="gpu (a --gpu file) or system (a --system file).")]) -> None:
    """Print a commented hardware file to copy and edit (H100 / DGX H100 values)."""
    typer.echo(template_text(kind), nl=False)


@catalog_app.command("check")
@handle_input_errors
def check_command(
    path: Annotated[str, typer.Argument(help="A system or GPU YAML/JSON file.")],
    json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Load a system or GPU file and show the system perfcast builds from it."""
    from perfcast.catalog.systems import load_system
    from perfcast.catalog.user_hardware import is_hardware_file
    from perfcast.cli.catalog_entry import render_entry
    from perfcast.errors import InputError

    if not is_hardware_file(path):
        raise InputError("path", path, "expected a .yaml, .yml or .json file")
    render_entry({"kind": "system", **load_system(path).model_dump(mode="json")}, json)
