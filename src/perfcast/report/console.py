"""The rich console every renderer prints to (wide enough for the tables when piped)."""

from __future__ import annotations

MIN_WIDTH = 120


def make_console():
    """A rich Console at least ``MIN_WIDTH`` columns wide (pipes and CI default to 80)."""
    from rich.console import Console

    console = Console()
    if console.width < MIN_WIDTH:
        console = Console(width=MIN_WIDTH)
    return console
