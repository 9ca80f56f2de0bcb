"""Flash-attention time from its work units: query (forward) or key/value (backward) blocks
of every batch × head, in waves over the SMs; each inner step bound by its matmuls, its
softmax exponentials (special-function units) or its loads; the whole kernel by HBM.

Forward (Dao, *FlashAttention-2*, 2023, Alg. 1; Shah et al., *FlashAttention-3*, 2024):

* the g = h/h_kv query heads sharing a K/V head are packed into the rows of one unit (FA3
  ``PackGQA``, FlashInfer decode): rows = s_q·g per K/V head, a unit holds
  r = min(B_q, ⌈rows/16⌉·16) of them (16 = smallest MMA M); units = b·h_kv·⌈rows/r⌉·k_s
  (k_s = split-KV factor, flash-decoding, tried only while the units fill less than one
  wave); steps per unit = ⌈L/(B_kv·k_s)⌉, L = mean keys per query
  (``counts.attention_keys_per_query``: causal halves it at s_q = s_kv);
* one step: t_mma = 2·r·B_kv·(d_qk + d_v)/(F_sm·η_f); t_exp = r·B_kv/(r_exp·f) on the
  MUFU ('989 TFLOPS of matmul but only 3.9 TFLOPS of exponential' on H100, FA3 §3);
  overlapped as max + (1 − ω)·min (FA3 ping-pong/intra-warpgroup overlap: ω → 1; FA2: ω ≈ 0);
  t_load = B_kv·(d_qk + d_v)·b/B_sm (B_sm: the GEMM model's per-SM load bandwidth);
  step = max(softmax+mma, t_load);
* unit = steps·step + c_unit/f; kernel = max(waves, HBM bytes/(BW·η_hbm)) + t_launch.

Backward (FA2 Alg. 2): units = b·h·⌈s_kv/B_kv⌉, steps = ⌈L_q/B_q⌉ with L_q = mean queries
per key (= L·s_q/s_kv); five GEMMs per step (S = QKᵀ recomputed, dP = dO·Vᵀ, dV += Pᵀ·dO,
dK += dSᵀ·Q, dQ += dS·K): 2·B_q·B_kv·(3·d_qk + 2·d_v) FLOPs (2.5× forward at d_qk = d_v),
one exponential per score, and the dQ accumulation: B_q·d_qk fp32 atomics read-modify-written
in L2 per step (FA2 §3.2). Plus the pre-pass D = rowsum(dO∘O) and the dQ fp32→16-bit
post-pass as memory-bound kernels. Decode (s_q = 1) comes out as a memory-bound pass over the
(paged) KV cache: the HBM floor dominates. Array-friendly; a call whose shapes are all scalars
is memoized (a training estimate times the same few attention shapes many times).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from functools import lru_cache

import numpy as np

from perfcast.arrays import Bools, Floats, all_scalars
from perfcast.calibration.kernel_analytical import AttentionTileModel
from perfcast.kernels.efficiency import memory_time_s
from perfcast.kernels.tiles import (
    ceil_div,
    matrix_clock_Hz,
    per_sm_matrix_flops,
    sm_count,
    wave_quantized_time_s,
)
from perfcast.op_counts import attention_bytes, attention_keys_per_query
from perfcast.specs.dtypes import bytes_per_element
from perfcast.specs.hardware import GPUSpec, Precision

DQ_ACCUMULATOR_BYTES = 4.0
"""dQ is accumulated in fp32 (FA2 ``dq_accum``), 4 B/element."""

MMA_MIN_ROWS = 16
"""Smallest M of a tensor-core MMA (mma.sync m16n8k16, NVIDIA PTX ISA); fewer query rows
are padded to it."""

SPLIT_KV = (1, 2, 4, 8, 16, 32)
"""Split-KV factors of the forward pass (flash-decoding, Dao et al. 2023 blog)."""

ATTENTION_MEMO_SIZE = 1 << 14
"""Scalar attention calls memoized per direction (key: the call's shapes and the rates)."""


def _constant_wave_s(unit_s: Floats) -> Callable[[Floats], Floats]:
    """A wave time that does not depend on how many units are in flight (split-KV decode)."""
    return lambda _active: unit_s


def _overlapped(t_mma: Floats, t_exp: Floats, overlap: float) -> Floats:
    """Matmul and softmax of one step: max + (1 − ω)·min (ω = fraction hidden)."""
    return np.maximum(t_mma, t_exp) + (1.0 - overlap) * np.minimum(t_mma, t_exp)


@dataclass(frozen=True)
class AttentionCall:
    """One flash-attention kernel call: shapes (floats or arrays) and the kernel's setting."""

    batch: Floats
    num_heads: Floats
    num_kv_heads: Floats
    seq_q: Floats
    seq_kv: Floats
    head_dim_qk: Floats
    head_dim_v: Floats
    causal: Bools
    precision: Precision

    def as_scalars(self) -> AttentionCall | None:
        """This call with every shape as a float and ``causal`` as a bool (a memo key that
        does not depend on int/float/numpy types), or None when any field is an array."""
        values = [getattr(self, f.name) for f in fields(self)[:-2]]
        if not all_scalars(*values, self.causal):
            return None
        batch, heads, kv_heads, seq_q, seq_kv, dim_qk, dim_v = (float(v) for v in values)
        return AttentionCall(batch, heads, kv_heads, seq_q, seq_kv, dim_qk, dim_v,
                             bool(self.causal), self.precision)


@dataclass(frozen=True)
class AttentionRates:
    """GPU rates the attention model needs (SI), from the GPU, calibration and HBM/launch."""

    model: AttentionTileModel
    clock_Hz: float
    sms: int
    sm_flops: float
    """Peak matrix FLOP/s of one SM at the sustained clock (before η)."""
    sm_load_Bps: float
    hbm_Bps: float
    """Achievable HBM bytes/s (peak·η_hbm)."""
    launch_overhead_s: float

    @classmethod
    def of(cls, gpu: GPUSpec, precision: Precision, model: AttentionTileModel,
           sm_load_Bps: float, hbm_efficiency: float, launch_overhead_s: float) -> AttentionRates:
        return cls(model, matrix_clock_Hz(gpu), sm_count(gpu),
                   per_sm_matrix_flops(gpu, precision), sm_load_Bps,
                   gpu.hbm_bandwidth_Bps * hbm_efficiency, launch_overhead_s)


def attention_forward_time_s(call: AttentionCall, rates: AttentionRates) -> Floats:
    """One flash-attention forward pass, seconds (formulas: module doc; scalars memoized)."""
    scalar = call.as_scalars()
    return _forward_time_s(call, rates) if scalar is None else _forward_memo(scalar, rates)


def _forward_time_s(call: AttentionCall, rates: AttentionRates) -> Floats:
    model, clock, sms, sm_load_Bps = rates.model, rates.clock_Hz, rates.sms, rates.sm_load_Bps
    batch, num_heads, num_kv_heads = call.batch, call.num_heads, call.num_kv_heads
    seq_q, seq_kv, causal = call.seq_q, call.seq_kv, call.causal
    head_dim_qk, head_dim_v, precision = call.head_dim_qk, call.head_dim_v, call.precision
    bq, bkv, b_in = model.block_q, model.block_kv, bytes_per_element(precision)
    sm_flops = rates.sm_flops * model.mma_efficiency_forward
    keys = attention_keys_per_query(seq_q, seq_kv, causal)
    rows = np.multiply(seq_q, np.divide(num_heads, num_kv_heads))
    rows_per_unit = np.minimum(bq, ceil_div(rows, MMA_MIN_ROWS) * MMA_MIN_ROWS)
    t_mma = 2.0 * rows_per_unit * bkv * np.add(head_dim_qk, head_dim_v) / sm_flops
    t_exp = rows_per_unit * bkv / (model.exp_per_clock_per_sm * clock)
    t_load = bkv * np.add(head_dim_qk, head_dim_v) * b_in / sm_load_Bps
    step = np.maximum(_overlapped(t_mma, t_exp, model.softmax_overlap), t_load)
    base_units = np.multiply(np.multiply(batch, num_kv_heads), ceil_div(rows, rows_per_unit))
    hbm = memory_time_s(
        attention_bytes(batch, num_heads, num_kv_heads, seq_q, seq_kv, head_dim_qk, head_dim_v,
                        False, precision),
        rates.hbm_Bps, 1.0)
    best: Floats = np.inf  # the minimum over the splits below (SPLIT_KV is not empty)
    for split in SPLIT_KV:
        units = base_units * split
        unit_s = ceil_div(keys, bkv * split) * step + model.unit_overhead_cycles / clock
        waves = wave_quantized_time_s(units, sms, _constant_wave_s(unit_s))
        total = np.maximum(waves, hbm)
        if split > 1:
            total = np.where(units <= sms, total, np.inf)
        best = np.minimum(best, total)
    return best + rates.launch_overhead_s


_forward_memo = lru_cache(maxsize=ATTENTION_MEMO_SIZE)(_forward_time_s)


def attention_backward_time_s(call: AttentionCall, rates: AttentionRates) -> Floats:
    """One flash-attention backward pass incl. its pre/post passes, seconds (module doc;
    scalars memoized)."""
    scalar = call.as_scalars()
    return _backward_time_s(call, rates) if scalar is None else _backward_memo(scalar, rates)


def _backward_time_s(call: AttentionCall, rates: AttentionRates) -> Floats:
    model, clock, sms, sm_load_Bps = rates.model, rates.clock_Hz, rates.sms, rates.sm_load_Bps
    batch, num_heads, num_kv_heads = call.batch, call.num_heads, call.num_kv_heads
    seq_q, seq_kv, causal = call.seq_q, call.seq_kv, call.causal
    head_dim_qk, head_dim_v, precision = call.head_dim_qk, call.head_dim_v, call.precision
    bq, bkv, b_in = model.block_q, model.block_kv, bytes_per_element(precision)
    sm_flops = rates.sm_flops * model.mma_efficiency_backward
    queries = attention_keys_per_query(seq_q, seq_kv, causal) * np.divide(seq_q, seq_kv)
    d_qk, d_v = np.asarray(head_dim_qk, dtype=float), np.asarray(head_dim_v, dtype=float)
    t_mma = 2.0 * bq * bkv * (3.0 * d_qk + 2.0 * d_v) / sm_flops
    t_exp = bq * bkv / (model.exp_per_clock_per_sm * clock)
    step_bytes = bq * (d_qk + d_v) * b_in + 2.0 * bq * d_qk * DQ_ACCUMULATOR_BYTES
    t_load = step_bytes / sm_load_Bps
    step = np.maximum(_overlapped(t_mma, t_exp, model.softmax_overlap), t_load)
    units = np.multiply(np.multiply(batch, num_heads), ceil_div(seq_kv, bkv))
    unit_s = ceil_div(queries, bq) * step + model.unit_overhead_cycles / clock
    waves = wave_quantized_time_s(units, sms, lambda _active: unit_s)
    hbm_bytes = attention_bytes(batch, num_heads, num_kv_heads, seq_q, seq_kv, head_dim_qk,
                                head_dim_v, True, precision)
    main = np.maximum(waves, memory_time_s(hbm_bytes, rates.hbm_Bps, 1.0))
    rows = np.multiply(np.multiply(batch, num_heads), seq_q)
    pre_post_bytes = rows * (2.0 * d_v * b_in + d_qk * (DQ_ACCUMULATOR_BYTES + b_in))
    pre_post = memory_time_s(pre_post_bytes, rates.hbm_Bps, 1.0)
    return main + pre_post + 3.0 * rates.launch_overhead_s


_backward_memo = lru_cache(maxsize=ATTENTION_MEMO_SIZE)(_backward_time_s)
