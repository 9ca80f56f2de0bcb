"""Time, GPU-hours, energy and cost to train a token budget at a forecast step rate
(``perfcast train --train-tokens N [--price-per-gpu-hour P]``).

    time_s     = tokens / (tokens/s/GPU · GPUs)          (steady-state step rate, no restarts)
    GPU-hours  = time_s · GPUs / 3600
    energy_J   = GPU-hours · 3600 · P_board              (P_board: the catalog's tdp_W, or the
                                                          configured power_limit_W; GPUs only,
                                                          no host, network or cooling)
    cost       = GPU-hours · price per GPU-hour

Board power is an upper bound of the GPUs' draw (the rated power at which the sustained clock
holds, gpus.yaml ``tdp_W`` with its ``tdp_source``); a GPU without a rated power gets no energy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from perfcast.specs.hardware import GPUSpec

SECONDS_PER_HOUR = 3600.0
JOULES_PER_KWH = 3.6e6


@dataclass(frozen=True)
class TrainingBudget:
    """What training ``train_tokens`` tokens costs at the forecast rate."""

    train_tokens: float
    """Tokens to train."""
    time_s: float
    """Wall-clock seconds at the forecast tokens/s (steady state)."""
    gpu_hours: float
    """GPUs × hours."""
    board_power_W: float | None
    """Board power per GPU used for energy (power cap if set, else rated TDP); None: unknown."""
    energy_J: float | None
    """GPU energy, joules (board power × GPU-seconds); None without a board power."""
    price_per_gpu_hour: float | None
    """$ per GPU-hour (``--price-per-gpu-hour``); None: no cost."""
    cost_usd: float | None
    """Dollars: GPU-hours × price; None without a price."""
    power_source: str
    """Where the board power comes from (or why there is no energy)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "train_tokens": self.train_tokens, "time_s": self.time_s,
            "time_days": self.time_s / (24 * SECONDS_PER_HOUR), "gpu_hours": self.gpu_hours,
            "board_power_W": self.board_power_W, "energy_J": self.energy_J,
            "energy_MWh": None if self.energy_J is None else self.energy_J / JOULES_PER_KWH / 1e3,
            "price_per_gpu_hour": self.price_per_gpu_hour, "cost_usd": self.cost_usd,
            "power_source": self.power_source,
        }


def board_power_W(gpu: GPUSpec) -> float | None:
    """Per-GPU board power for energy: the configured cap, else the rated TDP, else None."""
    return gpu.power_limit_W if gpu.power_limit_W is not None else gpu.tdp_W


def training_budget(tokens_per_s_per_gpu: float, num_gpus: int, gpu: GPUSpec,
                    train_tokens: float, price_per_gpu_hour: float | None = None
                    ) -> TrainingBudget:
    """Time, GPU-hours, energy and cost of ``train_tokens`` tokens (formulas in the module
    docstring; SI units)."""
    time_s = train_tokens / (tokens_per_s_per_gpu * num_gpus)
    gpu_hours = time_s * num_gpus / SECONDS_PER_HOUR
    power = board_power_W(gpu)
    if power is None:
        source = f"{gpu.name} has no rated board power in its catalog entry: no energy"
    else:
        kind = "power cap power_limit_W" if gpu.power_limit_W is not None else "rated tdp_W"
        source = (f"{gpu.name} {kind} {power:g} W per GPU (catalog entry; GPUs only, no host, "
                  "network or cooling)")
    return TrainingBudget(
        train_tokens=train_tokens, time_s=time_s, gpu_hours=gpu_hours, board_power_W=power,
        energy_J=None if power is None else power * gpu_hours * SECONDS_PER_HOUR,
        price_per_gpu_hour=price_per_gpu_hour,
        cost_usd=None if price_per_gpu_hour is None else gpu_hours * price_per_gpu_hour,
        power_source=source)
