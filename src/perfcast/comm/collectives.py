"""Alpha-beta time of one collective on a flat group of n ranks (ring / pairwise algorithms).

Hockney's model: a message of S bytes costs α + S/B. The ring algorithms of Thakur,
Rabenseifner & Gropp, "Optimization of Collective Communication Operations in MPICH", IJHPCA
19(1), 2005 (doi:10.1177/1094342005051521) give, with B the per-rank unidirectional link
bandwidth (bytes/s) and α the per-step latency (s):

=============== ===================================== ==========================================
collective      time                                  S is
=============== ===================================== ==========================================
all-reduce      2(n−1)/n·S/B + 2(n−1)·α               the buffer on every rank
all-gather      (n−1)/n·S/B + (n−1)·α                 the full, gathered buffer
reduce-scatter  (n−1)/n·S/B + (n−1)·α                 the full buffer before scattering
all-to-all      (n−1)/n·S/B + (n−1)·α (pairwise)      everything one rank sends (own part incl.)
send-recv       S/B + α                               the message
=============== ===================================== ==========================================

The bandwidth factors are those nccl-tests divides out to report bus bandwidth (NVIDIA/
nccl-tests ``doc/PERFORMANCE.md``: busbw = algbw × 2(n−1)/n for all-reduce, (n−1)/n for
all-gather, reduce-scatter and all-to-all, 1 for send-recv), so B here is comparable to a
measured busbw. The reduction's compute term (γ) is neglected: GPUs reduce far faster than
links move bytes. A group of one rank moves nothing: every time is 0 for n = 1.

Every function is array-friendly: arguments broadcast as numpy arrays.
"""

from __future__ import annotations

from enum import StrEnum

import numpy as np

from perfcast.arrays import Floats


class Collective(StrEnum):
    """Collective operations timed by ``collective_time_s``."""

    ALL_REDUCE = "all_reduce"
    ALL_GATHER = "all_gather"
    REDUCE_SCATTER = "reduce_scatter"
    ALL_TO_ALL = "all_to_all"
    SEND_RECV = "send_recv"


def ring_fraction(num_ranks: Floats) -> Floats:
    """(n−1)/n: the share of the buffer each rank sends once around a ring (0 for n = 1)."""
    n = np.asarray(num_ranks, dtype=float)
    return (n - 1.0) / n


def bus_bandwidth_factor(kind: Collective, num_ranks: Floats) -> Floats:
    """busbw/algbw of nccl-tests ``doc/PERFORMANCE.md``: 2(n−1)/n (all-reduce), (n−1)/n
    (all-gather, reduce-scatter, all-to-all), 1 (send-recv). Equals the S/B coefficient of the
    time formulas, so busbw = S·factor/t is the bandwidth B the ring achieved."""
    if kind is Collective.SEND_RECV:
        return np.ones_like(np.asarray(num_ranks, dtype=float))
    scale = 2.0 if kind is Collective.ALL_REDUCE else 1.0
    return scale * ring_fraction(num_ranks)


def all_reduce_time_s(
    size_bytes: Floats, num_ranks: Floats, bandwidth_Bps: Floats, latency_s: Floats
) -> Floats:
    """Ring all-reduce (= reduce-scatter + all-gather): 2(n−1)/n·S/B + 2(n−1)·α, seconds.

    S: bytes of the buffer on each rank. Thakur et al. 2005 (ring allreduce).
    """
    n = np.asarray(num_ranks, dtype=float)
    return 2.0 * ring_fraction(n) * np.divide(size_bytes, bandwidth_Bps) + 2.0 * (n - 1) * latency_s


def all_gather_time_s(
    size_bytes: Floats, num_ranks: Floats, bandwidth_Bps: Floats, latency_s: Floats
) -> Floats:
    """Ring all-gather: (n−1)/n·S/B + (n−1)·α, seconds.

    S: bytes of the full gathered buffer (n shards). Thakur et al. 2005 (ring allgather);
    nccl-tests PERFORMANCE.md (S = sendcount·sizeof·n).
    """
    n = np.asarray(num_ranks, dtype=float)
    return ring_fraction(n) * np.divide(size_bytes, bandwidth_Bps) + (n - 1) * latency_s


def reduce_scatter_time_s(
    size_bytes: Floats, num_ranks: Floats, bandwidth_Bps: Floats, latency_s: Floats
) -> Floats:
    """Ring reduce-scatter: (n−1)/n·S/B + (n−1)·α, seconds (γ term neglected).

    S: bytes of the full buffer on each rank before scattering. Thakur et al. 2005
    (ring/pairwise reduce-scatter); nccl-tests PERFORMANCE.md (S = recvcount·sizeof·n).
    """
    n = np.asarray(num_ranks, dtype=float)
    return ring_fraction(n) * np.divide(size_bytes, bandwidth_Bps) + (n - 1) * latency_s


def all_to_all_time_s(
    size_bytes: Floats, num_ranks: Floats, bandwidth_Bps: Floats, latency_s: Floats
) -> Floats:
    """Pairwise-exchange all-to-all: (n−1)/n·S/B + (n−1)·α, seconds.

    S: bytes one rank sends in total, its own 1/n included (which stays local). Thakur et al.
    2005 (pairwise exchange, n = total bytes per rank); nccl-tests factor (n−1)/n.
    """
    n = np.asarray(num_ranks, dtype=float)
    return ring_fraction(n) * np.divide(size_bytes, bandwidth_Bps) + (n - 1) * latency_s


def send_recv_time_s(
    size_bytes: Floats, num_ranks: Floats, bandwidth_Bps: Floats, latency_s: Floats
) -> Floats:
    """Point-to-point transfer: S/B + α (Hockney), seconds; 0 in a group of one rank.

    S: bytes sent. nccl-tests PERFORMANCE.md: busbw = algbw for send-recv.
    """
    moves = np.minimum(np.asarray(num_ranks, dtype=float) - 1.0, 1.0)  # 0 for n = 1, else 1
    return moves * (np.divide(size_bytes, bandwidth_Bps) + latency_s)


_TIME_FUNCTIONS = {
    Collective.ALL_REDUCE: all_reduce_time_s,
    Collective.ALL_GATHER: all_gather_time_s,
    Collective.REDUCE_SCATTER: reduce_scatter_time_s,
    Collective.ALL_TO_ALL: all_to_all_time_s,
    Collective.SEND_RECV: send_recv_time_s,
}


def collective_time_s(
    kind: Collective | str,
    size_bytes: Floats,
    group_size: Floats,
    bandwidth_Bps: Floats,
    latency_s: Floats,
) -> Floats:
    """Time of one ``kind`` collective over ``group_size`` ranks on links of ``bandwidth_Bps``
    (per rank, unidirectional, already at achievable efficiency) and ``latency_s`` per step,
    seconds. Dispatches to the per-collective formulas above; 0 for a group of one."""
    return _TIME_FUNCTIONS[Collective(kind)](size_bytes, group_size, bandwidth_Bps, latency_s)


def bus_bandwidth_Bps(
    kind: Collective | str, size_bytes: Floats, group_size: Floats, time_s: Floats
) -> Floats:
    """nccl-tests bus bandwidth of a collective that took ``time_s``: S·factor/t, bytes/s."""
    factor = bus_bandwidth_factor(Collective(kind), group_size)
    return np.multiply(size_bytes, factor) / np.asarray(time_s, dtype=float)
