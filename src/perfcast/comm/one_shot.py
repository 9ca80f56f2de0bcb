"""One-shot all-reduce inside a scale-up domain (serving engines' custom all-reduce).

Each of the n ranks writes its buffer into a shared (peer-mapped) region, a flag barrier
signals completion, and every rank reads and sums the n − 1 peer buffers itself: two
scale-up hops of latency and (n − 1)·S bytes received per rank, instead of the ring's
2(n − 1) latency hops (TensorRT-LLM ``AllReduceStrategy.ONESHOT``; vLLM
``custom_all_reduce.cuh`` one-shot kernel, used below 256 KiB-1 MiB). Engines pick whichever
of one-shot and NCCL is faster, so serving times min(one-shot, ring).
"""

from __future__ import annotations

import numpy as np

from perfcast.arrays import Floats
from perfcast.comm.placement import LinkTier, achievable_bandwidth_Bps, num_domains
from perfcast.specs.hardware import SystemSpec

ONE_SHOT_LATENCY_HOPS = 2
"""Write to peers, then the flag barrier: two scale-up hops before the local reduction."""


def one_shot_all_reduce_time_s(size_bytes: Floats, system: SystemSpec, group_size: Floats,
                               stride: Floats = 1) -> Floats:
    """2·α_up + (n − 1)·S/BW_up within one scale-up domain, seconds; inf across domains."""
    n = np.asarray(group_size, dtype=float)
    bandwidth = achievable_bandwidth_Bps(system, LinkTier.SCALE_UP)
    time = ONE_SHOT_LATENCY_HOPS * system.scale_up_latency_s + (n - 1) * np.divide(
        size_bytes, bandwidth)
    inside = np.asarray(num_domains(system, n, stride)) <= 1
    return np.asarray(np.where(inside, time, np.inf))[()]
