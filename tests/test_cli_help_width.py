"""``--help`` is readable at 80 columns (issue 22): every option name and alias appears whole
(the rich table cut them: ``--pipeline-sch…``), and no line runs past the terminal."""

from __future__ import annotations

import pytest
import typer
from typer.testing import CliRunner

from perfcast.cli.main import app

WIDTH = 80


def _commands(group, path=()):
    for name, command in getattr(group, "commands", {}).items():
        yield from _commands(command, (*path, name))
    if not getattr(group, "commands", None):
        yield path, group


COMMANDS = list(_commands(typer.main.get_command(app)))


@pytest.mark.parametrize(("path", "command"), COMMANDS, ids=[" ".join(p) for p, _ in COMMANDS])
def test_help_at_80_columns_shows_every_option_whole(path, command) -> None:
    result = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": str(WIDTH)})
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert "…" not in text
    words = set(text.replace(",", " ").replace("/", " ").split())
    for param in command.params:
        if param.param_type_name != "option":
            continue
        for name in (*param.opts, *param.secondary_opts):
            assert name in words, f"{' '.join(path)}: {name} missing or cut in help"
    too_wide = [line for line in text.splitlines() if len(line) > WIDTH]
    assert too_wide == []


def test_root_help_lists_every_command() -> None:
    text = CliRunner().invoke(app, ["--help"], env={"COLUMNS": str(WIDTH)}).stdout
    for name in typer.main.get_command(app).commands:
        assert f"  {name} " in text
