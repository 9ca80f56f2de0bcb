"""Exposed communication after overlap with independent compute, and what overlap costs.

A collective of c seconds runs beside w seconds of independent compute. While both run, the
compute is slowed by s seconds per overlapped second: the collective's kernel holds a share f
of the SMs (``calibration/comm_overlap.yaml``: comm SMs / GPU SMs), so the compute beside it
runs at 1 − f of its speed, s = f/(1 − f) (Rashidi et al. 2021, "Enabling Compute-Communication
Overlap in Distributed Deep Learning Training Platforms", ISCA, §2: communication kernels
contend with compute for SMs and memory bandwidth). The slower of the two streams sets the
time: compute-bound (c ≤ w) the compute ends at w + s·c; comm-bound the step ends at the later
of c and the slowed compute, w·(1 + s):

    exposed = max(c − w, s · min(c, w))

(where w < c < w·(1 + s) the compute is in fact slowed only until c and ends at
w + s·c/(1 + s); the formula takes the upper bound). Only ``hideable_fraction`` of c can
overlap at all; the rest runs after the compute.

Collectives issued on their own stream between kernels — data-parallel gradient reduction and
parameter gathers (DDP bucket hooks, ZeRO, FSDP prefetch) and the context-parallel K/V ring —
lose more of their overlap than the SM share: the host issues them from hooks, a gather must
finish before the layer (or attention step) that consumes it, a reduce-scatter starts only
when its gradients are complete, collectives on one communicator run one at a time, and their
NCCL kernels share SMs, HBM and the PCIe/NIC path with the compute beside them. Their
overlapped seconds cost ``stream_overlap_exposed_fraction`` (s in the formula): one shared
value fitted on the public training measurements jointly with the per-generation overheads
(``perfcast calibrate``, ``perfcast.validate.fit_training``); it is at least the SM-sharing s
of every catalog GPU.
TP overlap decomposed into the GEMMs (``tp_overlap_hidden_fraction``) and EP overlap across
micro-batches (scheduled with explicit SM budgets, DeepSeek-V3 §3.2.1) keep the SM share.

Array-friendly in c and w.
"""

from __future__ import annotations

import numpy as np

from perfcast.arrays import Floats
from perfcast.calibration.comm_overlap import CommOverlapCalibration, load_comm_overlap
from perfcast.specs.hardware import SystemSpec


def compute_slowdown(system: SystemSpec, calibration: CommOverlapCalibration | None = None
                     ) -> float:
    """f/(1 − f): extra compute seconds per second of overlap with a collective."""
    f = (calibration or load_comm_overlap()).comm_sm_fraction(system.gpu.num_sms)
    return f / (1.0 - f)


def exposed_comm_s(comm_s: Floats, window_s: Floats, slowdown: float,
                   hideable_fraction: float = 1.0) -> Floats:
    """Seconds a collective of ``comm_s`` adds beside ``window_s`` of independent compute
    (module docstring); only ``hideable_fraction`` of it can overlap at all (the rest waits
    on data dependencies, e.g. the chunks of a decomposed TP GEMM)."""
    hideable = np.multiply(comm_s, hideable_fraction)
    window = np.maximum(window_s, 0.0)
    overlapped = np.maximum(hideable - window, slowdown * np.minimum(hideable, window))
    return (np.subtract(comm_s, hideable) + overlapped)[()]


def tp_overlap_hideable_fraction(calibration: CommOverlapCalibration | None = None) -> float:
    """Share of TP communication that ``--tp-comm-overlap`` can hide at best."""
    return (calibration or load_comm_overlap()).tp_overlap_hidden_fraction.value


def stream_overlap_slowdown(calibration: CommOverlapCalibration | None = None) -> float:
    """Critical-path seconds per overlapped second of a collective issued on its own stream
    (data-parallel reduction and gathers, the CP K/V ring; module docstring; fitted,
    ``calibration/comm_overlap.yaml``)."""
    return (calibration or load_comm_overlap()).stream_overlap_exposed_fraction.value
