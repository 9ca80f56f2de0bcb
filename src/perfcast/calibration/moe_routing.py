"""Loader and typed schema of ``moe_routing.yaml``: how uneven real (learned) MoE routing is."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Final

from pydantic import BaseModel, ConfigDict, Field

from perfcast.calibration._files import CALIBRATION_DIR, load_yaml_model

MOE_ROUTING_PATH: Final[Path] = CALIBRATION_DIR / "moe_routing.yaml"


class DroplessImbalance(BaseModel):
    """Routed tokens at the busiest expert-parallel rank over the balanced mean under dropless
    token-choice routing with a learned router, and the measured pairs it comes from."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    value: float = Field(ge=1.0, description="Busiest EP rank's routed tokens / the mean.")
    source: str
    pairs: tuple[str, ...] = Field(
        default=(), description="'forced row id / dropless row id' of each measured pair used.")


class MoeRoutingCalibration(BaseModel):
    """Routing facts of MoE training that no input states (``moe_routing.yaml``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    reference: str
    dropless_load_imbalance: DroplessImbalance


@cache
def load_moe_routing(path: Path | None = None) -> MoeRoutingCalibration:
    """The MoE routing calibration in ``path`` (the shipped file when None); cached."""
    return load_yaml_model(MoeRoutingCalibration, path or MOE_ROUTING_PATH)
