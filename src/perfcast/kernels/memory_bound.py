"""Memory-bound kernels: HBM bytes of element-wise, norm, softmax, loss and optimizer kernels,
fused or not, and their time.

A memory-bound kernel's time is t_launch + bytes/(BW·η_hbm) (Williams et al., *Roofline*,
CACM 2009, left of the ridge point). What differs between kernels is only the bytes: each
reads ``reads`` and writes ``writes`` tensors of ``elements`` elements. Fusing a chain of
element-wise kernels (torch.compile / Triton, Apex fused kernels) keeps the intermediates in
registers: the fused kernel reads the chain's external inputs once and writes its final
outputs once, and pays one launch instead of one per kernel (those bytes:
``perfcast.op_counts.fused_chain_bytes``, which the operator graph counts too). Array-friendly.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import numpy as np

from perfcast.arrays import Floats
from perfcast.kernels.efficiency import memory_time_s

TENSORS_READ_WRITTEN: Final[dict[str, tuple[float, float]]] = {
    "rmsnorm": (1.0, 1.0),
    "layernorm": (1.0, 1.0),
    "residual_add": (2.0, 1.0),
    "gelu": (1.0, 1.0),
    "swiglu": (2.0, 1.0),
    "rotary": (1.0, 1.0),
    "softmax": (1.0, 1.0),
    "cross_entropy": (1.0, 1.0),
    "dropout": (1.0, 1.5),
}
"""(tensors read, tensors written) per element of each forward kernel: a norm reads x and
writes y (the weight vector is negligible); a residual add reads two; SwiGLU (Shazeer 2020)
reads gate and up and writes their product; RoPE (Su et al. 2021) rewrites Q/K in place;
softmax and cross-entropy (fused log-softmax + NLL, Megatron ``vocab_parallel_cross_entropy``)
read logits and write probabilities/gradients; dropout writes y plus a 1-byte mask (½ of a
16-bit tensor: sbh bytes against 2sbh, Korthikanti et al. 2022 §4.1)."""


def kernel_bytes(kernel: str, elements: Floats, bytes_per_element: float = 2.0) -> Floats:
    """HBM bytes of one unfused ``kernel`` (a ``TENSORS_READ_WRITTEN`` key) over ``elements``."""
    reads, writes = TENSORS_READ_WRITTEN[kernel]
    return np.multiply(elements, (reads + writes) * bytes_per_element)


def unfused_chain_bytes(
    kernels: Sequence[str], elements: Floats, bytes_per_element: float = 2.0
) -> Floats:
    """Bytes of a chain of element-wise kernels run one by one: the sum of their bytes."""
    return sum(kernel_bytes(k, elements, bytes_per_element) for k in kernels)


def memory_bound_kernels_time_s(
    bytes_moved: Floats, hbm_bandwidth_Bps: float, hbm_efficiency: float,
    launch_overhead_s: float, num_kernels: Floats = 1,
) -> Floats:
    """Time of ``num_kernels`` launches moving ``bytes_moved`` in total:
    bytes/(BW·η_hbm) + kernels·t_launch, seconds."""
    return (memory_time_s(bytes_moved, hbm_bandwidth_Bps, hbm_efficiency)
            + np.multiply(num_kernels, launch_overhead_s))
