"""Model FLOPs per token (the MFU numerator), stated once.

perfcast's convention: training FLOPs per token = 6·N + attention, where
- N = active parameters that take part in matrix multiplies: all active parameters except the
  input-embedding lookup (and learned position table), plus the LM-head matmul even when tied
  (Kaplan et al. 2020 §2.1; PaLM, Chowdhery et al. 2022 Appendix B);
- attention = 3 passes × 2·(d_qk + d_v)·a·s_eff per layer per token, with s_eff = s/2 for
  causal attention (the upper triangle is not computed; FlashAttention-2 §3.1) and
  min(s, window)/... for sliding-window layers. PaLM counts the full square (12·L·h·s per
  token for d_qk = d_v = h/a); sources that do so are converted in ``validate``.
Recomputation is excluded from model FLOPs (it is counted in hardware FLOPs / HFU).
"""

from __future__ import annotations

from perfcast.graph.params import count_params, embedding_params, routed_expert_params
from perfcast.specs.model import ModelSpec


def matmul_params(model: ModelSpec) -> float:
    """Active parameters used in matmuls: active − embedding lookup + LM head (if tied)."""
    counts = count_params(model)
    head = model.vocab_size * model.hidden_size
    return counts.active - embedding_params(model) + (head if model.tie_word_embeddings else 0)


def _attention_dims(model: ModelSpec) -> tuple[float, float]:
    if model.is_mla:
        d_qk = (model.qk_nope_head_dim or 0) + (model.qk_rope_head_dim or 0)
        return d_qk, model.v_head_dim or model.kv_channels
    return model.kv_channels, model.kv_channels


def attention_flops_per_token(model: ModelSpec, seq_length, causal: bool = True):
    """Forward + backward attention-core FLOPs per token over all layers (3 passes)."""
    d_qk, d_v = _attention_dims(model)
    a = model.num_attention_heads
    window_layers = 0
    if model.sliding_window is not None:
        window_layers = (model.num_hidden_layers if model.sliding_window_layers is None
                         else model.sliding_window_layers)
    full_layers = model.num_hidden_layers - window_layers
    full_keys = seq_length / 2 if causal else seq_length
    per_key = 3 * 2 * a * (d_qk + d_v)
    total = full_layers * per_key * full_keys
    if window_layers:
        window = min(model.sliding_window, seq_length)
        # Causal sliding window: on average about w keys per query once past the first w.
        window_keys = window * (1 - window / (2 * seq_length)) if causal else window
        total = total + window_layers * per_key * window_keys
    return total


def model_flops_per_token(model: ModelSpec, seq_length, causal: bool = True):
    """Training FLOPs per token: 6·N_matmul + causal attention (see module docstring)."""
    return 6 * matmul_params(model) + attention_flops_per_token(model, seq_length, causal)


def dropped_token_flops_per_token(model: ModelSpec, capacity_factor: float | None):
    """Training FLOPs per token of routed-expert work that a capacity factor below 1 drops.

    With expert capacity c·(balanced load) and c < 1, every expert processes at most c of the
    mean number of routed tokens, so at least (1 − c) of the top-k assignments are dropped and
    pass the expert by the residual connection (Fedus et al. 2021, Switch Transformer §2.2;
    Lepikhin et al. 2021, GShard §2.2). Their 6·k·N_expert FLOPs per token per MoE layer are
    not done and are not model FLOPs: 6·L_moe·k·N_expert·max(0, 1 − c). Zero when dropless.
    """
    if capacity_factor is None or not model.is_moe:
        return 0.0
    dropped = max(0.0, 1.0 - capacity_factor)
    return (6.0 * model.num_moe_layers * model.num_experts_per_tok * routed_expert_params(model)
            * dropped)


def recompute_flops_per_token(model: ModelSpec, seq_length, recompute: str,
                              fraction: float = 1.0, causal: bool = True):
    """Extra (hardware) FLOPs per token from activation recomputation.

    Full: one more forward of the recomputed layers, 2·N_layers + attention forward
    (Korthikanti et al. 2022 §6: HFU counts it, MFU does not). Selective: the attention-core
    forward only.
    """
    attention_forward = attention_flops_per_token(model, seq_length, causal) / 3
    if recompute == "selective":
        return attention_forward
    if recompute != "full":
        return 0.0
    layer_matmul = matmul_params(model) - model.vocab_size * model.hidden_size
    return fraction * (2 * layer_matmul + attention_forward)
