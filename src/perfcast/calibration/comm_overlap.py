"""Loader and typed schema of ``comm_overlap.yaml``: SMs a communication kernel takes, the
share of TP communication that TP overlap hides, and the share of a collective overlapped on
its own stream (data-parallel, context-parallel) that still lands on the critical path."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Final

from pydantic import BaseModel, ConfigDict

from perfcast.calibration._files import CALIBRATION_DIR, load_yaml_model
from perfcast.calibration.comm_protocols import SourcedValue
from perfcast.calibration.fit_record import FitRecord

COMM_OVERLAP_PATH: Final[Path] = CALIBRATION_DIR / "comm_overlap.yaml"


class CommOverlapCalibration(BaseModel):
    """SMs held by a running collective, the SM count assumed when a GPU has none, and the
    fitted overlap shares."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    reference: str
    comm_sm_count: SourcedValue
    default_sm_count: SourcedValue
    tp_overlap_hidden_fraction: SourcedValue
    stream_overlap_exposed_fraction: SourcedValue
    fit: FitRecord | None = None
    """How the fitted values were obtained (``perfcast calibrate``)."""

    def comm_sm_fraction(self, num_sms: int | None) -> float:
        """Share of a GPU's SMs a collective holds: comm SMs / SMs (capped below 1)."""
        sms = num_sms or self.default_sm_count.value
        return min(self.comm_sm_count.value / sms, 0.5)


@cache
def load_comm_overlap(path: Path | None = None) -> CommOverlapCalibration:
    """The overlap calibration in ``path`` (the shipped file when None); cached."""
    return load_yaml_model(CommOverlapCalibration, path or COMM_OVERLAP_PATH)
