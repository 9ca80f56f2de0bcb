"""Loader and typed schema of ``graph_replay.yaml``: GPU time between dependent kernels of a
replayed CUDA/HIP graph (the decode step of a serving engine).

A replayed graph removes the host launch of every kernel, not the device-side boundary between
two dependent kernels on one stream: the next kernel starts only after the previous one has
completed and its writes are visible, and its first wave must be dispatched and fetch its
inputs from HBM before it does useful work (CUDA C++ Programming Guide, "Programmatic
Dependent Launch and Synchronization": without PDL a secondary kernel's launch waits for the
primary's completion and memory flush; PDL exists to overlap that boundary). The kernel model
(``kernels.efficiency.roofline_time_s``) charges each kernel its roofline time plus torchao's
2 µs launch floor (measured on H100, transferred to every GPU); ``kernel_gap_s`` is the extra
device time per kernel boundary in a graphed decode step, one value per vendor (CUDA graphs on
NVIDIA GPUs, HIP graphs on AMD's multi-die CDNA parts), fitted by ``perfcast calibrate``
(``validate.fit_graph_replay``; the ``fit`` block says on what data, with each value's standard
error, and ``loso_range_s`` the range of the values fitted with each source left out). It is
part of the ``Calibration`` bundle (``calibration.bundle``), so ``--calibration DIR`` replaces
it and ``perfcast validate --cross-validate source`` refits it in every fold.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Final

from pydantic import BaseModel, ConfigDict, Field

from perfcast.calibration._files import CALIBRATION_DIR, load_yaml_model
from perfcast.calibration.fit_record import FitRecord
from perfcast.specs.hardware import Vendor

GRAPH_REPLAY_PATH: Final[Path] = CALIBRATION_DIR / "graph_replay.yaml"


class VendorKernelGap(BaseModel):
    """Device seconds per kernel boundary of a replayed graph on one vendor's GPUs."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kernel_gap_s: float = Field(ge=0, le=50e-6, description="Seconds per dependent kernel.")
    fit_rows: int = Field(ge=0, description="Decode-latency rows of this vendor in the fit.")
    loso_range_s: tuple[float, float] | None = Field(
        default=None, description="Smallest and largest value fitted with each source left "
                                  "out in turn (None: not cross-validated).")
    source: str = Field(min_length=1)


class GraphReplayCalibration(BaseModel):
    """Kernel gap of graphed decode steps per GPU vendor (vendors absent: 0)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    fit: FitRecord | None = Field(default=None, description="How the file was fitted.")
    vendors: dict[Vendor, VendorKernelGap]

    def kernel_gap_s(self, vendor: Vendor) -> float:
        """Seconds per kernel boundary of a replayed graph on ``vendor``'s GPUs (0 if absent)."""
        entry = self.vendors.get(vendor)
        return 0.0 if entry is None else entry.kernel_gap_s


@cache
def load_graph_replay(path: Path | None = None) -> GraphReplayCalibration:
    """The graph-replay calibration in ``path`` (the shipped file when None); cached."""
    return load_yaml_model(GraphReplayCalibration, path or GRAPH_REPLAY_PATH)
