"""NVLink SHARP (NVLS) all-reduce: the NVSwitch reduces, each GPU sends and receives S once.

With in-network reduction every GPU writes its S bytes into the switch, which reduces them,
and reads the S-byte result back (multimem load-reduce / store): time S / B_nvls whatever the
GPU count, so busbw = 2(n−1)/n·algbw rises with n above the link rate (collectives.md §1
caveat, §5b: H200 algbw 259-270 GB/s from 5 to 8 GPUs). B_nvls = NVLink per GPU × NVLS
efficiency of the generation (``comm_protocols.yaml``, measured 8-GPU H200 / B200). NCCL picks
it above ``min_ranks`` GPUs on NVSwitch gen3+ systems (``SystemSpec.nvls``), for all-reduce
only, Simple protocol only, base latency 25 µs (``tuning.cc``, §3).

Across nodes NCCL runs NVLSTree: NVLS inside each node, a tree between nodes on each GPU's 1/r
share (latency base + 2·log2(k)·α_out, §3), bandwidth-optimal inter-node volume
2(k−1)/k·S/r per NIC:

    bandwidth_s = max(S / B_nvls, 2(k−1)/k·S / (r·B_out))
"""

from __future__ import annotations

import numpy as np

from perfcast.calibration.comm_protocols import CommProtocols
from perfcast.comm.algorithms.base import AlgorithmCost, LatencyFamily
from perfcast.comm.collectives import Collective, ring_fraction
from perfcast.comm.topology import GroupTopology
from perfcast.specs.hardware import SystemSpec

KINDS = (Collective.ALL_REDUCE,)


def nvls_bandwidth_Bps(system: SystemSpec, protocols: CommProtocols) -> float | None:
    """Per-GPU NVLS bandwidth (NVLink × efficiency), B/s; None where NVLS is unavailable."""
    params = protocols.nvls_for(system.gpu.generation)
    if not system.nvls or params is None:
        return None
    return system.scale_up_bandwidth_Bps * params.efficiency


def nvls_cost(kind: Collective, size_bytes, topo: GroupTopology, system: SystemSpec,
              protocols: CommProtocols) -> AlgorithmCost:
    """``AlgorithmCost`` of NVLS / NVLSTree all-reduce; infinite where it cannot run."""
    r, k = (np.asarray(x, dtype=float) for x in (topo.ranks_per_domain, topo.num_domains))
    s = np.asarray(size_bytes, dtype=float)
    bandwidth = nvls_bandwidth_Bps(system, protocols)
    params = protocols.nvls_for(system.gpu.generation)
    if bandwidth is None or params is None:  # bandwidth is None whenever params is
        return AlgorithmCost(np.full_like(r * s, np.inf)[()], 0.0, 0.0, LatencyFamily.NVLS)
    min_ranks = params.min_ranks
    intra = np.where(r >= min_ranks, s / bandwidth, np.inf)
    inter = 2.0 * ring_fraction(k) * s / (r * np.asarray(topo.scale_out_Bps))
    return AlgorithmCost(
        bandwidth_s=np.maximum(intra, inter)[()],
        scale_up_hops=np.zeros_like(r)[()],
        scale_out_hops=(2.0 * np.ceil(np.log2(k)))[()],
        family=LatencyFamily.NVLS,
    )
