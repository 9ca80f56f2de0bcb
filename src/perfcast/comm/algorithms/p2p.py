"""Point-to-point send/recv: S / B + α on the tier the two ranks cross (Hockney).

Used for pipeline-parallel activations. The pair is in one scale-up domain when the group
fits in one (k = 1), else it crosses the scale-out network through the sender's NIC.
nccl-tests: busbw = algbw for send-recv (collectives.md §1).
"""

from __future__ import annotations

import numpy as np

from perfcast.comm.algorithms.base import AlgorithmCost, LatencyFamily
from perfcast.comm.collectives import Collective
from perfcast.comm.topology import GroupTopology

KINDS = (Collective.SEND_RECV,)


def p2p_cost(kind: Collective, size_bytes, topo: GroupTopology) -> AlgorithmCost:
    """``AlgorithmCost`` of one send/recv between two ranks of the group."""
    k = np.asarray(topo.num_domains, dtype=float)
    s = np.asarray(size_bytes, dtype=float)
    crosses = k > 1
    bandwidth = np.where(crosses, topo.scale_out_Bps, topo.scale_up_Bps)
    return AlgorithmCost((s / bandwidth)[()], np.where(crosses, 0.0, 1.0)[()],
                         np.where(crosses, 1.0, 0.0)[()], LatencyFamily.RING)
