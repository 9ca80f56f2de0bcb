"""Exposed communication after overlap with independent compute, and the SM-sharing cost.

A collective of c seconds that runs beside w seconds of independent compute hides
min(c, w) and exposes max(0, c − w). While it hides, its kernel holds a share f of the SMs
(``calibration/comm_overlap.yaml``: comm SMs / GPU SMs), so the compute beside it runs at
1 − f of its speed and takes f/(1 − f) longer for the overlapped span (Rashidi et al. 2021,
"Enabling Compute-Communication Overlap in Distributed Deep Learning Training Platforms",
ISCA, §2: communication kernels contend with compute for SMs and memory bandwidth):

    exposed = max(0, c − w) + f/(1 − f) · min(c, w)

Data-parallel collectives (DDP / ZeRO gradient reduction, ZeRO-3 / FSDP parameter gathers)
lose more of their overlap than the SM share alone: they are issued by host-side hooks
(autograd bucket hooks, FSDP pre-forward/pre-backward prefetch), a gather must finish before
its layer starts and a reduce-scatter can start only when its layer's (or bucket's) gradients
are complete, collectives on one communicator run one at a time, and their NCCL kernels share
SMs, HBM and the PCIe/NIC path with the compute beside them. Their overlapped seconds cost
``dp_overlap_exposed_fraction`` each (in place of f/(1 − f)): one shared value, fitted on the
public training measurements jointly with the per-generation overheads
(``tools/fit_training_overheads.py``); it is at least the SM-sharing share.

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


def dp_overlap_slowdown(calibration: CommOverlapCalibration | None = None) -> float:
    """Critical-path seconds per overlapped second of a data-parallel collective (module
    docstring; fitted, ``calibration/comm_overlap.yaml``)."""
    return (calibration or load_comm_overlap()).dp_overlap_exposed_fraction.value
