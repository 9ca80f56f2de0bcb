"""Loader and typed schema of ``comm_alpha_beta.yaml``: achievable link bandwidth per tier.

Efficiency = large-message ring bus bandwidth / per-GPU unidirectional link bandwidth, from
``shared/reference/collectives.md``. The scale-up tier (NVLink, xGMI) is keyed by GPU
generation because each generation has its own link; the scale-out tier (InfiniBand, RoCE,
EFA) has one value. Generations without a measurement get the conservative ``default``;
``CommAlphaBetaCalibration.uses_default`` tells a report so.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from perfcast.calibration._files import CALIBRATION_DIR, load_yaml_model
from perfcast.specs.hardware import Generation

COMM_ALPHA_BETA_PATH: Final[Path] = CALIBRATION_DIR / "comm_alpha_beta.yaml"


class TierEfficiency(BaseModel):
    """Achievable fraction of a tier's link bandwidth, with the measurement it comes from."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    efficiency: float = Field(gt=0, le=1, description="Achieved busbw / link bandwidth.")
    source: str = Field(description="Measurement and arithmetic behind the value.")


class CommAlphaBetaCalibration(BaseModel):
    """Protocol efficiency of the scale-up tier (per generation) and of the scale-out tier."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    reference: str = Field(description="Reference document the values are derived from.")
    scale_up: dict[Generation | Literal["default"], TierEfficiency] = Field(
        description="Scale-up (NVLink/xGMI) efficiency per GPU generation; must have 'default'."
    )
    scale_out: TierEfficiency = Field(description="Scale-out (NIC) efficiency.")

    @model_validator(mode="after")
    def _check_default(self) -> CommAlphaBetaCalibration:
        if "default" not in self.scale_up:
            keys = sorted(self.scale_up)
            raise ValueError(f"scale_up has no 'default' entry (keys: {keys})")
        return self

    def uses_default(self, generation: Generation) -> bool:
        """True when ``generation`` has no scale-up measurement and gets ``default``."""
        return generation not in self.scale_up

    def scale_up_efficiency(self, generation: Generation) -> float:
        """Scale-up efficiency of ``generation`` (``default`` when it has none)."""
        entry = self.scale_up.get(generation, self.scale_up["default"])
        return entry.efficiency

    @property
    def scale_out_efficiency(self) -> float:
        """Scale-out (per-GPU NIC) efficiency."""
        return self.scale_out.efficiency


@cache
def _load_shipped() -> CommAlphaBetaCalibration:
    return load_yaml_model(CommAlphaBetaCalibration, COMM_ALPHA_BETA_PATH)


def load_comm_alpha_beta(path: Path | None = None) -> CommAlphaBetaCalibration:
    """The communication calibration in ``path``; the shipped file (cached) when None."""
    if path is None:
        return _load_shipped()
    return load_yaml_model(CommAlphaBetaCalibration, path)
