"""Every ``perfcast`` command shown in the README runs (exit 0)."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from perfcast.cli.main import app

README = Path(__file__).resolve().parents[1] / "README.md"


def _commands() -> list[str]:
    """``perfcast ...`` commands inside the README's ```bash blocks (after any ``&&``)."""
    commands, in_bash = [], False
    for line in README.read_text().splitlines():
        if line.startswith("```"):
            in_bash = line.strip() == "```bash"
            continue
        if in_bash and "perfcast " in line:
            commands.append(line[line.index("perfcast "):].strip())
    return commands


def test_readme_has_examples():
    assert len(_commands()) >= 5


@pytest.mark.parametrize("command", _commands())
def test_readme_example_runs(command):
    args = shlex.split(command)[1:]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
