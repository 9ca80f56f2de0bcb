"""The rich console every renderer prints to (wide enough for the tables when piped)."""

from __future__ import annotations

MIN_WIDTH = 120


def make_console():
    """A rich Console at least ``MIN_WIDTH`` columns wide (pipes and CI default to 80).

    ``emoji=False``: text such as ``:fire:`` in a name or a note prints as written, and rich
    never imports its 3,600-entry emoji table (``rich._emoji_codes``, ~4 ms of every text-mode
    process)."""
    from rich.console import Console

    console = Console(emoji=False)
    if console.width < MIN_WIDTH:
        console = Console(width=MIN_WIDTH, emoji=False)
    return console
