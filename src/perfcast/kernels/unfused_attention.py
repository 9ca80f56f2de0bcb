"""Unfused (pre-FlashAttention) attention: batched GEMMs plus memory-bound passes over the
b·a·s_q·s_kv score matrix, as Megatron-LM's ``CoreAttention`` ran it before fused kernels.

Forward (Megatron-LM ``CoreAttention.forward``; Korthikanti et al. 2022 §4.1 lists the same
tensors for activation memory): S = Q·Kᵀ (``baddbmm``: m = s_q, n = s_kv, k = d_qk, batch b·a);
``FusedScaleMaskSoftmax`` reads S and writes P (2 + 2 bytes per score, 16-bit); attention
dropout reads P and writes P' and a 1-byte mask (2 + 2 + 1); O = P'·V (``bmm``: m = s_q,
n = d_v, k = s_kv). The causal mask is applied inside the softmax: the full s_q × s_kv product
is computed (no work is skipped, unlike flash attention).

Backward (autograd of the same ops): dP' = dO·Vᵀ (s_q × s_kv × d_v) and dV = P'ᵀ·dO
(s_kv × d_v × s_q); dropout backward reads dP' and the mask and writes dP (2 + 1 + 2); softmax
backward reads P and dP and writes dS (2 + 2 + 2); dQ = dS·K (s_q × d_qk × s_kv) and
dK = dSᵀ·Q (s_kv × d_qk × s_q). Every GEMM and pass goes through the kernel backend, so its
efficiency curves and launch overhead apply. Array-friendly.
"""

from __future__ import annotations

from perfcast.arrays import Floats
from perfcast.specs.dtypes import ACTIVATION_BYTES
from perfcast.specs.hardware import GPUSpec, Precision

SOFTMAX_FORWARD_BYTES = 2 * ACTIVATION_BYTES
"""Read the scores, write the probabilities, bytes per score."""
DROPOUT_FORWARD_BYTES = 2 * ACTIVATION_BYTES + 1
"""Read the probabilities, write the dropped ones and a 1-byte mask, bytes per score."""
SOFTMAX_BACKWARD_BYTES = 3 * ACTIVATION_BYTES
"""Read P and dP, write dS, bytes per score."""
DROPOUT_BACKWARD_BYTES = 2 * ACTIVATION_BYTES + 1
"""Read dP' and the mask, write dP, bytes per score."""


def unfused_attention_time_s(
    backend, gpu: GPUSpec, batch: Floats, num_heads: Floats, seq_q: Floats, seq_kv: Floats,
    head_dim_qk: Floats, head_dim_v: Floats, backward: bool, precision: Precision = "bf16",
    dropout: bool = False,
) -> Floats:
    """One unfused attention forward (or backward) pass on ``backend``, seconds."""
    groups = batch * num_heads
    scores = groups * seq_q * seq_kv
    gemm = backend.gemm_time_s
    if not backward:
        passes = backend.memory_bound_time_s(gpu, SOFTMAX_FORWARD_BYTES * scores)
        if dropout:
            passes = passes + backend.memory_bound_time_s(gpu, DROPOUT_FORWARD_BYTES * scores)
        return (gemm(gpu, seq_q, seq_kv, head_dim_qk, groups, precision) + passes
                + gemm(gpu, seq_q, head_dim_v, seq_kv, groups, precision))
    passes = backend.memory_bound_time_s(gpu, SOFTMAX_BACKWARD_BYTES * scores)
    if dropout:
        passes = passes + backend.memory_bound_time_s(gpu, DROPOUT_BACKWARD_BYTES * scores)
    return (gemm(gpu, seq_q, seq_kv, head_dim_v, groups, precision)
            + gemm(gpu, seq_kv, head_dim_v, seq_q, groups, precision) + passes
            + gemm(gpu, seq_q, head_dim_qk, seq_kv, groups, precision)
            + gemm(gpu, seq_kv, head_dim_qk, seq_q, groups, precision))
