"""FLOPs and HBM bytes of one kernel: GEMM, flash attention, fused element-wise chains, and element
sizes.

These are exact operation counts (no hardware, no model): ``graph`` counts its operators with
them and every kernel backend (roofline, analytical, measured) times the same counts; they sit
below both layers so that ``graph`` never imports ``kernels`` (DESIGN.md: data flows one way).
All functions are array-friendly: shapes may be floats or numpy arrays, and only arithmetic and
numpy ufuncs are used.
"""

from __future__ import annotations

from typing import Final

import numpy as np

from perfcast.arrays import Bools, Floats
from perfcast.specs.dtypes import bytes_per_element
from perfcast.specs.hardware import Precision

OUTPUT_BYTES_MIN: Final[float] = 2.0
"""GEMM outputs are at least 16-bit: FP8/FP4 GEMMs write BF16 (DeepGEMM README: 'fp8 in, bf16
out'; cuBLASLt FP8 matmul has a BF16/FP16 D matrix)."""

ATTENTION_BACKWARD_FLOP_RATIO: Final[float] = 2.5
"""Backward/forward FLOP ratio of flash attention: five GEMMs (S=QK^T recomputed, dV, dP, dQ,
dK) against two in the forward pass (Dao, FlashAttention-2, 2023; ``benchmarks/
benchmark_flash_attention.py``: ``bwd = 2.5 * fwd``)."""


def _f64(x: Floats) -> Floats:
    """``x`` as float64: counts of large shapes overflow int64 (2·m·n·k > 9.2e18 for
    m = n = k = 2^21), float64 keeps them finite and exact to 2^53."""
    return np.asarray(x, dtype=np.float64)


def gemm_flops(m: Floats, n: Floats, k: Floats, batch: Floats = 1) -> Floats:
    """FLOPs of ``batch`` GEMMs C[m,n] = A[m,k]·B[k,n]: 2·m·n·k·batch.

    Each of the m·n outputs is a k-long dot product of k fused multiply-adds, 2 FLOPs each
    (NVIDIA, *Matrix Multiplication Background User's Guide*, §2.1).
    """
    return 2.0 * np.multiply(np.multiply(_f64(m), n), np.multiply(_f64(k), batch))


def gemm_bytes(
    m: Floats, n: Floats, k: Floats, batch: Floats = 1, precision: Precision = "bf16"
) -> Floats:
    """Compulsory HBM traffic of ``batch`` GEMMs, bytes: read A and B once, write C once.

    bytes = batch·((m·k + k·n)·s_in + m·n·s_out), s_in = bytes/element of ``precision``,
    s_out = max(s_in, 2) (``OUTPUT_BYTES_MIN``). Each of the ``batch`` GEMMs has its own B (a
    grouped/MoE GEMM). Re-reads forced by a finite L2 are the tile model's business, not this
    count's (Williams, Waterman, Patterson, *Roofline*, CACM 2009: compulsory traffic).
    """
    s_in = bytes_per_element(precision)
    s_out = max(s_in, OUTPUT_BYTES_MIN)
    m, k = _f64(m), _f64(k)
    per_gemm = (np.multiply(m, k) + np.multiply(k, n)) * s_in + np.multiply(m, n) * s_out
    return np.multiply(batch, per_gemm)


def causal_fraction(seq_q: Floats, seq_kv: Floats) -> Floats:
    """Fraction of the seq_q×seq_kv score matrix a bottom-right-aligned causal mask keeps.

    Query i (of seq_q, the last seq_q positions of seq_kv) sees seq_kv − seq_q + i + 1 keys;
    summed in the continuum limit this is seq_q·seq_kv − seq_q²/2, so the fraction is
    1 − seq_q/(2·seq_kv): exactly 1/2 when seq_q == seq_kv (the FlashAttention benchmark
    convention, ``flops // (2 if causal else 1)``) and → 1 for decode (seq_q = 1). Mask
    alignment per FlashAttention ≥ 2.1 (bottom-right). seq_q > seq_kv is clipped to 1/2.
    """
    return 1.0 - 0.5 * np.minimum(seq_q, seq_kv) / np.asarray(seq_kv, dtype=float)


def causal_factor(seq_q: Floats, seq_kv: Floats, causal: Bools) -> Floats:
    """``causal_fraction`` where ``causal`` (a bool or a bool array) is true, else 1."""
    return np.where(causal, causal_fraction(seq_q, seq_kv), 1.0)


def attention_keys_per_query(
    seq_q: Floats, seq_kv: Floats, causal: Bools
) -> Floats:
    """Mean number of keys each query attends to: seq_kv·``causal_factor``."""
    return np.multiply(seq_kv, causal_factor(seq_q, seq_kv, causal))


def attention_forward_flops(
    batch: Floats,
    num_heads: Floats,
    seq_q: Floats,
    seq_kv: Floats,
    head_dim_qk: Floats,
    head_dim_v: Floats,
    causal: Bools,
) -> Floats:
    """Matmul FLOPs of one flash-attention forward: 2·b·h·sq·skv·(d_qk + d_v)·f_causal.

    Two GEMMs per head, S = Q·K^T (2·sq·skv·d_qk) and O = P·V (2·sq·skv·d_v); softmax
    exponentials are not counted (FlashAttention-2 benchmark convention, Dao 2023).
    f_causal = ``causal_factor`` (``causal_fraction`` if ``causal``, else 1; bool or bool array).
    """
    pairs = np.multiply(np.multiply(_f64(batch), num_heads), np.multiply(_f64(seq_q), seq_kv))
    return 2.0 * pairs * np.add(head_dim_qk, head_dim_v) * causal_factor(seq_q, seq_kv, causal)


def attention_flops(
    batch: Floats,
    num_heads: Floats,
    seq_q: Floats,
    seq_kv: Floats,
    head_dim_qk: Floats,
    head_dim_v: Floats,
    causal: Bools,
    backward: bool,
) -> Floats:
    """Forward FLOPs (``attention_forward_flops``), times ``ATTENTION_BACKWARD_FLOP_RATIO`` (2.5)
    for the backward pass."""
    flops = attention_forward_flops(
        batch, num_heads, seq_q, seq_kv, head_dim_qk, head_dim_v, causal
    )
    return flops * ATTENTION_BACKWARD_FLOP_RATIO if backward else flops


def attention_bytes(
    batch: Floats,
    num_heads: Floats,
    num_kv_heads: Floats,
    seq_q: Floats,
    seq_kv: Floats,
    head_dim_qk: Floats,
    head_dim_v: Floats,
    backward: bool,
    precision: Precision,
) -> Floats:
    """Compulsory HBM traffic of flash attention, bytes (the score matrix never reaches HBM).

    Forward reads Q (b·h·sq·d_qk), K (b·h_kv·skv·d_qk), V (b·h_kv·skv·d_v) and writes
    O (b·h·sq·d_v). Backward reads Q, K, V, O, dO and writes dQ, dK, dV: twice the forward
    traffic (Dao et al., FlashAttention, 2022, Algorithm 4). Element size from ``precision``.
    """
    q_and_o = np.multiply(np.multiply(_f64(batch), num_heads), seq_q) * np.add(head_dim_qk, head_dim_v)
    k_and_v = np.multiply(np.multiply(_f64(batch), num_kv_heads), seq_kv) * np.add(
        head_dim_qk, head_dim_v
    )
    forward = (q_and_o + k_and_v) * bytes_per_element(precision)
    return forward * 2.0 if backward else forward


def fused_chain_bytes(
    external_inputs: float, final_outputs: float, elements: Floats, bytes_per_element: float = 2.0
) -> Floats:
    """Bytes of the same chain fused into one kernel: external inputs read once, final
    outputs written once, (inputs + outputs)·elements·bytes."""
    return np.multiply(elements, (external_inputs + final_outputs) * bytes_per_element)
