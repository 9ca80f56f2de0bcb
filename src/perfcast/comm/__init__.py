"""Time of one collective on a network: alpha-beta ring formulas, rank placement, two tiers.

Knows nothing of LLMs: the graph layer says which collective, how many bytes, over which
group; this layer times it.

* ``collective_time_s(kind, size_bytes, group_size, bandwidth_Bps, latency_s)``: flat ring
  (``comm.collectives``), given the link.
* ``group_link(system, group_size, stride)``: the link a flat ring over a placed group uses
  (``comm.placement``); ``achievable_group_link`` applies protocol efficiency.
* ``hierarchical_collective_time_s(kind, size_bytes, system, group_size, stride)``: the
  topology-aware time, intra-domain and inter-domain phases pipelined (``comm.hierarchical``).
"""

from perfcast.comm.collectives import (
    Collective,
    bus_bandwidth_Bps,
    bus_bandwidth_factor,
    collective_time_s,
)
from perfcast.comm.hierarchical import hierarchical_collective_time_s
from perfcast.comm.placement import (
    LinkTier,
    achievable_bandwidth_Bps,
    achievable_group_link,
    group_link,
    num_domains,
    ranks_per_domain,
    within_scale_up,
)

__all__ = [
    "Collective",
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
