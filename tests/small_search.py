"""One small text search the search-CLI tests share: Llama-3.2-1B on 8 GPUs, 2,048-token
sequences, 16 sequences a step, no context parallelism, a wide terminal."""

from __future__ import annotations

from typer.testing import CliRunner

from perfcast.cli.main import app

SMALL_SEARCH = ["search", "-m", "llama-3.2-1b", "-g", "8", "--seq-length", "2048",
                "--global-batch-size", "16", "--max-cp", "1"]


def small_search(*extra: str):
    """``perfcast search`` on ``SMALL_SEARCH`` plus ``extra`` (a typer ``Result``)."""
    return CliRunner().invoke(app, [*SMALL_SEARCH, *extra], env={"COLUMNS": "200"})
