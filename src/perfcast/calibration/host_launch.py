"""Loader and typed schema of ``host_launch.yaml``: the host's seconds to issue GPU work."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Final

from pydantic import BaseModel, ConfigDict

from perfcast.calibration._files import CALIBRATION_DIR, load_yaml_model
from perfcast.calibration.comm_protocols import SourcedValue

HOST_LAUNCH_PATH: Final[Path] = CALIBRATION_DIR / "host_launch.yaml"


class HostLaunchCalibration(BaseModel):
    """Host seconds per eager op, per CUDA-graph launch, per blocking device-host sync, and the
    GPU's idle seconds between two queued kernels."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    reference: str
    host_s_per_op: SourcedValue
    graph_launch_s: SourcedValue
    sync_s: SourcedValue
    kernel_gap_s: SourcedValue


@cache
def load_host_launch(path: Path | None = None) -> HostLaunchCalibration:
    """The host-launch calibration in ``path`` (the shipped file when None); cached."""
    return load_yaml_model(HostLaunchCalibration, path or HOST_LAUNCH_PATH)
