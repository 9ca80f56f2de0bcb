"""Tiles, work units and waves: how a kernel's independent pieces of work fill the SMs.

A GPU kernel splits its output into work units (GEMM output tiles, flash-attention query
blocks); the hardware runs at most one unit per SM (or SM pair) at a time, so units execute in
*waves* of ``slots`` units, and a last, partial wave costs nearly a full wave (NVIDIA, *Matrix
Multiplication Background User's Guide*, 'Wave Quantization'). Per-SM rates come from the
GPU's datasheet peak divided over its SMs at the clock it sustains under load.
All functions are array-friendly (arithmetic and numpy ufuncs only).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from perfcast.arrays import Floats
from perfcast.errors import InputError
from perfcast.specs.hardware import GPUSpec, Precision


def ceil_div(a: Floats, b: Floats) -> Floats:
    """⌈a/b⌉ for positive a, b (floats or arrays)."""
    return np.ceil(np.divide(a, b))


def num_tiles(m: Floats, n: Floats, tile_m: Floats, tile_n: Floats, batch: Floats = 1) -> Floats:
    """Output tiles of ``batch`` GEMMs C[m,n]: ⌈m/T_m⌉·⌈n/T_n⌉·batch (partial tiles count whole)."""
    return ceil_div(m, tile_m) * ceil_div(n, tile_n) * np.asarray(batch, dtype=float)


def num_waves(units: Floats, slots: Floats) -> Floats:
    """Waves of ``units`` work units over ``slots`` concurrent slots: ⌈units/slots⌉."""
    return ceil_div(units, slots)


def wave_quantized_time_s(
    units: Floats, slots: Floats, wave_time_s: Callable[[Floats], Floats]
) -> Floats:
    """Time of ``units`` units run in waves of ``slots``: ⌊u/S⌋·t(S) + [r > 0]·t(r), r = u mod S.

    ``wave_time_s(active)`` is the time of one wave with ``active`` units in flight (shared
    resources such as L2 bandwidth make a partial wave slightly faster, never proportionally).
    """
    units = np.asarray(units, dtype=float)
    full = np.floor(units / slots)
    rest = units - full * slots
    partial = np.where(rest > 0, wave_time_s(np.maximum(rest, 1.0)), 0.0)
    return full * wave_time_s(np.asarray(slots, dtype=float)) + partial


def sliding_window_keys_visited(window: Floats, seq_kv: Floats, block_q: Floats,
                                block_kv: Floats) -> Floats:
    """Keys per query a tiled flash-attention kernel processes for a causal sliding window of
    ``window`` keys (the query itself and the ``window − 1`` before it).

    A query block of B_q rows needs keys [q₀ − (w − 1), q₀ + B_q − 1]; the kernel visits whole
    key blocks of B_kv, masking the keys outside the window inside them. FlashAttention-2
    ``flash_fwd_kernel.h`` (``Is_local``): n_block_min = ⌊(m·B_q − w_left)/B_kv⌋, n_block_max =
    ⌈(m + 1)·B_q/B_kv⌉, so a block-aligned query block visits B_q/B_kv + ⌈(w − 1)/B_kv⌉ key
    blocks, K = (B_q/B_kv + ⌈(w − 1)/B_kv⌉)·B_kv keys (at most ``seq_kv``) — a 128-token window
    with 128×128 tiles processes 256 keys per query block, twice the window. The first query
    blocks have fewer keys before them; averaged over s = ``seq_kv`` queries (causal, like
    ``graph.flops``' w·(1 − w/2s)): K·(1 − K/2s) keys per query, s/2 when K = s (full causal).
    """
    blocks = ceil_div(block_q, block_kv) + ceil_div(np.maximum(np.subtract(window, 1), 0),
                                                    block_kv)
    keys = np.minimum(blocks * block_kv, seq_kv)
    return keys * (1 - keys / (2 * np.asarray(seq_kv, dtype=float)))


def sm_count(gpu: GPUSpec) -> int:
    """SMs (NVIDIA) or CUs (AMD) of ``gpu``; raises ``ValueError`` naming the GPU if unknown."""
    if gpu.num_sms is None:
        raise InputError("gpu", gpu.name, "has no num_sms in the catalog; the tile model needs it")
    return gpu.num_sms


def per_sm_matrix_flops(gpu: GPUSpec, precision: Precision) -> float:
    """Dense matrix FLOP/s of one SM at the sustained clock: ``sustained_matrix_flops``/SMs."""
    return gpu.sustained_matrix_flops(precision) / sm_count(gpu)


def matrix_clock_Hz(gpu: GPUSpec) -> float:
    """Clock that converts per-clock rates to per-second ones; raises if the catalog has none."""
    clock = gpu.matrix_clock_Hz
    if clock is None:
        raise InputError("gpu", gpu.name, "has no clock in the catalog; the tile model needs it")
    return clock
