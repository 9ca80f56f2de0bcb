"""Hugging Face ``config.json`` (and HF-style recipe files) -> ``ModelSpec``.

Sizes come from the config under any of the spellings used by the families in
``catalog/data/models`` (``hidden_size``/``n_embed``/``n_embd``/``d_model``, ...). Facts that a
config does not state (gated MLP, norm type, biases, parallel blocks) come from
``perfcast.catalog.hf_families``; explicit config keys override them. A missing or mistyped
required field raises ``InputError(field, value, "... config.json at <source>")``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from perfcast.catalog.files import build_spec, strip_private
from perfcast.catalog.hf_families import FAMILIES, Family, generic_family
from perfcast.errors import InputError
from perfcast.specs.model import Activation, ModelSpec, PositionEmbedding

HIDDEN_KEYS = ("hidden_size", "n_embed", "n_embd", "d_model")
LAYER_KEYS = ("num_hidden_layers", "n_layer", "n_layers", "num_layers")
HEAD_KEYS = ("num_attention_heads", "n_head", "n_heads")
KV_HEAD_KEYS = ("num_key_value_heads", "num_kv_heads", "n_head_kv", "multi_query_group_num")
FFN_KEYS = ("intermediate_size", "ffn_dim", "n_inner", "ffn_hidden_size")
CONTEXT_KEYS = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length")
ACTIVATION_KEYS = ("hidden_act", "hidden_activation", "activation_function")
EXPERT_KEYS = ("n_routed_experts", "num_local_experts", "num_experts", "moe_num_experts")
TOPK_KEYS = ("num_experts_per_tok", "experts_per_token", "num_experts_per_token", "moe_topk")

_ACTIVATION_BASE = {
    "silu": "silu", "swish": "silu",
    "gelu": "gelu", "gelu_new": "gelu", "gelu_pytorch_tanh": "gelu", "gelu_fast": "gelu",
    "gelu_accurate": "gelu", "gelu_python": "gelu", "quick_gelu": "gelu",
    "relu": "relu", "relu2": "relu2", "squared_relu": "relu2", "squared-relu": "relu2",
}
_GATED: dict[str, Activation] = {"silu": "swiglu", "gelu": "geglu"}
_NON_GATED: dict[str, Activation] = {"gelu": "gelu", "relu": "relu", "relu2": "squared-relu"}
_POSITION_TYPES: dict[str, PositionEmbedding] = {
    "learned_absolute": "learned", "absolute": "learned", "learned": "learned",
    "rope": "rope", "rotary": "rope", "alibi": "alibi", "none": "none",
}


class _Reader:
    """Typed access to config keys; errors name the ModelSpec field and the source."""

    def __init__(self, config: dict[str, Any], source: str) -> None:
        self.config = config
        self.source = source

    def raw(self, keys: Sequence[str]) -> tuple[str | None, Any]:
        """First key of ``keys`` present with a non-null value, and that value."""
        for key in keys:
            if self.config.get(key) is not None:
                return key, self.config[key]
        return None, None

    def integer(self, field: str, keys: Sequence[str], required: bool = True) -> int | None:
        key, value = self.raw(keys)
        if key is None:
            if required:
                raise InputError(
                    field, None, f"missing from config.json at {self.source} "
                    f"(looked for {', '.join(keys)})",
                )
            return None
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise InputError(
                field, value, f"expected an integer for {key!r} in config.json at {self.source}"
            )
        return value

    def number(self, field: str, keys: Sequence[str], default: float) -> float:
        key, value = self.raw(keys)
        if key is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise InputError(
                field, value, f"expected a number for {key!r} in config.json at {self.source}"
            )
        return float(value)

    def flag(self, field: str, keys: Sequence[str], default: bool) -> bool:
        key, value = self.raw(keys)
        if key is None:
            return default
        if not isinstance(value, bool):
            raise InputError(
                field, value, f"expected true/false for {key!r} in config.json at {self.source}"
            )
        return value


def model_from_hf_config(config: dict[str, Any], name: str, source: str) -> ModelSpec:
    """Map a Hugging Face ``config.json`` mapping onto a ``ModelSpec`` named ``name``.

    ``source`` (a path or URL) is recorded in ``ModelSpec.source`` and named in errors.
    Keys starting with ``_`` (``_source``, ``_notes``) are ignored.
    """
    if not isinstance(config, dict):
        raise InputError(
            "config", type(config).__name__, f"expected a JSON object in config.json at {source}"
        )
    config = strip_private(config)
    model_type = config.get("model_type")
    family = FAMILIES.get(model_type) if isinstance(model_type, str) else None
    family = family or generic_family(config)
    read = _Reader(config, source)

    hidden = read.integer("hidden_size", HIDDEN_KEYS)
    layers = read.integer("num_hidden_layers", LAYER_KEYS)
    assert hidden is not None and layers is not None
    fields: dict[str, Any] = {
        "name": name,
        "hidden_size": hidden,
        "num_hidden_layers": layers,
        "num_attention_heads": read.integer("num_attention_heads", HEAD_KEYS),
        "num_key_value_heads": _kv_heads(read, model_type),
        "head_dim": read.integer("head_dim", ("head_dim",), required=False),
        "intermediate_size": _ffn_width(read, family, hidden),
        "vocab_size": read.integer("vocab_size", ("vocab_size", "padded_vocab_size")),
        "tie_word_embeddings": read.flag(
            "tie_word_embeddings", ("tie_word_embeddings",), family.tie_word_embeddings
        ),
        "activation": _activation(read, family),
        "norm_type": family.norm_type,
        "position_embedding": _position_embedding(config, family),
        "parallel_attention_mlp": read.flag(
            "parallel_attention_mlp", ("parallel_attn", "use_parallel_residual"),
            family.parallel_attention_mlp,
        ),
        "num_norms_per_layer": _norms_per_layer(config, family),
        "qk_norm": family.qk_norm,
        "attention_sinks": family.attention_sinks,
        "source": source,
    }
    context = read.integer("max_position_embeddings", CONTEXT_KEYS, required=False)
    if context is None:
        context = family.max_position_embeddings
    if context is not None:
        fields["max_position_embeddings"] = context
    fields.update(_biases(read, family))
    fields.update(_dropout(read, family))
    fields.update(_sliding_window(read, family, layers))
    fields.update(_moe(read, family, layers))
    fields.update(_mla(read))
    return build_spec(ModelSpec, fields, f"config.json at {source}")


def _kv_heads(read: _Reader, model_type: Any) -> int | None:
    """KV heads: explicit key; Falcon reads num_kv_heads only with new_decoder_architecture."""
    config = read.config
    if model_type == "falcon" and not config.get("new_decoder_architecture"):
        return 1 if config.get("multi_query") else None
    count = read.integer("num_key_value_heads", KV_HEAD_KEYS, required=False)
    if count is None and config.get("multi_query") is True:
        return 1
    return count


def _ffn_width(read: _Reader, family: Family, hidden: int) -> int:
    """Dense MLP width: explicit key, MPT expansion_ratio*d_model, or the family's k*hidden."""
    width = read.integer("intermediate_size", FFN_KEYS, required=False)
    if width is not None:
        return width
    ratio = read.integer("intermediate_size", ("expansion_ratio",), required=False)
    if ratio is not None:
        return ratio * hidden
    if family.ffn_multiplier is not None:
        return family.ffn_multiplier * hidden
    width = read.integer("intermediate_size", FFN_KEYS)  # raises: missing
    assert width is not None
    return width


def _activation(read: _Reader, family: Family) -> Activation:
    """SiLU+gated -> swiglu, GELU+gated -> geglu, GELU -> gelu, ReLU, relu2 -> squared-relu."""
    key, value = read.raw(ACTIVATION_KEYS)
    if key is None and family.default_activation is None:
        raise InputError(
            "activation", None, f"config.json at {read.source} has no "
            f"{'/'.join(ACTIVATION_KEYS)} and its model_type "
            f"{read.config.get('model_type')!r} has no documented default activation; "
            "add hidden_act to the config",
        )
    name = family.default_activation if key is None else value
    base = _ACTIVATION_BASE.get(str(name).lower())
    ffn_type = (read.config.get("ffn_config") or {}).get("ffn_type")
    gated = family.gated_mlp or ffn_type == "mptglu"
    table = _GATED if gated else _NON_GATED
    if base is None or base not in table:
        kind = "gated" if gated else "non-gated"
        raise InputError(
            "activation", name, f"unsupported {kind} MLP activation in config.json at "
            f"{read.source} (supported: {', '.join(sorted(table))})",
        )
    return table[base]


def _position_embedding(config: dict[str, Any], family: Family) -> PositionEmbedding:
    """Family default, overridden by position_embedding_type / alibi / rotary / learned_pos_emb."""
    kind = config.get("position_embedding_type")
    if isinstance(kind, str) and kind.lower() in _POSITION_TYPES:
        return _POSITION_TYPES[kind.lower()]
    attn_config = config.get("attn_config") or {}
    if config.get("alibi") is True or attn_config.get("alibi") is True:
        return "alibi"
    if config.get("rotary") is True:
        return "rope"
    if config.get("learned_pos_emb") is False:
        return "none"
    return family.position_embedding


def _norms_per_layer(config: dict[str, Any], family: Family) -> int | None:
    """Falcon's new decoder architecture has ln_attn and ln_mlp (2 norms, parallel block)."""
    if config.get("new_decoder_architecture") is True:
        return int(config.get("num_ln_in_parallel_attn") or 2)
    return family.num_norms_per_layer


def _biases(read: _Reader, family: Family) -> dict[str, bool]:
    """attention_bias/mlp_bias keys; Falcon ``bias`` and MPT ``no_bias`` set both."""
    both: bool | None = None
    if isinstance(read.config.get("bias"), bool):
        both = read.config["bias"]
    if isinstance(read.config.get("no_bias"), bool):
        both = not read.config["no_bias"]
    attention = family.attention_bias if both is None else both
    mlp = family.mlp_bias if both is None else both
    return {
        "attention_bias": read.flag("attention_bias", ("attention_bias",), attention),
        "mlp_bias": read.flag("mlp_bias", ("mlp_bias",), mlp),
    }


def _dropout(read: _Reader, family: Family) -> dict[str, float]:
    """Recipe dropout (Megatron 0.1) or the config's own values (HF configs: usually 0)."""
    if family.fixed_dropout is not None:
        return {"hidden_dropout": family.fixed_dropout, "attention_dropout": family.fixed_dropout}
    attn_config = read.config.get("attn_config") or {}
    attention_default = float(attn_config.get("attn_pdrop") or 0.0)
    return {
        "hidden_dropout": read.number(
            "hidden_dropout", ("hidden_dropout", "resid_pdrop", "dropout"), 0.0
        ),
        "attention_dropout": read.number(
            "attention_dropout", ("attention_dropout", "attn_pdrop"), attention_default
        ),
    }


def _sliding_window(read: _Reader, family: Family, layers: int) -> dict[str, int | None]:
    """Window and how many layers use it (layer_types, Gemma-2 alternation, Qwen2 windows)."""
    config = read.config
    window = read.integer("sliding_window", ("sliding_window",), required=False)
    if window is None or config.get("use_sliding_window") is False:
        return {}
    layer_types = config.get("layer_types")
    if isinstance(layer_types, list):
        if len(layer_types) != layers:
            raise InputError(
                "layer_types", len(layer_types), f"has {len(layer_types)} entries but "
                f"num_hidden_layers={layers} in config.json at {read.source}",
            )
        count = sum(1 for t in layer_types if t == "sliding_attention")
    elif family.alternating_sliding_window:
        count = (layers + 1) // 2  # even-indexed layers 0, 2, ...
    elif config.get("use_sliding_window") is True and config.get("max_window_layers") is not None:
        count = max(0, layers - int(config["max_window_layers"]))  # Qwen2: layers >= max_window
    else:
        return {"sliding_window": window}  # every layer (Mistral-7B v0.1)
    if count == 0:
        return {}
    return {"sliding_window": window, "sliding_window_layers": count}


def _moe(read: _Reader, family: Family, layers: int) -> dict[str, Any]:
    """Routed/shared experts, dense leading layers and MoE frequency."""
    experts = read.integer("num_experts", EXPERT_KEYS, required=False) or 0
    if experts == 0:
        return {}
    fields: dict[str, Any] = {
        "num_experts": experts,
        "num_experts_per_tok": read.integer("num_experts_per_tok", TOPK_KEYS),
        "moe_intermediate_size": read.integer(
            "moe_intermediate_size", ("moe_intermediate_size",), required=False
        ),
        "num_shared_experts": read.integer(
            "num_shared_experts", ("n_shared_experts",), required=False
        ) or 0,
        "first_k_dense_layers": read.integer(
            "first_k_dense_layers", ("first_k_dense_replace",), required=False
        ) or 0,
        "moe_layer_freq": read.integer(
            "moe_layer_freq", ("moe_layer_freq", "decoder_sparse_step"), required=False
        ) or 1,
        "router_bias": family.router_bias,
        "moe_router_num_groups": read.integer(
            "moe_router_num_groups", ("n_group",), required=False) or 1,
        "moe_router_group_topk": read.integer(
            "moe_router_group_topk", ("topk_group",), required=False) or 1,
    }
    shared_width = read.integer(
        "shared_expert_intermediate_size", ("shared_expert_intermediate_size",), required=False
    )
    if shared_width:
        fields["shared_expert_intermediate_size"] = shared_width
        fields["num_shared_experts"] = max(1, fields["num_shared_experts"])
    dense_layers = read.config.get("mlp_only_layers") or []
    if dense_layers:
        if sorted(dense_layers) != list(range(len(dense_layers))):
            raise InputError(
                "mlp_only_layers", dense_layers, "only leading dense layers (0..k-1) are "
                f"supported, in config.json at {read.source}",
            )
        fields["first_k_dense_layers"] = max(fields["first_k_dense_layers"], len(dense_layers))
    return fields


def _mla(read: _Reader) -> dict[str, Any]:
    """DeepSeek multi-head latent attention ranks and head dims (kv_lora_rank set = MLA)."""
    fields: dict[str, Any] = {
        "num_nextn_predict_layers": read.integer(
            "num_nextn_predict_layers", ("num_nextn_predict_layers",), required=False
        ) or 0,
    }
    if read.integer("kv_lora_rank", ("kv_lora_rank",), required=False) is None:
        return fields
    for field in ("q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim",
                  "v_head_dim"):
        fields[field] = read.integer(field, (field,), required=False)
    return fields
