"""Architecture facts per Hugging Face ``model_type`` that ``config.json`` does not state.

A config gives sizes; whether the MLP is gated, which norm is used, where biases sit and how
positions are encoded live in the modeling code of each family. This table records those facts
once, each with its source; ``perfcast.catalog.hf_config`` applies it and lets explicit config
keys (``attention_bias``, ``bias``, ``no_bias``, ``parallel_attn``, ...) override it.

Sources: huggingface/transformers ``models/<family>/{configuration,modeling}_<family>.py``;
Megatron-LM ``megatron/training/arguments.py`` @ d98e8a64 (GPT defaults); the ``_notes`` of each
reference JSON in ``catalog/data/models`` (copied from /work/shared/reference/models).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from perfcast.specs.model import NormType, PositionEmbedding

MEGATRON_DROPOUT = 0.1
"""Megatron-LM GPT defaults ``--hidden-dropout 0.1 --attention-dropout 0.1``
(megatron/training/arguments.py @ d98e8a64); GPT-3 reproductions use the same."""


@dataclass(frozen=True)
class Family:
    """Fixed architecture facts of one model family (keys absent from its config.json)."""

    gated_mlp: bool
    """MLP has gate and up projections (SwiGLU/GeGLU, 3 matrices)."""
    norm_type: NormType
    position_embedding: PositionEmbedding
    source: str
    """Where these facts come from."""
    default_activation: str | None = "silu"
    """Activation when the config has no ``hidden_act``-style key (the family's configuration
    class default); None where no default is documented (the config must state it)."""
    attention_bias: bool = False
    mlp_bias: bool = False
    router_bias: bool = False
    parallel_attention_mlp: bool = False
    num_norms_per_layer: int | None = None
    qk_norm: bool = False
    attention_sinks: bool = False
    """A learned sink logit per head joins every softmax (gpt-oss)."""
    ffn_multiplier: int | None = None
    """MLP width = multiplier * hidden when the config has no ffn key (GPT-2 style 4h)."""
    fixed_dropout: float | None = None
    """Training dropout of the recipe (configs without dropout keys); None = read the config."""
    tie_word_embeddings: bool = True
    """Value when the config has no ``tie_word_embeddings`` key (PretrainedConfig default True)."""
    max_position_embeddings: int | None = None
    """Value when the config has no context-length key."""
    alternating_sliding_window: bool = False
    """Even-indexed layers use the sliding window, odd layers full attention (Gemma-2)."""


_LLAMA = Family(
    gated_mlp=True, norm_type="rmsnorm", position_embedding="rope", tie_word_embeddings=False,
    source="transformers LlamaConfig/LlamaMLP: SwiGLU (gate/up/down), RMSNorm, RoPE, "
    "attention_bias/mlp_bias keys default False, tie_word_embeddings default False",
)
_QWEN2 = Family(
    gated_mlp=True, norm_type="rmsnorm", position_embedding="rope", attention_bias=True,
    tie_word_embeddings=False,
    source="transformers Qwen2Attention: q/k/v_proj bias=True (o_proj and MLP without bias), "
    "SwiGLU, RMSNorm, RoPE (reference JSON _notes)",
)
_QWEN3 = Family(
    gated_mlp=True, norm_type="rmsnorm", position_embedding="rope", qk_norm=True,
    tie_word_embeddings=False,
    source="transformers Qwen3Attention: per-head RMSNorm q_norm/k_norm, attention_bias key "
    "(False), SwiGLU, RMSNorm, RoPE (reference JSON _notes)",
)
_DEEPSEEK = Family(
    gated_mlp=True, norm_type="rmsnorm", position_embedding="rope", tie_word_embeddings=False,
    source="DeepSeek-V2/V3 modeling_deepseek.py: MLA attention, SwiGLU experts, RMSNorm, "
    "RoPE on qk_rope_head_dim (reference JSON _notes; Kimi-K2 reuses DeepseekV3ForCausalLM)",
)
_MEGATRON_GPT = Family(
    gated_mlp=False, norm_type="layernorm", position_embedding="learned", attention_bias=True,
    mlp_bias=True, default_activation="gelu", ffn_multiplier=4, fixed_dropout=MEGATRON_DROPOUT,
    source="Megatron-LM GPT defaults (arguments.py @ d98e8a64): GELU MLP 4h, learned absolute "
    "positions, LayerNorm, biases on linear layers, tied embeddings, dropout 0.1/0.1",
)

FAMILIES: dict[str, Family] = {
    "llama": _LLAMA,
    "mistral": _LLAMA,
    "mixtral": _LLAMA,
    "qwen2": _QWEN2,
    "qwen2_moe": _QWEN2,
    "qwen3": _QWEN3,
    "qwen3_moe": _QWEN3,
    "deepseek_v2": _DEEPSEEK,
    "deepseek_v3": _DEEPSEEK,
    "kimi_k2": _DEEPSEEK,
    "gemma2": Family(
        gated_mlp=True, norm_type="rmsnorm", position_embedding="rope", num_norms_per_layer=4,
        default_activation="gelu_pytorch_tanh", alternating_sliding_window=True,
        source="transformers Gemma2: GeGLU MLP, RMSNorm pre+post around attention and MLP "
        "(4 per layer), even layers sliding window, tie_word_embeddings default True "
        "(configuration_gemma2.py @ 008e5743)",
    ),
    "gpt_oss": Family(
        gated_mlp=True, norm_type="rmsnorm", position_embedding="rope", attention_bias=True,
        mlp_bias=True, router_bias=True, tie_word_embeddings=False, attention_sinks=True,
        source="transformers GptOss: attention bias (config key), experts with gate_up/down "
        "biases, router linear with bias, clamped SwiGLU, RMSNorm, sliding/full layer_types, "
        "per-head attention sinks (modeling_gpt_oss.py self.sinks)",
    ),
    "gpt_neox": Family(
        gated_mlp=False, norm_type="layernorm", position_embedding="rope", attention_bias=True,
        mlp_bias=True, default_activation="gelu", parallel_attention_mlp=True,
        num_norms_per_layer=2, tie_word_embeddings=False,
        source="transformers GPTNeoXConfig defaults (configuration_gpt_neox.py): hidden_act "
        "'gelu', attention_bias True, use_parallel_residual True, tie_word_embeddings False, "
        "partial rotary (rotary_pct); input_layernorm and post_attention_layernorm in every layer "
        "(two LayerNorms even with the parallel residual); GPTNeoXMLP dense_h_to_4h/dense_4h_to_h with bias, "
        "LayerNorm; EleutherAI/gpt-neox-20b has 20,554,567,680 parameters",
    ),
    "gpt (Megatron-LM)": _MEGATRON_GPT,
    "gpt3": replace(
        _MEGATRON_GPT,
        source="GPT-3 (Brown et al. 2020) as reproduced by Megatron-LM examples/gpt3 @ d98e8a64: "
        "GPT-2 architecture (GELU 4h, learned positions, pre-LayerNorm, biases, tied), "
        "Megatron dropout 0.1/0.1",
    ),
    "opt": Family(
        gated_mlp=False, norm_type="layernorm", position_embedding="learned", attention_bias=True,
        mlp_bias=True, default_activation="relu", ffn_multiplier=4, max_position_embeddings=2048,
        source="transformers OPT (facebook/opt-* configs): ReLU MLP ffn_dim, learned positions, "
        "pre-LayerNorm, biases, tied embeddings",
    ),
    "mpt": Family(
        gated_mlp=False, norm_type="layernorm", position_embedding="learned", attention_bias=True,
        mlp_bias=True, default_activation="gelu", max_position_embeddings=2048,
        source="llm-foundry MPTConfig defaults @ 8c8dd48f: learned_pos_emb True, no_bias False, "
        "tie_word_embeddings True, low_precision_layernorm, alibi False, mptmlp GELU "
        "expansion_ratio*d_model",
    ),
    "nemotron": Family(
        gated_mlp=False, norm_type="layernorm", position_embedding="rope",
        default_activation="relu2", tie_word_embeddings=False,
        source="Megatron-Bridge nemotron_provider.py @ ab166de1 / transformers Nemotron: "
        "squared-ReLU MLP, LayerNorm(1p), partial RoPE, no biases, untied embeddings",
    ),
    "falcon": Family(
        gated_mlp=False, norm_type="layernorm", position_embedding="rope",
        default_activation="gelu", parallel_attention_mlp=True, ffn_multiplier=4,
        max_position_embeddings=2048,
        source="transformers Falcon: GELU MLP 4h (dense_h_to_4h), parallel attention+MLP, "
        "LayerNorm (ln_attn+ln_mlp with new_decoder_architecture), bias key, RoPE unless "
        "alibi, max_position_embeddings default 2048",
    ),
    "bloom": Family(
        gated_mlp=False, norm_type="layernorm", position_embedding="alibi", attention_bias=True,
        mlp_bias=True, default_activation="gelu", ffn_multiplier=4, max_position_embeddings=2048,
        source="transformers Bloom + model card: ALiBi, GELU MLP 4h, LayerNorm, biases "
        "everywhere, tied embeddings, trained at 2048 tokens",
    ),
    "gptj": Family(
        gated_mlp=False, norm_type="layernorm", position_embedding="rope",
        default_activation="gelu_new", mlp_bias=True, parallel_attention_mlp=True,
        ffn_multiplier=4,
        source="transformers GPTJ: q/k/v/out_proj without bias, fc_in/fc_out with bias, one "
        "LayerNorm feeding parallel attention and MLP, partial rotary, MLP 4h when n_inner null",
    ),
    "gpt2": Family(
        gated_mlp=False, norm_type="layernorm", position_embedding="learned", attention_bias=True,
        mlp_bias=True, default_activation="gelu_new", ffn_multiplier=4,
        source="transformers GPT2: Conv1D with bias, GELU MLP 4h, learned positions, tied",
    ),
}

GENERIC_SOURCE = (
    "generic HF mapping (model_type not in perfcast.catalog.hf_families): the config's "
    "hidden_act is required (no documented default), silu => SwiGLU, "
    "gelu => non-gated GELU, rms_norm_eps => RMSNorm else LayerNorm, RoPE, biases from keys"
)


def generic_family(config: dict[str, Any]) -> Family:
    """Facts inferred for an unlisted model_type from the keys its config does have."""
    act = str(config.get("hidden_act") or config.get("hidden_activation")
              or config.get("activation_function") or "")
    rms = "rms_norm_eps" in config or "rms_norm_epsilon" in config
    return Family(
        gated_mlp=act in ("silu", "swish"),
        default_activation=None,
        norm_type="rmsnorm" if rms else "layernorm",
        position_embedding="rope",
        tie_word_embeddings=True,
        source=GENERIC_SOURCE,
    )
