"""All-to-all: direct (pairwise), hierarchical (two-dimensional), and PXN / DeepEP style.

S is everything one rank sends, its own 1/n share included (nccl-tests factor (n−1)/n,
collectives.md §1). A group of n ranks, r per scale-up domain, k domains:

* **direct** (pairwise exchange; NCCL's all-to-all is grouped send/recv, Thakur et al. 2005):
  (r−1)/n·S to domain peers over scale-up and (n−r)/n·S to the rest through the rank's own NIC,
  at once: max((r−1)/n·S/B_up, (n−r)/n·S/B_out); r−1 and n−r steps. NCCL's all-to-all "cannot
  aggregate the bandwidth of multiple NICs" (sjeaugey, nccl-tests #267, §6c): one NIC per rank.
* **hierarchical** (2D all-to-all, e.g. Tutel 2DH, Hwang et al. 2023 §3.2): an all-to-all inside
  the domain, then one across domains between ranks with the same local index; two dependent
  phases: (r−1)/r·S/B_up + (k−1)/k·S/B_out; r−1 and k−1 steps (fewer network messages).
* **pxn** (NCCL PXN, DeepEP normal kernels, DeepSeek-V3 §3.2.2): each token crosses the network
  once to the same-rail GPU of its destination node, then NVLink forwards it; the two stages
  are pipelined: max(((r−1)/n + (n−r)/n·(r−1)/r)·S/B_up, (n−r)/n·S/B_out); k−1 network steps
  and one forwarding step. DeepEP measures 80-94% of the NIC across nodes (§7).
"""

from __future__ import annotations

import numpy as np

from perfcast.comm.algorithms.base import AlgorithmCost, LatencyFamily
from perfcast.comm.collectives import Collective, ring_fraction
from perfcast.comm.topology import GroupTopology

KINDS = (Collective.ALL_TO_ALL,)


def _nrk(topo: GroupTopology):
    return (np.asarray(x, dtype=float) for x in (topo.num_ranks, topo.ranks_per_domain,
                                                 topo.num_domains))


def direct_cost(kind: Collective, size_bytes, topo: GroupTopology) -> AlgorithmCost:
    """Pairwise-exchange all-to-all (module docstring, first bullet)."""
    n, r, _ = _nrk(topo)
    s = np.asarray(size_bytes, dtype=float)
    intra = (r - 1) / n * s / topo.scale_up_Bps
    inter = (n - r) / n * s / np.asarray(topo.scale_out_Bps)
    return AlgorithmCost(np.maximum(intra, inter)[()], (r - 1)[()], (n - r)[()],
                         LatencyFamily.RING)


def hierarchical_all_to_all_cost(kind: Collective, size_bytes, topo: GroupTopology
                                 ) -> AlgorithmCost:
    """Two-phase (intra-domain, then inter-domain) all-to-all (second bullet)."""
    _, r, k = _nrk(topo)
    s = np.asarray(size_bytes, dtype=float)
    intra = ring_fraction(r) * s / topo.scale_up_Bps
    inter = ring_fraction(k) * s / np.asarray(topo.scale_out_Bps)
    return AlgorithmCost((intra + inter)[()], (r - 1)[()], (k - 1)[()], LatencyFamily.RING)


def pxn_cost(kind: Collective, size_bytes, topo: GroupTopology) -> AlgorithmCost:
    """PXN / DeepEP all-to-all: network once per token, NVLink forwarding pipelined (third)."""
    n, r, k = _nrk(topo)
    s = np.asarray(size_bytes, dtype=float)
    forwarded = (n - r) / n * ring_fraction(r)
    intra = ((r - 1) / n + forwarded) * s / topo.scale_up_Bps
    inter = (n - r) / n * s / np.asarray(topo.scale_out_Bps)
    return AlgorithmCost(np.maximum(intra, inter)[()], np.minimum(r - 1, 1.0)[()], (k - 1)[()],
                         LatencyFamily.RING)
