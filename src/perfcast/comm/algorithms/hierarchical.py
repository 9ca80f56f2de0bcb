"""Hierarchical (two-level) collectives: inside scale-up domains, then across them.

Reduce-scatter inside each domain, the collective across domains on each rank's 1/r share,
all-gather inside each domain (Thakur et al. 2005 two-level schemes; Horovod / BlueConnect
hierarchical all-reduce; Jia et al. 2018 "Highly scalable deep learning training system with
mixed-precision", §3.3). A group of n ranks placed r per domain over k domains
(``comm.placement``): each of the r ranks drives its own NIC on a 1/r share of the data. The
phases are pipelined chunk by chunk, so the slower one sets the bandwidth time while their
steps add up:

=============== ============================ ================================ ================
collective      intra phase (r ranks)        inter phase (k domains, per NIC) hops (up, out)
=============== ============================ ================================ ================
all-reduce      2(r−1)/r·S / B_up            2(k−1)/k·(S/r) / B_out           2(r−1), 2(k−1)
all-gather,     (r−1)/r·S / B_up             (k−1)/k·(S/r) / B_out            (r−1), (k−1)
reduce-scatter
=============== ============================ ================================ ================

For all-reduce the inter phase moves 2(k−1)/k·S/r bytes per NIC: stas00's identity "per-
accelerator NIC rate = busbw·(k−1)/(n−1)" (stas00/ml-engineering ``network/README.md``;
collectives.md §2). With r = n or r = 1 it reduces exactly to the flat ring.

``hierarchical_collective_time_s`` is the plain α-β time of the default-free algorithm per
kind (this one for all-reduce / all-gather / reduce-scatter, direct all-to-all, point-to-point):
bandwidth seconds plus hops × per-hop latency, no protocol or launch cost.
"""

from __future__ import annotations

import numpy as np

from perfcast.arrays import Floats
from perfcast.calibration.comm_alpha_beta import CommAlphaBetaCalibration
from perfcast.comm.algorithms.base import AlgorithmCost, LatencyFamily
from perfcast.comm.collectives import Collective, ring_fraction
from perfcast.comm.topology import GroupTopology, group_topology
from perfcast.specs.hardware import SystemSpec

KINDS = (Collective.ALL_REDUCE, Collective.ALL_GATHER, Collective.REDUCE_SCATTER)


def hierarchical_cost(kind: Collective, size_bytes, topo: GroupTopology) -> AlgorithmCost:
    """``AlgorithmCost`` of the two-level ``kind`` (table in the module docstring)."""
    r, k = (np.asarray(x, dtype=float) for x in (topo.ranks_per_domain, topo.num_domains))
    s = np.asarray(size_bytes, dtype=float)
    scale = 2.0 if kind is Collective.ALL_REDUCE else 1.0
    intra = scale * ring_fraction(r) * s / topo.scale_up_Bps
    inter = scale * ring_fraction(k) * (s / r) / np.asarray(topo.scale_out_Bps)
    return AlgorithmCost(
        bandwidth_s=np.maximum(intra, inter)[()],
        scale_up_hops=(scale * (r - 1))[()],
        scale_out_hops=(scale * (k - 1))[()],
        family=LatencyFamily.RING,
    )


def alpha_beta_time_s(cost: AlgorithmCost, topo: GroupTopology) -> Floats:
    """Plain α-β seconds of ``cost``: bandwidth_s + hops·α on each tier (Hockney)."""
    return (np.asarray(cost.bandwidth_s)
            + np.multiply(cost.scale_up_hops, topo.scale_up_latency_s)
            + np.multiply(cost.scale_out_hops, topo.scale_out_latency_s))[()]


def hierarchical_collective_time_s(
    kind: Collective | str,
    size_bytes: Floats,
    system: SystemSpec,
    group_size: Floats,
    stride: Floats,
    calibration: CommAlphaBetaCalibration | None = None,
) -> Floats:
    """Plain α-β seconds of one collective over a placed group (``group_size`` ranks,
    ``stride`` apart): two-level for all-reduce / all-gather / reduce-scatter, direct for
    all-to-all, point-to-point for send-recv. ``size_bytes`` as in ``collective_time_s``."""
    from perfcast.comm.algorithms.all_to_all import direct_cost
    from perfcast.comm.algorithms.p2p import p2p_cost

    kind = Collective(kind)
    topo = group_topology(system, group_size, stride, calibration)
    if kind is Collective.ALL_TO_ALL:
        cost = direct_cost(kind, size_bytes, topo)
    elif kind is Collective.SEND_RECV:
        cost = p2p_cost(kind, size_bytes, topo)
    else:
        cost = hierarchical_cost(kind, size_bytes, topo)
    return np.where(np.asarray(topo.num_ranks) > 1, alpha_beta_time_s(cost, topo), 0.0)[()]
