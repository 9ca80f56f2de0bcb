"""Loader and typed schema of ``comm_protocols.yaml``: NCCL protocol and algorithm constants.

Protocols (LL, LL128, Simple) trade latency for bandwidth; algorithms (ring, tree, NVLS) have
their own base latency. Values are NCCL's tuning model (``src/graph/tuning.cc``, transcribed in
shared/reference/collectives.md §3) and measured NVLS bandwidth (§5). Microseconds in the file,
seconds here (converted once, at load).
"""

from __future__ import annotations

from enum import StrEnum
from functools import cache
from pathlib import Path
from typing import Final

from pydantic import BaseModel, ConfigDict, Field

from perfcast.calibration._files import CALIBRATION_DIR, load_yaml_model
from perfcast.specs.hardware import Generation

COMM_PROTOCOLS_PATH: Final[Path] = CALIBRATION_DIR / "comm_protocols.yaml"
US: Final[float] = 1e-6
"""Seconds per microsecond."""


class Protocol(StrEnum):
    """NCCL wire protocols: low latency (LL), LL128, and Simple (full bandwidth)."""

    LL = "ll"
    LL128 = "ll128"
    SIMPLE = "simple"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class SourcedValue(_Frozen):
    value: float = Field(ge=0, description="The value (unit in the key name).")
    source: str = Field(description="Where it comes from.")


class ProtocolParams(_Frozen):
    """Bandwidth and per-hop latency of one protocol relative to Simple."""

    bandwidth_fraction: float = Field(gt=0, le=1, description="Share of the Simple bandwidth.")
    scale_up_hop_scale: float = Field(gt=0, description="Scale-up hop latency / Simple's.")
    scale_out_hop_scale: float = Field(gt=0, description="Scale-out hop latency / Simple's.")
    source: str


class BaseLatencies(_Frozen):
    """Base latency per algorithm and protocol, microseconds (absent = protocol unsupported)."""

    ring: dict[Protocol, float]
    tree: dict[Protocol, float]
    nvls: dict[Protocol, float]
    source: str


class NvlsParams(_Frozen):
    """NVLink SHARP all-reduce of one GPU generation."""

    efficiency: float = Field(gt=0, le=1, description="NVLS algbw / per-GPU NVLink bandwidth.")
    min_ranks: int = Field(gt=1, description="Fewest GPUs for which NCCL picks NVLS.")
    source: str


class RingLlCap(_Frozen):
    """NCCL's per-generation ceiling on Ring LL bus bandwidth (``llMaxBw``, one node)."""

    per_generation: dict[Generation, float] = Field(
        description="Ceiling per GPU generation, GB/s of nccl-tests busbw (1e9 B/s).")
    source: str


class CommProtocols(_Frozen):
    """Everything in ``comm_protocols.yaml``."""

    reference: str
    launch_overhead_us: SourcedValue
    protocols: dict[Protocol, ProtocolParams]
    base_latency_us: BaseLatencies
    ring_ll_max_bus_bandwidth_GBps: RingLlCap
    ring_multi_node_latency_factor: SourcedValue
    tree_bandwidth_fraction: SourcedValue
    tree_ll_bus_bandwidth_divisor: SourcedValue
    nvls: dict[Generation, NvlsParams]

    @property
    def launch_overhead_s(self) -> float:
        """Fixed cost of launching one collective, seconds."""
        return self.launch_overhead_us.value * US

    def base_latency_s(self, algorithm: str, protocol: Protocol) -> float | None:
        """Base latency of ``algorithm`` ('ring', 'tree', 'nvls') under ``protocol``, seconds;
        None when the algorithm does not run that protocol."""
        table: dict[Protocol, float] = getattr(self.base_latency_us, algorithm)
        value = table.get(protocol)
        return None if value is None else value * US

    def ring_ll_max_bus_Bps(self, generation: Generation) -> float | None:
        """NCCL's single-node Ring LL bus-bandwidth ceiling of ``generation``, B/s; None when
        the reference gives none (then LL runs at 0.5 x the Simple bus bandwidth only)."""
        value = self.ring_ll_max_bus_bandwidth_GBps.per_generation.get(generation)
        return None if value is None else value * 1e9

    def nvls_for(self, generation: Generation) -> NvlsParams | None:
        """NVLS parameters of ``generation``; None when it has no measured NVLS."""
        return self.nvls.get(generation)


@cache
def _load_shipped() -> CommProtocols:
    return load_yaml_model(CommProtocols, COMM_PROTOCOLS_PATH)


def load_comm_protocols(path: Path | None = None) -> CommProtocols:
    """The protocol calibration in ``path``; the shipped file (cached) when None."""
    if path is None:
        return _load_shipped()
    return load_yaml_model(CommProtocols, path)
