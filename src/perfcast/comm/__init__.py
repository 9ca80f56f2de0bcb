"""Time of one collective on a network: alpha-beta ring formulas, rank placement, two tiers.

Knows nothing of LLMs: the graph layer says which collective, how many bytes, over which
group; this layer times it.

* ``collective_time_s(kind, size_bytes, group_size, bandwidth_Bps, latency_s)``: flat ring
  (``comm.collectives``), given the link.
* ``group_link(system, group_size, stride)``: the link a flat ring over a placed group uses
  (``comm.placement``); ``achievable_group_link`` applies protocol efficiency.
* ``group_topology(system, group_size, stride)``: the tiers a placed group crosses and the
  bandwidth and latency it gets on each (``comm.topology``: NVSwitch, xGMI mesh, NICs, pods).
* algorithms (``comm.algorithms``: ring, tree, nvls, hierarchical, direct, pxn, p2p), one per
  module, and NCCL protocols (``comm.protocols``: LL, LL128, Simple).
* ``group_collective_time_s(kind, size_bytes, system, group_size, stride, algorithm=None)``:
  the time with the algorithm and protocol NCCL would pick (``comm.select``);
  ``estimate_collective`` returns a typed ``CollectiveEstimate`` (algbw, busbw, algorithm).
* ``hierarchical_collective_time_s``: plain α-β two-level time, no protocol or launch cost.
"""

from perfcast.comm.algorithms import Algorithm, supported_algorithms
from perfcast.comm.algorithms.hierarchical import hierarchical_collective_time_s
from perfcast.comm.collectives import (
    Collective,
    bus_bandwidth_Bps,
    bus_bandwidth_factor,
    collective_time_s,
)
from perfcast.comm.placement import (
    LinkTier,
    achievable_bandwidth_Bps,
    achievable_group_link,
    group_link,
    num_domains,
    ranks_per_domain,
    within_scale_up,
)
from perfcast.comm.select import (
    DEFAULT_ALGORITHMS,
    CollectiveEstimate,
    estimate_collective,
    group_collective_time_s,
)
from perfcast.comm.topology import GroupTopology, group_topology, tiers_crossed

__all__ = [
    "DEFAULT_ALGORITHMS",
    "Algorithm",
    "Collective",
    "CollectiveEstimate",
    "GroupTopology",
    "estimate_collective",
    "group_collective_time_s",
    "group_topology",
    "supported_algorithms",
    "tiers_crossed",
    "LinkTier",
    "achievable_bandwidth_Bps",
    "achievable_group_link",
    "bus_bandwidth_Bps",
    "bus_bandwidth_factor",
    "collective_time_s",
    "group_link",
    "hierarchical_collective_time_s",
    "num_domains",
    "ranks_per_domain",
    "within_scale_up",
]
