"""``Calibration``: every fitted calibration file as one frozen object, and its loader.

The end-to-end fits (``perfcast calibrate``) write seven files, each read by its own loader:

* ``training_overheads.yaml``: per-generation kernel overhead fraction, pooled ``default``;
* ``comm_overlap.yaml``: SMs held by collectives, TP-overlap and stream-overlap shares;
* ``attention_kernels.yaml``: derived attention kernel classes (fitted time ratios);
* ``inference_overheads.yaml``: per-generation serving overheads, pooled ``default``;
* ``forecast_intervals.yaml``: 80% bands from the cross-validated residuals;
* ``moe_routing.yaml``: the busiest EP rank's load under dropless learned routing, fitted on
  forced-balance / real-routing pairs (``validate.fit_moe_routing``);
* ``graph_replay.yaml``: device time per kernel boundary of a replayed CUDA/HIP graph, per GPU
  vendor, fitted on engine-simulated decode rows (``validate.fit_graph_replay``);

and, not fitted but sourced priors a user may replace, ``host_launch.yaml`` (host time per
eager op, graph launch and device-host sync).

``load_calibration(directory)`` reads each file from ``directory`` when it holds one and the
shipped file otherwise (a user who fitted only training runs keeps the shipped serving
calibration), so ``--calibration DIR`` can carry any subset. The estimators take the object
(``calibration=``) instead of reading the shipped files themselves.

The two serving-only files (``inference_overheads.yaml``, ``graph_replay.yaml``) are read, and
their modules imported, on first use (``Calibration.inference_overheads``,
``Calibration.graph_gaps``), from the same directory with the same fallback: a ``perfcast train``
process never reads them (issue 18: a training forecast as a whole process in <= 0.3 s).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cache, cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Protocol, TypeVar

from perfcast.calibration.attention_kernels import (
    ATTENTION_KERNELS_PATH,
    AttentionKernelCalibration,
    load_attention_kernels,
)
from perfcast.calibration.comm_overlap import (
    COMM_OVERLAP_PATH,
    CommOverlapCalibration,
    load_comm_overlap,
)
from perfcast.calibration.forecast_intervals import (
    FORECAST_INTERVALS_PATH,
    ForecastIntervals,
    load_forecast_intervals,
)
from perfcast.calibration.host_launch import (
    HOST_LAUNCH_PATH,
    HostLaunchCalibration,
    load_host_launch,
)
from perfcast.calibration.moe_routing import (
    MOE_ROUTING_PATH,
    MoeRoutingCalibration,
    load_moe_routing,
)
from perfcast.calibration.training_overheads import (
    TRAINING_OVERHEADS_PATH,
    TrainingOverheads,
    load_training_overheads,
)
from perfcast.errors import InputError

if TYPE_CHECKING:
    from perfcast.calibration.graph_replay import GraphReplayCalibration
    from perfcast.calibration.inference_overheads import InferenceOverheads

FILE_NAMES: Final[dict[str, str]] = {
    "training_overheads": TRAINING_OVERHEADS_PATH.name,
    "comm_overlap": COMM_OVERLAP_PATH.name,
    "attention_kernels": ATTENTION_KERNELS_PATH.name,
    "inference_overheads": "inference_overheads.yaml",  # INFERENCE_OVERHEADS_PATH.name (tested)
    "intervals": FORECAST_INTERVALS_PATH.name,
    "host_launch": HOST_LAUNCH_PATH.name,
    "moe_routing": MOE_ROUTING_PATH.name,
    "graph_replay": "graph_replay.yaml",  # GRAPH_REPLAY_PATH.name (tested; module read lazily)
}
"""``Calibration`` field -> file name in a calibration directory."""


class _CarriesKernels(Protocol):
    """What ``Calibration.with_kernels`` needs of a kernel backend: the two derived-kernel
    members of ``kernels.backend.KernelBackend`` (the calibration layer does not import the
    kernels layer above it)."""

    @property
    def attention_kernels(self) -> AttentionKernelCalibration: ...

    def with_attention_kernels(self, kernels: AttentionKernelCalibration) -> Any: ...


_Backend = TypeVar("_Backend", bound=_CarriesKernels)


@dataclass(frozen=True)
class CalibrationStatus:
    """Which calibration entry a forecast used: its GPU generation's own fit, or the pooled
    fit over every generation (``fallback``) because that generation has too few rows."""

    generation: str
    fallback: bool
    stand_ins: tuple[str, ...] | None = None
    """Per-generation constants taken from another generation's fit (``default`` blocks:
    kernel efficiencies, scale-up collective efficiency), see ``estimate.stand_ins``; None
    where the estimator does not assess them (left out of ``to_dict``)."""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"generation": self.generation, "fallback": self.fallback}
        if self.stand_ins is not None:
            out["stand_ins"] = list(self.stand_ins)
        return out

    def note(self) -> str | None:
        """One line for text reports when the pooled fit or a default block stands in."""
        parts = []
        if self.fallback:
            parts.append("the pooled fit over every generation is used")
        if self.stand_ins:
            parts.append(f"{' and '.join(self.stand_ins)} fitted on other GPUs (possibly "
                         "another vendor's) stand in")
        if not parts:
            return None
        return f"no calibration measured on {self.generation} GPUs: {'; '.join(parts)}"


@dataclass(frozen=True)
class Calibration:
    """The fitted calibration files a forecast depends on (see module docstring)."""

    training_overheads: TrainingOverheads
    comm_overlap: CommOverlapCalibration
    attention_kernels: AttentionKernelCalibration
    intervals: ForecastIntervals | None = None
    """80% bands from cross-validated residuals (None: forecasts carry no band)."""
    host_launch: HostLaunchCalibration | None = None
    """Host launch/sync priors (``host_launch.yaml``; sourced, not fitted). None: shipped."""
    moe_routing: MoeRoutingCalibration | None = None
    """Dropless learned-routing imbalance (``moe_routing.yaml``). None: shipped."""
    graph_replay: GraphReplayCalibration | None = None
    """Kernel gap of replayed graphs per vendor (``graph_replay.yaml``). None: read on first use
    (``graph_gaps``) from ``directory``, else shipped."""
    serving_overheads: InferenceOverheads | None = None
    """Per-generation serving overheads (``inference_overheads.yaml``). None: read on first use
    (``inference_overheads``) from ``directory``, else shipped."""
    directory: Path | None = None
    """Directory the files came from (None: the shipped calibration)."""

    def training_status(self, generation: str) -> CalibrationStatus:
        return CalibrationStatus(generation, self.training_overheads.is_fallback(generation))

    def inference_status(self, generation: str) -> CalibrationStatus:
        return CalibrationStatus(generation, self.inference_overheads.uses_default(generation))

    @cached_property
    def inference_overheads(self) -> InferenceOverheads:
        """``serving_overheads`` or, when None, the file in ``directory`` (else the shipped
        one), read and validated on first use."""
        if self.serving_overheads is not None:
            return self.serving_overheads
        from perfcast.calibration.inference_overheads import load_inference_overheads

        return load_inference_overheads(_file(self.directory, "inference_overheads"))

    @property
    def host_launch_priors(self) -> HostLaunchCalibration:
        """``host_launch`` or, when None, the shipped file."""
        return self.host_launch or load_host_launch()

    @property
    def routing(self) -> MoeRoutingCalibration:
        """``moe_routing`` or, when None, the shipped file."""
        return self.moe_routing or load_moe_routing()

    @cached_property
    def graph_gaps(self) -> GraphReplayCalibration:
        """``graph_replay`` or, when None, the file in ``directory`` (else the shipped one),
        read and validated on first use."""
        if self.graph_replay is not None:
            return self.graph_replay
        from perfcast.calibration.graph_replay import load_graph_replay

        return load_graph_replay(_file(self.directory, "graph_replay"))

    def with_kernels(self, backend: _Backend) -> _Backend:
        """``backend`` timing this calibration's derived kernel classes (its
        ``with_attention_kernels``, memoised by identity; ``backend`` itself when they are
        already its own)."""
        if backend.attention_kernels == self.attention_kernels:
            return backend
        return _replace_cached(backend, self.attention_kernels)

    def replace(self, **changes: Any) -> Calibration:
        """A copy with some files replaced (fitting and cross-validation use this)."""
        return replace(self, **changes)


_REPLACED: dict[tuple[int, int], tuple[Any, Any, Any]] = {}
"""(id(backend), id(kernels)) -> (backend, kernels, replaced backend); keeps both alive so
the ids stay theirs. Calibrations are few (the shipped one, a user's, fitting trials)."""
_REPLACED_MAX = 256


def _replace_cached(backend: _Backend, kernels: AttentionKernelCalibration) -> _Backend:
    """``backend.with_attention_kernels(kernels)`` memoised by identity, so a backend's kernel
    memo tables survive between forecasts with the same calibration (backends and
    calibrations are not hashable)."""
    key = (id(backend), id(kernels))
    hit = _REPLACED.get(key)
    if hit is None:
        if len(_REPLACED) >= _REPLACED_MAX:
            _REPLACED.clear()
        hit = _REPLACED[key] = (backend, kernels, backend.with_attention_kernels(kernels))
    return hit[2]


def _file(directory: Path | None, key: str) -> Path | None:
    if directory is None:
        return None
    path = directory / FILE_NAMES[key]
    return path if path.is_file() else None


@cache
def load_calibration(directory: Path | str | None = None) -> Calibration:
    """The calibration in ``directory`` (each missing file: the shipped one); None: shipped.
    The serving-only files are read on first use (module docstring).

    Raises ``InputError`` when ``directory`` is not a directory or holds none of the files.
    """
    if directory is not None:
        directory = Path(directory)
        if not directory.is_dir():
            raise InputError("calibration", str(directory), "not a directory")
        if not any(_file(directory, key) for key in FILE_NAMES):
            raise InputError("calibration", str(directory),
                             f"holds none of {', '.join(sorted(FILE_NAMES.values()))}")
    return Calibration(
        training_overheads=load_training_overheads(_file(directory, "training_overheads")),
        comm_overlap=load_comm_overlap(_file(directory, "comm_overlap")),
        attention_kernels=load_attention_kernels(_file(directory, "attention_kernels")),
        intervals=load_forecast_intervals(_file(directory, "intervals")),
        host_launch=load_host_launch(_file(directory, "host_launch")),
        moe_routing=load_moe_routing(_file(directory, "moe_routing")),
        directory=directory,
    )
