"""What every collective algorithm returns: its bandwidth term and its latency hops.

An algorithm (ring, tree, NVLS, ...) over a placed group (``comm.topology.GroupTopology``) costs

    t = launch + base(family, protocol) + hops·α·hop_scale(protocol) + bandwidth_s / fraction(protocol)

(Hockney α-β per step, with NCCL's protocol constants: shared/reference/collectives.md §3,
``ncclTopoGetAlgoTime``: time = latency·latCount + bytes / bw). An algorithm module supplies
only the physics of its schedule: the seconds its bytes take at Simple-protocol achievable
bandwidth (the slowest link over the whole operation) and how many scale-up and scale-out hops
its critical path pays; ``comm.protocols`` adds the rest and picks the protocol.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from perfcast.arrays import Floats


class Algorithm(StrEnum):
    """Collective algorithms (NCCL names where NCCL has one)."""

    RING = "ring"
    TREE = "tree"
    NVLS = "nvls"
    HIERARCHICAL = "hierarchical"
    DIRECT = "direct"
    PXN = "pxn"
    P2P = "p2p"


class LatencyFamily(StrEnum):
    """Which row of the base-latency table (``comm_protocols.yaml``) an algorithm pays."""

    RING = "ring"
    TREE = "tree"
    NVLS = "nvls"


@dataclass(frozen=True)
class AlgorithmCost:
    """Bandwidth seconds and latency hops of one algorithm on one group (arrays broadcast)."""

    bandwidth_s: Floats
    """Seconds the bytes take at the tiers' achievable Simple-protocol bandwidth (inf where
    the algorithm cannot run on this group)."""
    scale_up_hops: Floats
    """Scale-up steps on the critical path (each pays the scale-up per-hop latency)."""
    scale_out_hops: Floats
    """Scale-out steps on the critical path (each pays the scale-out per-hop latency)."""
    family: LatencyFamily = LatencyFamily.RING
    ring_plateau: bool = False
    """NCCL's multi-node ring latency factor applies (Ring/Simple all-reduce across nodes)."""
