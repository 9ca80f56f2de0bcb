"""CPU activation offloading: stored activations of some layers live in host memory.

Megatron-Core ``cpu_offloading`` with ``cpu_offloading_num_layers`` N (frameworks.md §1.3;
MLM:MPC L458-480; Megatron-Bridge perf configs "offl N" on GB200, §2.5): in the forward each of
the first N layers' saved activations is copied to host memory after the layer, and copied back
before that layer's backward. The copies run on the copy engines (DMA) over the host link —
PCIe, or NVLink-C2C on Grace-attached GPUs (``catalog/data/host_io.yaml``) — beside the
compute of the stage's other layers, so only what the stage's forward (resp. backward) compute
cannot cover is exposed: ``schedule.overlap.exposed_comm_s`` with no SM share (copy engines do
not occupy the streaming multiprocessors). Megatron requires pp = 1 and no recompute.
"""

from __future__ import annotations

import numpy as np

from perfcast.arrays import Floats
from perfcast.catalog.host_io import host_io_for
from perfcast.schedule.overlap import exposed_comm_s
from perfcast.specs.hardware import SystemSpec
from perfcast.specs.strategy import Strategy

STAGING_LAYERS = 1
"""Layers whose activations stay on the GPU while being copied out or back (double buffer)."""


def offloaded_layers(strategy: Strategy, num_layers: int):
    """Layers of a stage with ``num_layers`` layers whose activations go to host memory, net
    of the one being copied (it still occupies GPU memory). Array-friendly (the bulk search
    passes arrays of ``cpu_offload_activation_layers``)."""
    n = getattr(strategy, "cpu_offload_activation_layers", 0)
    # max(min(n, L) - staged, 0) in integer arithmetic that keeps Python ints Python ints
    # (a forecast's report stays plain floats) and works on arrays: min(a, b) = (a + b -
    # |a - b|) / 2, max(x, 0) = (x + |x|) / 2, both exact in integers (the sums are even).
    moved = (n + num_layers - abs(n - num_layers)) // 2 - STAGING_LAYERS
    return (moved + abs(moved)) // 2


def offload_exposed_s(offloaded_bytes: Floats, system: SystemSpec, forward_window_s: Floats,
                      backward_window_s: Floats) -> Floats:
    """Exposed seconds per micro-batch of copying ``offloaded_bytes`` to host in the forward and
    back in the backward, each beside that pass's compute (module docstring). The host link is
    the GPU's (``catalog.host_io``: PCIe, or NVLink-C2C on Grace-attached GPUs).
    Array-friendly."""
    copy_s = np.maximum(offloaded_bytes, 0.0) / host_io_for(system.gpu).pcie_bandwidth_Bps
    return (exposed_comm_s(copy_s, forward_window_s, 0.0)
            + exposed_comm_s(copy_s, backward_window_s, 0.0))
