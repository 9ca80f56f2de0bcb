"""Activation bytes a layer keeps under torchtitan per-op SAC (``op_sac``), per micro-batch.

Under per-op selective activation checkpointing (``graph.op_sac``; frameworks.md §3) a
checkpointed block keeps, for its backward, only its input and the outputs of the ops its
policy saves; everything else is rebuilt by re-running the block's forward, which returns the
saved outputs instead of recomputing them (PyTorch ``create_selective_checkpoint_contexts``).
Per token, in 16-bit activations:

    layer input                        2·h            (/t with sequence parallelism)
    saved mm outputs (1st, 3rd, ...)   2·out_width    (/t; row-parallel wo/w2: 2·h per rank,
                                                      a partial sum before the reduce-scatter)
    SDPA output and log-sum-exp        2·a·d_v + 4·a  (/t; the s² scores without flash)
    TP reduce-scatter outputs (SP)     2·2·h/t        (``reduce_scatter_tensor`` is saved)
    routed experts (MoE)               2·k·(in + h)   (grouped GEMM outputs, saved; /t)

For Llama 3 8B (h 4096, 32 heads of 128, 8 KV heads, f 14,336) that is 2·(h + a·d + g·d + f
+ h) + a·d_v·2 + 4·a = 63.6 kB per token against ~140 kB with nothing recomputed. The saved
mm outputs stay 16-bit under FP8 training (the GEMM writes bf16). Array-friendly in s and b.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from perfcast.graph.op_sac import op_sac_saved
from perfcast.memory.activations import (
    ACT_BYTES,
    ActivationOptions,
    _attention_core_terms,
    layer_activation_bytes,
)
from perfcast.specs.model import ModelSpec


def _sdpa_output_terms(model: ModelSpec, s, b):
    """Bytes of the attention output a·d_v per token (saved by op-SAC with the SDPA op)."""
    v_dim = (model.v_head_dim or model.kv_channels) if model.is_mla else model.kv_channels
    return ACT_BYTES * s * b * model.num_attention_heads * v_dim


def _routed_expert_terms(model: ModelSpec, s, b):
    """Routed experts' grouped-GEMM outputs, k copies per token: in-projection (gate and up
    when gated) and out-projection (h)."""
    gates = 2 if model.is_gated_mlp else 1
    width = gates * model.expert_intermediate_size + model.hidden_size
    return ACT_BYTES * s * b * model.num_experts_per_tok * width


def op_sac_layer_bytes(model: ModelSpec, s, b, opts: ActivationOptions, moe_layer=False):
    """Bytes per GPU one layer keeps for backward under op-SAC (see module docstring)."""
    t = opts.tp
    h = model.hidden_size
    seq_div = t if opts.sequence_parallel else 1
    replicated = ACT_BYTES * s * b * h / seq_div
    multi = np.greater(t, 1)  # array-friendly in tp (the bulk search passes arrays)
    if opts.sequence_parallel:
        replicated = replicated + np.where(multi, 2 * ACT_BYTES * s * b * h / t, 0.0)
    sharded = _sdpa_output_terms(model, s, b) + _attention_core_terms(
        model, s, b, opts.flash_attention)
    partial_sums = 0 * s
    for mm in op_sac_saved(model, moe_layer):
        out = ACT_BYTES * s * b * mm.out_width
        if mm.row_parallel:
            partial_sums = partial_sums + np.where(multi, out, 0.0)
            sharded = sharded + np.where(multi, 0.0, out)
        else:
            sharded = sharded + out
    if moe_layer:
        sharded = sharded + _routed_expert_terms(model, s, b)
    return replicated + partial_sums + sharded / t


def op_sac_working_bytes(model: ModelSpec, s, b, opts: ActivationOptions, moe_layer=False):
    """Extra peak in the backward: the recomputed tensors of one layer, live together while
    its backward runs (the layer's full activation set minus what op-SAC kept)."""
    whole = layer_activation_bytes(model, s, b, replace(opts, recompute="none"), moe_layer)
    kept = op_sac_layer_bytes(model, s, b, opts, moe_layer)
    return np.maximum(whole - kept, 0 * kept)
