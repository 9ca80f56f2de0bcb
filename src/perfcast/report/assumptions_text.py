"""Terminal rendering of the framework-profile assumptions a forecast made (``--framework``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from rich.console import Console


class _Assumption(Protocol):
    sentence: str
    source: str


def render_assumptions(framework: str, assumptions: Iterable[_Assumption], console: Console) -> None:
    """One line per assumption (the sentence), its source dimmed beneath it."""
    items = list(assumptions)
    console.print(f"\n[bold]Assumptions[/bold] (framework profile {framework}; explicit flags win)")
    if not items:
        console.print("  none: every setting the profile covers was given explicitly")
    for assumption in items:
        console.print(f"  - {assumption.sentence}", highlight=False, markup=False)
        console.print(f"    [dim]source: {assumption.source}[/dim]", highlight=False)
