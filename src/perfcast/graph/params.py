"""Parameter counts of a decoder-only transformer: total, active, per layer, per GPU.

Counts are exact sums of weight-matrix and bias sizes (no approximations such as 12·L·h²), so
they reproduce published totals: e.g. Narayanan et al. 2021 Eq. (2)
``P = 12·l·h²·(1 + 13/(12h) + (V+s)/(12·l·h))`` for the GPT family; Llama-3.1-405B 405.85B.
Multi-token-prediction modules (DeepSeek-V3 MTP) are excluded, as in the published 671B.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from perfcast.specs.model import ModelSpec


@dataclass(frozen=True)
class ParamCounts:
    """Whole-model parameter counts."""

    total: int
    """All parameters (every expert counted), excluding MTP modules."""
    active: int
    """Parameters touched by one token: shared parts plus top-k routed experts."""
    embedding: int
    """Input embedding (and learned position table)."""
    lm_head: int
    """Output projection; 0 when tied to the input embedding."""

    @property
    def active_non_embedding(self) -> int:
        """Active parameters without the input-embedding lookup (the LM head stays): the
        convention of the DeepSeek, Kimi and gpt-oss model cards; Mistral and Qwen include
        the embedding."""
        return self.active - self.embedding


def norm_params(model: ModelSpec) -> int:
    """One normalization module: h weights (+ h biases for LayerNorm)."""
    return model.hidden_size * (2 if model.norm_type == "layernorm" else 1)


def attention_params(model: ModelSpec) -> int:
    """Attention block weights (and biases) of one layer, norms excluded.

    MHA/GQA: W_q h×(a·d), W_k and W_v h×(g·d), W_o (a·d)×h, biases a·d + 2·g·d + h when present.
    MLA (DeepSeek-V2, arXiv:2405.04434 §2.1): W_DQ h×r_q, norm r_q, W_UQ r_q×a·(d_nope+d_rope);
    W_DKV h×(r_kv+d_rope), norm r_kv, W_UKV r_kv×a·(d_nope+d_v); W_O (a·d_v)×h.
    """
    h, a = model.hidden_size, model.num_attention_heads
    if model.is_mla:
        nope = model.qk_nope_head_dim or 0
        rope = model.qk_rope_head_dim or 0
        v_dim = model.v_head_dim or model.kv_channels
        r_kv = model.kv_lora_rank or 0
        if model.q_lora_rank:
            q = h * model.q_lora_rank + model.q_lora_rank + model.q_lora_rank * a * (nope + rope)
        else:
            q = h * a * (nope + rope)
        kv = h * (r_kv + rope) + r_kv + r_kv * a * (nope + v_dim)
        return q + kv + a * v_dim * h
    d, g = model.kv_channels, model.num_kv_heads
    weights = h * a * d + 2 * h * g * d + a * d * h
    biases = (a * d + 2 * g * d + h) if model.attention_bias else 0
    qk_norm = 2 * d if model.qk_norm else 0
    sinks = a if model.attention_sinks else 0  # one learned logit per head (gpt-oss)
    return weights + biases + qk_norm + sinks


def mlp_params(model: ModelSpec, ffn_hidden: int) -> int:
    """One MLP of hidden width f: gated 3·h·f (gate, up, down), else 2·h·f; biases if any."""
    h = model.hidden_size
    matrices = 3 if model.is_gated_mlp else 2
    biases = ((matrices - 1) * ffn_hidden + h) if model.mlp_bias else 0
    return matrices * h * ffn_hidden + biases


def router_params(model: ModelSpec) -> int:
    """MoE router: h×E linear (+E bias)."""
    return model.hidden_size * model.num_experts + (model.num_experts if model.router_bias else 0)


def routed_expert_params(model: ModelSpec) -> int:
    """One routed expert's MLP."""
    return mlp_params(model, model.expert_intermediate_size)


def shared_expert_params(model: ModelSpec) -> int:
    """All shared experts of one MoE layer, as one MLP of the combined width."""
    width = model.shared_intermediate_size
    return mlp_params(model, width) if width else 0


def layer_norm_params(model: ModelSpec) -> int:
    """All norm modules inside one transformer layer."""
    return model.norms_per_layer * norm_params(model)


def dense_layer_params(model: ModelSpec) -> int:
    """One transformer layer with a dense MLP."""
    return attention_params(model) + mlp_params(model, model.intermediate_size) + (
        layer_norm_params(model)
    )


def moe_layer_params(model: ModelSpec, experts_counted: int) -> int:
    """One MoE layer counting ``experts_counted`` routed experts (E for total, k for active)."""
    return (
        attention_params(model)
        + router_params(model)
        + experts_counted * routed_expert_params(model)
        + shared_expert_params(model)
        + layer_norm_params(model)
    )


def mtp_projection_params(model: ModelSpec) -> int:
    """Per MTP module, besides its transformer layer: the projection M_k of [h; emb] (2h -> h)
    and the RMSNorms of the hidden state, of the embedding and of the shared head's input
    (DeepSeek-V3 report §2.2, Eq. 21-22; the embedding and output head are shared)."""
    return 2 * model.hidden_size * model.hidden_size + 3 * norm_params(model)


def mtp_module_params(model: ModelSpec) -> int:
    """One multi-token-prediction module: projection and norms plus one transformer layer,
    MoE when the model's last layer is (DeepSeek-V3 §2.2: the MTP block mirrors the main
    model's layers). Not part of ``count_params`` totals (the 671B of DeepSeek-V3 exclude it)."""
    layer = (moe_layer_params(model, model.num_experts) if model.is_moe
             else dense_layer_params(model))
    return layer + mtp_projection_params(model)


def padded_vocab_size(vocab_size: int, tp: int = 1, divisible_by: int = 128) -> int:
    """Vocabulary rows actually allocated: V rounded up to a multiple of divisible_by·tp so
    that every TP rank holds an equal, aligned slice (Megatron-LM
    ``_vocab_size_with_padding``, flag --make-vocab-size-divisible-by, default 128)."""
    multiple = divisible_by * tp
    return -(-vocab_size // multiple) * multiple


def allocated_vocab_size(model: ModelSpec, strategy):
    """``padded_vocab_size`` of the model under a strategy's tp and divisor (array-friendly in
    tp, for the bulk search's strategy blocks)."""
    return padded_vocab_size(model.vocab_size, strategy.tp, strategy.make_vocab_size_divisible_by)


def embedding_params(model: ModelSpec) -> int:
    """Token embedding V×h plus a learned position table (max_position_embeddings×h)."""
    pos = model.max_position_embeddings * model.hidden_size
    return model.vocab_size * model.hidden_size + (
        pos if model.position_embedding == "learned" else 0
    )


def lm_head_params(model: ModelSpec) -> int:
    """Output projection h×V, zero when tied to the embedding."""
    return 0 if model.tie_word_embeddings else model.vocab_size * model.hidden_size


@lru_cache(maxsize=256)
def count_params(model: ModelSpec) -> ParamCounts:
    """Total and active parameter counts of ``model`` (final norm included; memoized: a pure
    function of the frozen model)."""
    dense = model.num_dense_layers * dense_layer_params(model)
    moe_total = model.num_moe_layers * moe_layer_params(model, model.num_experts)
    moe_active = model.num_moe_layers * moe_layer_params(model, model.num_experts_per_tok)
    emb, head = embedding_params(model), lm_head_params(model)
    shared = dense + emb + head + norm_params(model)
    return ParamCounts(
        total=shared + moe_total,
        active=shared + moe_active,
        embedding=emb,
        lm_head=head,
    )
