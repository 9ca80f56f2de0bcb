"""Loader and typed schema of ``moe_routing.yaml``: how uneven real (learned) MoE routing is."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Final

from pydantic import BaseModel, ConfigDict, Field

from perfcast.calibration._files import CALIBRATION_DIR, load_yaml_model
from perfcast.calibration.fit_record import FitRecord

MOE_ROUTING_PATH: Final[Path] = CALIBRATION_DIR / "moe_routing.yaml"


class DroplessImbalance(BaseModel):
    """Routed tokens at the busiest expert-parallel rank over the balanced mean under dropless
    token-choice routing with a learned router, and the measured pairs it comes from."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    value: float = Field(ge=1.0, description="Busiest EP rank's routed tokens / the mean.")
    standard_error: float | None = Field(
        default=None, ge=0, description="Standard error of ``value`` from the pairs' residuals "
        "(sqrt of s^2 (J^T J)^-1 at the optimum, ``validate.least_squares_fit``); None: the "
        "no-information prior 1.0 (no pair to fit) or no degree of freedom.")
    source: str
    pairs: tuple[str, ...] = Field(
        default=(), description="'forced row id / dropless row id' of each measured pair used.")


class MoeRoutingCalibration(BaseModel):
    """Routing facts of MoE training that no input states (``moe_routing.yaml``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    fit: FitRecord | None = Field(default=None, description="How the file was fitted.")
    reference: str
    dropless_load_imbalance: DroplessImbalance

    def note(self) -> str:
        """The value and its uncertainty for a forecast's assumption line."""
        entry = self.dropless_load_imbalance
        if not entry.pairs:
            return f"{entry.value:g}, no forced-balance pair measured: balanced prior"
        error = (f" ± {entry.standard_error:.2g}" if entry.standard_error is not None else "")
        return f"{entry.value:g}{error}, fitted on {len(entry.pairs)} forced-balance pairs"


@cache
def load_moe_routing(path: Path | None = None) -> MoeRoutingCalibration:
    """The MoE routing calibration in ``path`` (the shipped file when None); cached."""
    return load_yaml_model(MoeRoutingCalibration, path or MOE_ROUTING_PATH)
