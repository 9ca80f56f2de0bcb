"""Time of an algorithm under one NCCL protocol (LL, LL128, Simple): latency + size / bandwidth.

NCCL's cost model (``ncclTopoGetAlgoTime``, ``src/graph/tuning.cc``; shared/reference/
collectives.md §3): time = latency + bytes / bw, per algorithm and protocol. LL halves the
bandwidth for the lowest hop latency, LL128 keeps 92% of it at a middle latency, Simple has
the full bandwidth and the largest latency; so small messages go LL, large ones Simple, and
bus bandwidth rises with message size as the fixed costs amortize (§5b H200 sweep). With
``AlgorithmCost`` c (``comm.algorithms.base``) on group topology g:

    t = launch + base[family][P] + ρ·(c.up_hops·α_up·s_up[P] + c.out_hops·α_out·s_out[P])
        + c.bandwidth_s / f[P]

where ρ = 1.4 for a multi-node Ring/Simple all-reduce (NCCL's "plateau effect of ring"), else
1, and launch is the measured host-side cost of one collective (``comm_protocols.yaml``).

Ring LL inside one node also has NCCL's per-generation ceiling (``tuning.cc``: Ring LL busBw =
min(llMaxBw, 0.5·busBw), llMaxBw 87.7 / 141 / 282 GB/s on Ampere / Hopper / Blackwell, §3).
For a single-node ring c.bandwidth_s = V / B_up (V = busbw volume), so the LL bandwidth term is

    max(c.bandwidth_s / 0.5, c.bandwidth_s·B_up / llMaxBw)

and Tree LL runs at busBw / 3.8 (``tuning.cc``, §3) instead of 0.5·busBw: the tree's Simple
term c.bandwidth_s carries its 0.92 cap, so its LL term is c.bandwidth_s·0.92·3.8.
"""

from __future__ import annotations

import numpy as np

from perfcast.arrays import Floats
from perfcast.calibration.comm_protocols import CommProtocols, Protocol
from perfcast.comm.algorithms.base import AlgorithmCost, LatencyFamily
from perfcast.comm.topology import GroupTopology


def protocol_time_s(cost: AlgorithmCost, topo: GroupTopology, protocol: Protocol,
                    protocols: CommProtocols, ll_max_bus_Bps: float | None = None) -> Floats:
    """Seconds of ``cost`` under ``protocol`` (module docstring); inf where the algorithm
    does not run that protocol. ``ll_max_bus_Bps``: NCCL's single-node Ring LL ceiling
    (pass it for the ring algorithm only; None = no ceiling)."""
    base = protocols.base_latency_s(cost.family.value, protocol)
    if base is None:
        return np.full_like(np.asarray(cost.bandwidth_s, dtype=float), np.inf)[()]
    p = protocols.protocols[protocol]
    hops = (np.multiply(cost.scale_up_hops, np.multiply(topo.scale_up_latency_s,
                                                        p.scale_up_hop_scale))
            + np.multiply(cost.scale_out_hops, np.multiply(topo.scale_out_latency_s,
                                                           p.scale_out_hop_scale)))
    if cost.ring_plateau and protocol is Protocol.SIMPLE:
        factor = protocols.ring_multi_node_latency_factor.value
        hops = hops * np.where(np.asarray(topo.num_domains) > 1, factor, 1.0)
    bandwidth_s = np.asarray(cost.bandwidth_s, dtype=float) / p.bandwidth_fraction
    if protocol is Protocol.LL and cost.family is LatencyFamily.TREE:
        bandwidth_s = np.asarray(cost.bandwidth_s, dtype=float) * (
            protocols.tree_bandwidth_fraction.value
            * protocols.tree_ll_bus_bandwidth_divisor.value)
    if protocol is Protocol.LL and ll_max_bus_Bps is not None:
        capped_s = np.multiply(cost.bandwidth_s, topo.scale_up_Bps) / ll_max_bus_Bps
        single_node = np.asarray(topo.num_domains) == 1
        bandwidth_s = np.where(single_node, np.maximum(bandwidth_s, capped_s), bandwidth_s)
    return (protocols.launch_overhead_s + base + hops + bandwidth_s)[()]
