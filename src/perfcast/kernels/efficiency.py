"""Achievable-efficiency curves and the roofline time of one kernel, with explicit parameters.

The parameters (``eff_max``, half-saturation points, HBM efficiency, launch overhead) are
calibration data (``perfcast.calibration.kernel_roofline``); these functions only hold the
formulas, so the backend and the fitting tool (``tools/fit_kernel_roofline.py``) share them.
All functions are array-friendly (arithmetic and numpy ufuncs only).
"""

from __future__ import annotations

import numpy as np

from perfcast.arrays import Floats


def saturation(x: Floats, x_half: Floats) -> Floats:
    """Hyperbolic saturation x/(x + x_half): 0 at x = 0, 1/2 at x = x_half, → 1 as x → ∞.

    Dimensionless; x and x_half share a unit. x_half = 0 gives 1 everywhere (x > 0).
    """
    x = np.asarray(x, dtype=float)
    return x / (x + x_half)


def gemm_efficiency(flops: Floats, eff_max: Floats, flops_half: Floats) -> Floats:
    """Achieved fraction of peak FLOP/s of a GEMM of ``flops`` FLOPs: eff_max·F/(F + F_half).

    Equivalent to a fixed ramp time: F/(P·eff) = F/(P·eff_max) + F_half/(P·eff_max), i.e.
    every GEMM pays t_ramp = F_half/(P·eff_max) seconds of pipeline fill, prologue/epilogue and
    partial last wave before it streams at eff_max of peak P. This is why small GEMMs run far
    below peak (torchao ``roofline_utils.py``: a constant 78% 'undercounts ~2x when M,K,N <=
    1k'). eff_max and F_half are fitted per GPU generation (``tools/fit_kernel_roofline.py``).
    """
    return eff_max * saturation(flops, flops_half)


def attention_efficiency(
    keys_per_query: Floats,
    head_dim: Floats,
    eff_max: Floats,
    keys_half: Floats,
    head_dim_half: Floats,
) -> Floats:
    """Achieved fraction of peak FLOP/s of flash attention: eff_max·s(L, L_half)·s(d, d_half).

    Two amortisations, each a ``saturation``:

    * L = mean keys per query (``counts.attention_keys_per_query``): each query tile pays a
      fixed prologue/epilogue (load Q, final rescale, write O) amortised over the L/B_kv
      key-value blocks it streams (Dao, FlashAttention-2, 2023, §3.1; the measured TFLOP/s rise
      with sequence length and saturate past ~4k, FA3 paper Fig. 5).
    * d = (d_qk + d_v)/2: per score element the matmuls do 2·(d_qk + d_v) FLOPs while the
      softmax does a fixed number of exponentials on the much slower special-function units
      ('989 TFLOPS of matmul but only 3.9 TFLOPS of exponential' on H100: Shah et al.,
      FlashAttention-3, 2024, §3), so larger heads run closer to the matmul peak.
    """
    return eff_max * saturation(keys_per_query, keys_half) * saturation(head_dim, head_dim_half)


def compute_time_s(flops: Floats, peak_flops: Floats, efficiency: Floats) -> Floats:
    """Time to execute ``flops`` FLOPs at ``efficiency`` of ``peak_flops`` FLOP/s, seconds."""
    return np.asarray(flops, dtype=float) / (np.multiply(peak_flops, efficiency))


def memory_time_s(
    num_bytes: Floats, hbm_bandwidth_Bps: Floats, hbm_efficiency: Floats
) -> Floats:
    """Time to move ``num_bytes`` bytes at ``hbm_efficiency`` of peak HBM bytes/s, seconds."""
    return np.asarray(num_bytes, dtype=float) / np.multiply(hbm_bandwidth_Bps, hbm_efficiency)


def roofline_time_s(
    flops: Floats,
    num_bytes: Floats,
    peak_flops: Floats,
    compute_efficiency: Floats,
    hbm_bandwidth_Bps: Floats,
    hbm_efficiency: Floats,
    launch_overhead_s: Floats,
) -> Floats:
    """Roofline kernel time: max(compute time, memory time) + launch overhead, seconds.

    t = max(F/(P·eff_c), B/(BW·eff_m)) + t_launch: the kernel is bound by whichever of its
    FLOPs or its compulsory bytes takes longer at achievable rates (Williams, Waterman,
    Patterson, *Roofline*, CACM 2009), plus a fixed per-kernel launch/scheduling gap
    (torchao ``roofline_utils.py``: ``KERNEL_LAUNCH_OVERHEAD_SEC`` = 2 µs on H100).
    """
    compute = compute_time_s(flops, peak_flops, compute_efficiency)
    memory = memory_time_s(num_bytes, hbm_bandwidth_Bps, hbm_efficiency)
    return np.maximum(compute, memory) + launch_overhead_s


def gemm_roofline_time_s(
    flops: Floats,
    num_bytes: Floats,
    peak_flops: Floats,
    hbm_bandwidth_Bps: Floats,
    eff_max: Floats,
    flops_half: Floats,
    hbm_efficiency: Floats,
    launch_overhead_s: Floats,
) -> Floats:
    """GEMM time: ``roofline_time_s`` with compute efficiency ``gemm_efficiency(flops)``, s."""
    efficiency = gemm_efficiency(flops, eff_max, flops_half)
    return roofline_time_s(
        flops, num_bytes, peak_flops, efficiency, hbm_bandwidth_Bps, hbm_efficiency,
        launch_overhead_s,
    )


def attention_roofline_time_s(
    flops: Floats,
    num_bytes: Floats,
    keys_per_query: Floats,
    head_dim: Floats,
    peak_flops: Floats,
    hbm_bandwidth_Bps: Floats,
    eff_max: Floats,
    keys_half: Floats,
    head_dim_half: Floats,
    hbm_efficiency: Floats,
    launch_overhead_s: Floats,
) -> Floats:
    """Flash-attention time: ``roofline_time_s`` with ``attention_efficiency``, seconds."""
    efficiency = attention_efficiency(keys_per_query, head_dim, eff_max, keys_half, head_dim_half)
    return roofline_time_s(
        flops, num_bytes, peak_flops, efficiency, hbm_bandwidth_Bps, hbm_efficiency,
        launch_overhead_s,
    )
