"""Host links of a GPU (PCIe to host memory, NVMe), SI, from ``catalog/data/host_io.yaml``.

Used by offloading: bytes kept in host memory cross PCIe, bytes on disk also cross NVMe, each
time they are used (Sheng et al., FlexGen, 2023 §4 cost model).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from perfcast.catalog.files import DATA_DIR, read_mapping
from perfcast.specs.hardware import GPUSpec
from perfcast.units import GB

HOST_IO_FILE = DATA_DIR / "host_io.yaml"


@dataclass(frozen=True)
class HostIO:
    """Unidirectional host-link bandwidths available to one GPU, bytes/s."""

    pcie_bandwidth_Bps: float
    """Host link (PCIe, or NVLink-C2C on Grace-attached GPUs), one direction."""
    nvme_bandwidth_Bps: float
    source: str


@cache
def _table() -> dict:
    return read_mapping(HOST_IO_FILE)


def host_io_for(gpu: GPUSpec) -> HostIO:
    """The host links of ``gpu`` (its own entry under ``gpus``, else its generation's, else
    ``default``)."""
    data = _table()
    generations = data["generations"]
    row = data.get("gpus", {}).get(gpu.name) or generations.get(gpu.generation,
                                                                 generations["default"])
    defaults = data["defaults"]
    return HostIO(
        pcie_bandwidth_Bps=float(row["pcie_GBps"]) * GB,
        nvme_bandwidth_Bps=float(defaults["nvme_GBps"]) * GB,
        source=f"{row['source'].strip()} | NVMe: {defaults['nvme_source'].strip()}",
    )
