"""Collective time on a two-tier system: inside scale-up domains, then across them.

A group of n ranks placed r per scale-up domain over k domains (``comm.placement``) runs a
collective in two phases, each a ring (``comm.collectives``):

* an intra-domain phase over the r ranks of each domain on the scale-up links, and
* an inter-domain phase over the k domains, where each of the r ranks drives its own NIC on
  a 1/r share of the data (rail-aligned NICs: one per GPU).

NCCL pipelines the phases chunk by chunk (tree and ring algorithms alike), so the bandwidth
terms overlap and the slower phase sets the time, while the latencies add:

    t = max(t_intra_bw, t_inter_bw) + t_intra_latency + t_inter_latency

For all-reduce the inter phase moves 2(k−1)/k·S/r bytes per NIC, which is the stas00 identity
"per-accelerator NIC rate = busbw·(k−1)/(n−1)" (stas00/ml-engineering ``network/README.md``,
"Inter-node speed depends on intra-node speed"; shared/reference/collectives.md §2): a 2×8 H100
all-reduce reaches 15× the per-GPU NIC rate in busbw, not 1×. With r = n (one domain) or r = 1
(one rank per domain) the formulas reduce exactly to the flat ring of ``collective_time_s``.

=============== ============================ =============================== ==================
collective      intra phase (r ranks)        inter phase (k domains, per NIC) steps (α_up, α_out)
=============== ============================ =============================== ==================
all-reduce      2(r−1)/r·S / B_up            2(k−1)/k·(S/r) / B_out          2(r−1), 2(k−1)
all-gather,     (r−1)/r·S / B_up             (k−1)/k·(S/r) / B_out           (r−1), (k−1)
reduce-scatter
all-to-all      (r−1)/n·S / B_up             (n−r)/n·S / B_out               (r−1), (n−r)
send-recv       S / B_up if k = 1            S / B_out if k > 1              1 on the tier used
=============== ============================ =============================== ==================

All arguments broadcast as numpy arrays (``kind`` and ``system`` are scalars).
"""

from __future__ import annotations

import numpy as np

from perfcast.arrays import Floats
from perfcast.calibration.comm_alpha_beta import CommAlphaBetaCalibration
from perfcast.comm.collectives import Collective, collective_time_s, ring_fraction
from perfcast.comm.placement import (
    LinkTier,
    achievable_bandwidth_Bps,
    num_domains,
    ranks_per_domain,
)
from perfcast.specs.hardware import SystemSpec


def _phase_bandwidth_time_s(
    kind: Collective, size_bytes: Floats, n: np.ndarray, r: np.ndarray, k: np.ndarray,
    bw_up: float, bw_out: float,
) -> tuple[Floats, Floats]:
    """(intra, inter) bandwidth terms of the table in the module docstring, seconds."""
    s = np.asarray(size_bytes, dtype=float)
    if kind is Collective.ALL_TO_ALL:
        return (r - 1) / n * s / bw_up, (n - r) / n * s / bw_out
    scale = 2.0 if kind is Collective.ALL_REDUCE else 1.0
    return (scale * ring_fraction(r) * s / bw_up, scale * ring_fraction(k) * (s / r) / bw_out)


def _phase_steps(kind: Collective, n: np.ndarray, r: np.ndarray, k: np.ndarray
                 ) -> tuple[Floats, Floats]:
    """(scale-up steps, scale-out steps) paying latency α_up and α_out."""
    if kind is Collective.ALL_TO_ALL:
        return r - 1, n - r
    scale = 2.0 if kind is Collective.ALL_REDUCE else 1.0
    return scale * (r - 1), scale * (k - 1)


def hierarchical_collective_time_s(
    kind: Collective | str,
    size_bytes: Floats,
    system: SystemSpec,
    group_size: Floats,
    stride: Floats,
    calibration: CommAlphaBetaCalibration | None = None,
) -> Floats:
    """Time of one collective over a placed group (``group_size`` ranks, ``stride`` apart),
    seconds: pipelined intra- and inter-domain ring phases at achievable bandwidths
    (``placement.achievable_bandwidth_Bps``) and the system's per-hop latencies.

    ``size_bytes`` means what it means in ``collective_time_s`` for the same ``kind``.
    """
    kind = Collective(kind)
    n = np.asarray(group_size, dtype=float)
    r = np.asarray(ranks_per_domain(system, n, stride), dtype=float)
    k = np.asarray(num_domains(system, n, stride), dtype=float)
    bw_up = achievable_bandwidth_Bps(system, LinkTier.SCALE_UP, calibration)
    bw_out = achievable_bandwidth_Bps(system, LinkTier.SCALE_OUT, calibration)
    if kind is Collective.SEND_RECV:
        crosses = k > 1
        bandwidth = np.where(crosses, bw_out, bw_up)
        latency = np.where(crosses, system.scale_out_latency_s, system.scale_up_latency_s)
        return np.asarray(collective_time_s(kind, size_bytes, n, bandwidth, latency))[()]
    intra, inter = _phase_bandwidth_time_s(kind, size_bytes, n, r, k, bw_up, bw_out)
    steps_up, steps_out = _phase_steps(kind, n, r, k)
    total = (np.maximum(intra, inter) + np.multiply(steps_up, system.scale_up_latency_s)
             + np.multiply(steps_out, system.scale_out_latency_s))
    return np.asarray(total)[()]
