"""Which algorithm and protocol a collective runs with, and its time on a placed group.

Default rule (what NCCL does): among the algorithms NCCL would consider for the collective,
take the (algorithm, protocol) pair with the least predicted time (the ring algorithm's LL
protocol under NCCL's per-generation ``llMaxBw`` ceiling, ``comm.protocols``) — NCCL's tuner evaluates
``ncclTopoGetAlgoTime`` for every enabled algorithm and protocol and keeps the fastest
(``src/graph/tuning.cc``, shared/reference/collectives.md §3). The candidates per collective:

==================== =========================== ============================================
collective           default candidates          why
==================== =========================== ============================================
all-reduce           ring, tree, nvls            NCCL's all-reduce algorithms; NVLS only on
                                                 NVLS systems above min_ranks GPUs (§5b-c),
                                                 NVLSTree across nodes
all-gather,          ring                        NVLS "applies only to all-reduce. AG/RS stay
reduce-scatter                                   on ring" (§8 point 2)
all-to-all           direct                      NCCL all-to-all = grouped send/recv (§6c)
send-recv            p2p                         one transfer
==================== =========================== ============================================

Hierarchical all-reduce / all-gather / reduce-scatter / all-to-all and PXN all-to-all are
not NCCL defaults; force them with ``algorithm=``. Forcing an algorithm still picks its best
protocol. RCCL (AMD) uses the same tuner structure; its systems have no NVLS.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from perfcast.arrays import Floats
from perfcast.calibration.comm_alpha_beta import CommAlphaBetaCalibration
from perfcast.calibration.comm_protocols import CommProtocols, Protocol, load_comm_protocols
from perfcast.comm.algorithms import Algorithm, algorithm_cost
from perfcast.comm.collectives import Collective, bus_bandwidth_factor
from perfcast.comm.protocols import protocol_time_s
from perfcast.comm.topology import GroupTopology, group_topology, tiers_crossed
from perfcast.specs.hardware import SystemSpec

DEFAULT_ALGORITHMS: dict[Collective, tuple[Algorithm, ...]] = {
    Collective.ALL_REDUCE: (Algorithm.RING, Algorithm.TREE, Algorithm.NVLS),
    Collective.ALL_GATHER: (Algorithm.RING,),
    Collective.REDUCE_SCATTER: (Algorithm.RING,),
    Collective.ALL_TO_ALL: (Algorithm.DIRECT,),
    Collective.SEND_RECV: (Algorithm.P2P,),
}


def _candidates(kind: Collective, size_bytes, topo: GroupTopology, system: SystemSpec,
                algorithm: Algorithm | str | None, protocols: CommProtocols
                ) -> list[tuple[Algorithm, Protocol, Floats]]:
    """(algorithm, protocol, seconds) for every candidate pair."""
    algorithms = DEFAULT_ALGORITHMS[kind] if algorithm is None else (Algorithm(algorithm),)
    out = []
    for alg in algorithms:
        cost = algorithm_cost(alg, kind, size_bytes, topo, system, protocols)
        ll_cap = (protocols.ring_ll_max_bus_Bps(system.gpu.generation)
                  if alg is Algorithm.RING else None)
        for protocol in Protocol:
            out.append((alg, protocol, protocol_time_s(cost, topo, protocol, protocols,
                                                       ll_cap)))
    return out


def group_collective_time_s(
    kind: Collective | str,
    size_bytes: Floats,
    system: SystemSpec,
    group_size: Floats,
    stride: Floats = 1,
    algorithm: Algorithm | str | None = None,
    calibration: CommAlphaBetaCalibration | None = None,
    protocols: CommProtocols | None = None,
) -> Floats:
    """Seconds of one ``kind`` collective of ``size_bytes`` over ``group_size`` ranks spaced
    ``stride`` apart, with the default (or forced) algorithm and its best protocol; 0 for a
    group of one. ``size_bytes`` as in ``comm.collectives.collective_time_s``. Array-friendly."""
    kind = Collective(kind)
    protocols = protocols or load_comm_protocols()
    topo = group_topology(system, group_size, stride, calibration)
    times = [t for _, _, t in _candidates(kind, size_bytes, topo, system, algorithm, protocols)]
    best = np.minimum.reduce(np.broadcast_arrays(*times))
    return np.where(np.asarray(topo.num_ranks) > 1, best, 0.0)[()]


@dataclass(frozen=True)
class CollectiveEstimate:
    """One collective on one placed group: time, bandwidths, the algorithm that ran."""

    collective: Collective
    size_bytes: float
    num_ranks: int
    system: str
    algorithm: Algorithm
    protocol: Protocol
    time_s: float
    algbw_Bps: float
    """size / time (nccl-tests algbw)."""
    busbw_Bps: float
    """algbw × the nccl-tests bus factor of the collective."""
    tiers_crossed: tuple[str, ...]
    ranks_per_domain: int
    num_domains: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "collective": self.collective.value, "size_bytes": self.size_bytes,
            "gpus": self.num_ranks, "system": self.system, "algorithm": self.algorithm.value,
            "protocol": self.protocol.value, "time_s": self.time_s,
            "algbw_GBps": self.algbw_Bps / 1e9, "busbw_GBps": self.busbw_Bps / 1e9,
            "tiers_crossed": list(self.tiers_crossed),
            "ranks_per_domain": self.ranks_per_domain, "num_domains": self.num_domains,
        }


def estimate_collective(
    kind: Collective | str,
    size_bytes: float,
    system: SystemSpec,
    group_size: int,
    stride: int = 1,
    algorithm: Algorithm | str | None = None,
) -> CollectiveEstimate:
    """The ``CollectiveEstimate`` of one (scalar) collective; ``InputError`` for an
    algorithm that does not implement ``kind`` or cannot run on this group/system."""
    from perfcast.errors import InputError

    kind = Collective(kind)
    if group_size < 2:
        raise InputError("gpus", group_size, "a collective needs at least 2 GPUs")
    protocols = load_comm_protocols()
    topo = group_topology(system, group_size, stride)
    candidates = _candidates(kind, size_bytes, topo, system, algorithm, protocols)
    alg, protocol, time_s = min(candidates, key=lambda c: float(c[2]))
    time_s = float(time_s)
    if not np.isfinite(time_s):
        raise InputError("algorithm", alg.value,
                         f"cannot run on {group_size} GPUs of system {system.name!r}")
    algbw = size_bytes / time_s
    return CollectiveEstimate(
        collective=kind, size_bytes=float(size_bytes), num_ranks=int(group_size),
        system=system.name, algorithm=alg, protocol=protocol, time_s=time_s,
        algbw_Bps=algbw, busbw_Bps=algbw * float(bus_bandwidth_factor(kind, group_size)),
        tiers_crossed=tiers_crossed(topo), ranks_per_domain=int(topo.ranks_per_domain),
        num_domains=int(topo.num_domains),
    )
