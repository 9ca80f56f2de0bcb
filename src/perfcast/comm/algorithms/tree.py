"""NCCL's double binary tree all-reduce: a chain inside each node, two binary trees across nodes.

Sanders, Speck & Träff 2009 ("Two-tree algorithms for full bandwidth broadcast, reduction and
scan", Parallel Computing 35(12)) and NCCL 2.4: reduce up and broadcast down two complementary
trees, each on half the data, so latency grows with log2 of the node count, not linearly.
Bandwidth: NCCL models tree all-reduce as algBw = 0.5 × busBw with busBw capped at 0.92 of
the link (``tuning.cc``, collectives.md §3): every GPU sends 2S through its scale-up port
(reduce up + broadcast down). Across k nodes each node's r NICs carry at least the
bandwidth-optimal 2(k−1)/k·S (S per direction at k = 2, →2S at large k):

    bandwidth_s = max(2S / B_up, 2(k−1)/k·S / (r·B_out)) / 0.92

Latency (``tuning.cc``): base + 2·((r−1)·α_up + ⌈log2 k⌉·α_out).
"""

from __future__ import annotations

import numpy as np

from perfcast.calibration.comm_protocols import CommProtocols
from perfcast.comm.algorithms.base import AlgorithmCost, LatencyFamily
from perfcast.comm.collectives import Collective, ring_fraction
from perfcast.comm.topology import GroupTopology

KINDS = (Collective.ALL_REDUCE,)


def tree_cost(kind: Collective, size_bytes, topo: GroupTopology,
              protocols: CommProtocols) -> AlgorithmCost:
    """``AlgorithmCost`` of a double-binary-tree all-reduce over ``topo``."""
    r, k = (np.asarray(x, dtype=float) for x in (topo.ranks_per_domain, topo.num_domains))
    s = np.asarray(size_bytes, dtype=float)
    intra = 2.0 * s / topo.scale_up_Bps
    inter = 2.0 * ring_fraction(k) * s / (r * np.asarray(topo.scale_out_Bps))
    fraction = protocols.tree_bandwidth_fraction.value
    return AlgorithmCost(
        bandwidth_s=(np.maximum(intra, inter) / fraction)[()],
        scale_up_hops=(2.0 * (r - 1))[()],
        scale_out_hops=(2.0 * np.ceil(np.log2(k)))[()],
        family=LatencyFamily.TREE,
    )
