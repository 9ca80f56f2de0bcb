"""MoE token dispatch beyond NCCL's all-to-all: DeepEP's normal and low-latency kernels.

**Normal kernels: network bytes deduplicated per destination node.**

A token routed to k experts spread uniformly over the K scale-up domains (nodes) of the
expert-parallel group reaches each remote node with probability 1 − (1 − 1/K)^k. A plain
all-to-all sends all k copies; a node-deduplicating dispatcher (DeepEP normal kernels,
DeepSeek-V3 report §3.2.2: "each token ... transmitted via IB to the GPUs with the same
in-node index on its target nodes ... then forwarded via NVLink") sends one copy per remote
node. The network volume therefore shrinks by

    dedup = (K − 1)·(1 − (1 − 1/K)^k) / ((K − 1)/K · k) = K·(1 − (1 − 1/K)^k) / k,

e.g. 0.66 for k = 8 over K = 8 nodes, 0.45 over K = 4, with balanced routing.

Group-limited routing (DeepSeek-V2 §2.2.2 device-limited, DeepSeek-V3 report §2.1.2
"Node-Limited Routing": "each token will be sent to at most M nodes"; HF ``n_group`` G and
``topk_group`` M) confines a token's k experts to M of G contiguous expert groups. Experts sit
on the EP ranks in order, so the groups tile the K nodes: with G ≤ K a group spans K/G nodes and
a token reaches K' = M·K/G of them; with G > K a node holds g = G/K groups, and M groups drawn
without replacement hit K' = K·(1 − Π_{i<M} (G − g − i)/(G − i)) nodes on average. Spreading the
k copies over those K' nodes gives the same form with K' for K:

    dedup = K'·(1 − (1 − 1/K')^k) / k,

0.45 for DeepSeek-V3 on 64 GPUs (G = K = 8, M = 4, so K' = 4: at most 4 nodes) instead of
0.66. The NVLink forwarding of the k copies runs pipelined under the network phase
(``comm.algorithms.all_to_all.pxn_cost``) and is not the bottleneck on NVSwitch systems.

**HybridEP** (Megatron-Core ``--moe-flex-dispatcher-backend hybridep``, frameworks.md §1.4,
§2.6: the dispatcher NVIDIA's recipes pick on GB200/GB300 NVL72 and, since Bridge v0.5, on
H100) deduplicates the same way per NVLink domain and forwards inside the domain over NVLink,
multi-node NVLink included; DeepEP's normal kernels are modelled alike (the GB200 DeepSeek-V3
rows measure DeepEP inside the NVL72 domain faster than NCCL's all-to-all). The volume one
rank sends per tier is ``tier_bytes``: plain all-to-all sends (r − 1)/n·S over NVLink and
(n − r)/n·S over the network; the deduplicating dispatchers send dedup·(n − r)/n·S over the
network and forward ((r − 1)/n + (n − r)/n·(r − 1)/r)·S over NVLink (``comm.algorithms.
all_to_all.pxn_cost``). Inside one NVLink domain (k = 1) nothing crosses the network.

**Low-latency kernels** (DeepEP README, "low-latency kernels with pure RDMA ... for inference
decoding"; shared/reference/collectives.md section 7): every copy of a token goes straight to
its expert's rank over the sender's NIC (RDMA even inside a node, no NVLink forwarding, no node
deduplication), in one pass with no NCCL protocol steps. A rank that sends S bytes (all k
copies of its tokens, as the README counts them) takes

    t = max(α_out, S / (B_NIC · f(EP)))

with f the README's achieved "RDMA BW" over the line rate (0.92 at EP 8 to 0.78 at EP 128,
``calibration/deepep_low_latency.yaml``) and α_out the system's one-way scale-out latency as a
floor for tiny batches (the README latencies at 128 tokens are bandwidth-bound: its bandwidth
column is bytes over latency).
"""

from __future__ import annotations

import numpy as np

from perfcast.arrays import Floats
from perfcast.calibration.deepep_low_latency import (
    DeepEPLowLatencyCalibration,
    load_deepep_low_latency,
)
from perfcast.specs.hardware import SystemSpec


def reachable_domains(num_domains: Floats, groups: int = 1, group_topk: int = 1) -> Floats:
    """K': domains (nodes) a token's experts can sit on under group-limited routing (module
    docstring); K when routing is unlimited (group_topk = groups)."""
    nodes = np.maximum(np.asarray(num_domains, dtype=float), 1.0)
    if group_topk >= groups:
        return nodes[()]
    spanned = group_topk * nodes / groups
    per_node = groups / nodes
    missed = np.ones_like(nodes)
    for i in range(group_topk):
        missed = missed * np.maximum(groups - per_node - i, 0.0) / (groups - i)
    return np.where(groups <= nodes, spanned, nodes * (1.0 - missed))[()]


def node_dedup_factor(fanout: Floats, num_domains: Floats, groups: int = 1,
                      group_topk: int = 1) -> Floats:
    """Network bytes with per-node deduplication over bytes without it (module docstring);
    1 for a group inside one domain or a fan-out of one."""
    k = np.asarray(fanout, dtype=float)
    nodes = np.maximum(np.asarray(num_domains, dtype=float), 1.0)
    reach = np.maximum(reachable_domains(nodes, groups, group_topk), 1.0)
    reached = reach * (1.0 - (1.0 - 1.0 / reach) ** k) / k
    return np.where((nodes > 1) & (k > 1), reached, 1.0)[()]


def tier_bytes(dispatcher: str, size_bytes: Floats, num_ranks: Floats, ranks_per_domain: Floats,
               fanout: Floats = 1, groups: int = 1, group_topk: int = 1) -> tuple[Floats, Floats]:
    """(NVLink bytes, network bytes) one rank sends for a dispatch of ``size_bytes`` (all k
    copies of its tokens) over ``num_ranks`` ranks with ``ranks_per_domain`` per NVLink domain
    (module docstring). 'alltoall' is NCCL's pairwise exchange; 'deepep' / 'hybridep'
    deduplicate per domain and forward over NVLink."""
    s = np.asarray(size_bytes, dtype=float)
    n = np.asarray(num_ranks, dtype=float)
    r = np.minimum(np.asarray(ranks_per_domain, dtype=float), n)
    if dispatcher == "alltoall":
        return ((r - 1) / n * s)[()], ((n - r) / n * s)[()]
    if dispatcher not in ("deepep", "hybridep"):
        raise ValueError(f"dispatcher={dispatcher!r}: tier volumes are defined for 'alltoall', "
                         "'deepep' and 'hybridep'")
    dedup = node_dedup_factor(fanout, np.ceil(n / r), groups, group_topk)
    forwarded = (n - r) / n * (r - 1) / r
    return (((r - 1) / n + forwarded) * s)[()], ((n - r) / n * s * dedup)[()]


def low_latency_all_to_all_time_s(size_bytes: Floats, system: SystemSpec, group_size: Floats,
                                  calibration: DeepEPLowLatencyCalibration | None = None
                                  ) -> Floats:
    """Seconds of one DeepEP low-latency dispatch or combine in which a rank sends
    ``size_bytes`` (module docstring); 0 for a group of one. Array-friendly."""
    cal = calibration or load_deepep_low_latency()
    bandwidth = system.scale_out_bandwidth_Bps * cal.fraction(group_size)
    seconds = np.maximum(system.scale_out_latency_s, np.asarray(size_bytes, dtype=float) / bandwidth)
    return np.where(np.asarray(group_size) > 1, seconds, 0.0)[()]
