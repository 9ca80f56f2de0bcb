"""Loader and typed schema of ``deepep_low_latency.yaml``: DeepEP low-latency kernel bandwidth.

The README's latencies are the bytes a rank sends over its "RDMA BW"; this file keeps that
bandwidth as a fraction of the NIC line rate per expert-parallel size, interpolated in log2(EP)
and held constant outside the measured range (8-256).
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Final

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from perfcast.arrays import Floats
from perfcast.calibration._files import CALIBRATION_DIR, load_yaml_model
from perfcast.calibration.comm_protocols import SourcedValue

DEEPEP_LOW_LATENCY_PATH: Final[Path] = CALIBRATION_DIR / "deepep_low_latency.yaml"


class LowLatencyPoint(BaseModel):
    """Measured dispatch/combine bandwidth (their mean) over the NIC line rate at one EP size."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    ep: int = Field(gt=1, description="Expert-parallel ranks.")
    bandwidth_fraction: float = Field(gt=0, le=1, description="RDMA BW / NIC line rate.")


class DeepEPLowLatencyCalibration(BaseModel):
    """Bandwidth fraction of DeepEP's low-latency kernels by EP size."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    reference: str
    nic_line_rate_Bps: SourcedValue
    points: tuple[LowLatencyPoint, ...] = Field(min_length=1)

    def fraction(self, ep: Floats) -> Floats:
        """Achieved share of the NIC line rate at ``ep`` ranks (array-friendly)."""
        points = sorted(self.points, key=lambda p: p.ep)
        xs = np.log2([p.ep for p in points])
        ys = [p.bandwidth_fraction for p in points]
        return np.interp(np.log2(np.maximum(np.asarray(ep, dtype=float), 1.0)), xs, ys)[()]


@cache
def load_deepep_low_latency(path: Path | None = None) -> DeepEPLowLatencyCalibration:
    """The DeepEP low-latency calibration in ``path`` (the shipped file when None); cached."""
    return load_yaml_model(DeepEPLowLatencyCalibration, path or DEEPEP_LOW_LATENCY_PATH)
