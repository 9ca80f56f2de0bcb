"""Ring collectives over all n ranks of a group, as NCCL runs them across nodes.

Thakur, Rabenseifner & Gropp 2005 (IJHPCA 19(1)): ring all-reduce moves 2(n−1)/n·S out of every
rank, all-gather / reduce-scatter (n−1)/n·S (S = the full buffer; nccl-tests factors,
collectives.md §1-2). NCCL builds one ring per channel through the r GPUs of each node and then
out through a NIC to the next node, channels spread over the r NICs: each NIC carries the
ring's per-edge volume for its channels, 2(n−1)/n·S/r for all-reduce, and each GPU's NVLink
carries its (r−1)/r share of intra-node edges. So with V = 2(n−1)/n·S (all-reduce) or
(n−1)/n·S:

    bandwidth_s = max((r−1)/r·V / B_up, V / (r·B_out))      (k > 1)
    bandwidth_s = V / B_up                                   (k = 1)

i.e. a multi-node ring runs at busbw = r·B_out, the node's NICs (collectives.md §6c: 248×8 H200,
8 HCAs per node, busbw ~350 GB/s). Steps: 2(n−1) (all-reduce) or n−1, of which 2(k−1) / k−1
cross the network (NCCL ``tuning.cc`` nInterSteps, collectives.md §3).
"""

from __future__ import annotations

import numpy as np

from perfcast.comm.algorithms.base import AlgorithmCost, LatencyFamily
from perfcast.comm.collectives import Collective, bus_bandwidth_factor
from perfcast.comm.topology import GroupTopology

KINDS = (Collective.ALL_REDUCE, Collective.ALL_GATHER, Collective.REDUCE_SCATTER)


def ring_cost(kind: Collective, size_bytes, topo: GroupTopology) -> AlgorithmCost:
    """``AlgorithmCost`` of a ring ``kind`` over ``topo`` (see the module docstring)."""
    n, r, k = (np.asarray(x, dtype=float) for x in (topo.num_ranks, topo.ranks_per_domain,
                                                      topo.num_domains))
    volume = np.multiply(size_bytes, bus_bandwidth_factor(kind, n))
    intra = np.where(k > 1, (r - 1) / r, 1.0) * volume / topo.scale_up_Bps
    inter = np.where(k > 1, volume / (r * np.asarray(topo.scale_out_Bps)), 0.0)
    scale = 2.0 if kind is Collective.ALL_REDUCE else 1.0
    out_hops = scale * (k - 1)
    return AlgorithmCost(
        bandwidth_s=np.maximum(intra, inter)[()],
        scale_up_hops=(scale * (n - 1) - out_hops)[()],
        scale_out_hops=out_hops[()],
        family=LatencyFamily.RING,
        ring_plateau=kind is Collective.ALL_REDUCE,
    )
