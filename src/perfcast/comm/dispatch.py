"""Network bytes of an MoE token dispatch that deduplicates per destination node (DeepEP).

A token routed to k experts spread uniformly over the K scale-up domains (nodes) of the
expert-parallel group reaches each remote node with probability 1 − (1 − 1/K)^k. A plain
all-to-all sends all k copies; a node-deduplicating dispatcher (DeepEP normal kernels,
DeepSeek-V3 report §3.2.2: "each token ... transmitted via IB to the GPUs with the same
in-node index on its target nodes ... then forwarded via NVLink") sends one copy per remote
node. The network volume therefore shrinks by

    dedup = (K − 1)·(1 − (1 − 1/K)^k) / ((K − 1)/K · k) = K·(1 − (1 − 1/K)^k) / k,

e.g. 0.66 for k = 8 over K = 8 nodes (DeepSeek-V3 on 64 GPUs), 0.45 over K = 4. Balanced
routing is assumed (DeepSeek-V3's node-limited routing, at most M = 4 nodes per token, would
lower it further). The NVLink forwarding of the k copies runs pipelined under the network
phase (``comm.algorithms.all_to_all.pxn_cost``) and is not the bottleneck on NVSwitch systems.
"""

from __future__ import annotations

import numpy as np

from perfcast.arrays import Floats


def node_dedup_factor(fanout: Floats, num_domains: Floats) -> Floats:
    """Network bytes with per-node deduplication over bytes without it (module docstring);
    1 for a group inside one domain or a fan-out of one."""
    k = np.asarray(fanout, dtype=float)
    nodes = np.maximum(np.asarray(num_domains, dtype=float), 1.0)
    reached = nodes * (1.0 - (1.0 - 1.0 / nodes) ** k) / k
    return np.where((nodes > 1) & (k > 1), reached, 1.0)[()]
