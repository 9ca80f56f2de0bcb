"""Terminal rendering of ``TrainingBudget`` (``perfcast train --train-tokens``)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from perfcast.estimate.training_budget import JOULES_PER_KWH, SECONDS_PER_HOUR, TrainingBudget


def render_training_budget(budget: TrainingBudget, console: Console) -> None:
    """Time, GPU-hours, energy and cost to train the token budget, with the power's source."""
    table = Table(title=f"To train {budget.train_tokens:,.4g} tokens", title_justify="left",
                  show_header=False)
    table.add_column("quantity")
    table.add_column("value", justify="right")
    days = budget.time_s / (24 * SECONDS_PER_HOUR)
    table.add_row("time", f"{days:,.2f} days ({budget.time_s / SECONDS_PER_HOUR:,.1f} h)")
    table.add_row("GPU-hours", f"{budget.gpu_hours:,.0f}")
    if budget.energy_J is not None:
        table.add_row("GPU energy", f"{budget.energy_J / JOULES_PER_KWH / 1e3:,.2f} MWh")
    if budget.cost_usd is not None:
        table.add_row("cost", f"${budget.cost_usd:,.0f} at ${budget.price_per_gpu_hour:,.2f}"
                      "/GPU-hour")
    console.print(table)
    console.print(f"power: {budget.power_source}", highlight=False)
