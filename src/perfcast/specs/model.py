"""ModelSpec: the architecture of a decoder-only transformer, dense or MoE.

Field names follow Hugging Face ``config.json`` (``hidden_size``, ``num_hidden_layers``,
``num_attention_heads``, ``num_key_value_heads``, ``intermediate_size``, ...), so a config file
maps onto this spec with few renames (see ``perfcast.catalog.hf_config``).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Activation = Literal["swiglu", "geglu", "gelu", "relu", "squared-relu"]
"""MLP activation. ``swiglu``/``geglu`` are gated (3 weight matrices), the others 2."""

NormType = Literal["rmsnorm", "layernorm"]
PositionEmbedding = Literal["rope", "learned", "alibi", "none"]
ArchType = Literal["dense", "moe"]

GATED_ACTIVATIONS: frozenset[str] = frozenset({"swiglu", "geglu"})


class ModelSpec(BaseModel):
    """A decoder-only transformer language model."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(description="Catalog slug or user-given name of the model.")
    hidden_size: int = Field(gt=0, description="Model width h (d_model).")
    num_hidden_layers: int = Field(gt=0, description="Number of transformer layers L.")
    num_attention_heads: int = Field(gt=0, description="Number of query heads a.")
    num_key_value_heads: int | None = Field(
        default=None, gt=0, description="Number of key/value heads (GQA/MQA); None = MHA (= a)."
    )
    head_dim: int | None = Field(
        default=None, gt=0, description="Per-head dimension; None = hidden_size / heads."
    )
    intermediate_size: int = Field(gt=0, description="Dense MLP hidden width (ffn_hidden_size).")
    vocab_size: int = Field(gt=0, description="Vocabulary size V (before any padding).")
    max_position_embeddings: int = Field(
        default=4096, gt=0, description="Maximum sequence length (learned position table size)."
    )
    tie_word_embeddings: bool = Field(
        default=False, description="Input embedding and LM head share one matrix."
    )
    activation: Activation = Field(default="swiglu", description="MLP activation function.")
    norm_type: NormType = Field(default="rmsnorm", description="Normalization layer type.")
    position_embedding: PositionEmbedding = Field(
        default="rope", description="Position encoding: RoPE, learned table, ALiBi or none."
    )
    attention_bias: bool = Field(default=False, description="QKV and output projections have bias.")
    mlp_bias: bool = Field(default=False, description="MLP projections have bias.")
    parallel_attention_mlp: bool = Field(
        default=False,
        description="Attention and MLP read the same normalized input (GPT-J, Falcon, PaLM).",
    )
    num_norms_per_layer: int | None = Field(
        default=None,
        ge=0,
        description="Norm modules per layer; None = 2 (1 with parallel attention/MLP). "
        "Gemma-2 uses 4 (pre and post norms).",
    )
    qk_norm: bool = Field(default=False, description="Per-head RMSNorm on Q and K (Qwen3).")
    attention_sinks: bool = Field(
        default=False,
        description="A learned sink logit per head joins each softmax (gpt-oss; Xiao et al. 2023).",
    )
    hidden_dropout: float = Field(
        default=0.0, ge=0.0, lt=1.0, description="Dropout after attention and MLP (training)."
    )
    attention_dropout: float = Field(
        default=0.0, ge=0.0, lt=1.0, description="Dropout on attention probabilities (training)."
    )
    sliding_window: int | None = Field(
        default=None, gt=0, description="Sliding attention window in tokens; None = full."
    )
    sliding_window_layers: int | None = Field(
        default=None,
        ge=0,
        description="How many of the layers use the sliding window (alternating patterns); "
        "None = all layers when sliding_window is set.",
    )
    # --- MoE ---
    num_experts: int = Field(
        default=0, ge=0, description="Routed experts per MoE layer (n_routed_experts); 0 = dense."
    )
    num_experts_per_tok: int = Field(default=0, ge=0, description="Routed experts per token k.")
    moe_intermediate_size: int | None = Field(
        default=None, gt=0, description="Hidden width of one routed expert."
    )
    num_shared_experts: int = Field(default=0, ge=0, description="Always-active shared experts.")
    shared_expert_intermediate_size: int | None = Field(
        default=None,
        gt=0,
        description="Total hidden width of the shared expert(s); None = "
        "num_shared_experts * moe_intermediate_size.",
    )
    first_k_dense_layers: int = Field(
        default=0, ge=0, description="Leading layers with a dense MLP (first_k_dense_replace)."
    )
    moe_layer_freq: int = Field(
        default=1, ge=1, description="Every n-th layer (after the dense ones) is MoE."
    )
    router_bias: bool = Field(default=False, description="Router linear layer has a bias.")
    moe_router_num_groups: int = Field(
        default=1, ge=1, description="Expert groups of group-limited routing (HF n_group; "
        "Megatron-Core --moe-router-num-groups); 1 = no limit.",
    )
    moe_router_group_topk: int = Field(
        default=1, ge=1, description="Groups a token's experts may come from (HF topk_group; "
        "--moe-router-group-topk). DeepSeek-V3: 4 of 8, one group per node at EP 64 = "
        "node-limited routing, at most M = 4 nodes per token (DeepSeek-V3 report §2.1.2).",
    )
    # --- MLA (DeepSeek-V2/V3) ---
    q_lora_rank: int | None = Field(default=None, gt=0, description="MLA query LoRA rank.")
    kv_lora_rank: int | None = Field(
        default=None, gt=0, description="MLA compressed KV rank; set = MLA attention."
    )
    qk_nope_head_dim: int | None = Field(default=None, gt=0, description="MLA non-RoPE q/k dim.")
    qk_rope_head_dim: int | None = Field(default=None, gt=0, description="MLA RoPE q/k dim.")
    v_head_dim: int | None = Field(default=None, gt=0, description="MLA value head dim.")
    num_nextn_predict_layers: int = Field(
        default=0, ge=0, description="Multi-token-prediction modules (DeepSeek-V3 MTP)."
    )
    # --- provenance ---
    source: str = Field(default="user", description="Where the architecture comes from.")
    published_params: float | None = Field(
        default=None, gt=0, description="Published total parameter count, for checks."
    )

    @model_validator(mode="after")
    def _check_consistency(self) -> ModelSpec:
        kv = self.num_kv_heads
        if self.num_attention_heads % kv != 0:
            raise ValueError(
                f"num_attention_heads={self.num_attention_heads} is not a multiple of "
                f"num_key_value_heads={kv}"
            )
        if self.head_dim is None and not self.is_mla and (
            self.hidden_size % self.num_attention_heads != 0
        ):
            raise ValueError(
                f"hidden_size={self.hidden_size} is not divisible by "
                f"num_attention_heads={self.num_attention_heads}; set head_dim"
            )
        if self.num_experts > 0:
            if not 0 < self.num_experts_per_tok <= self.num_experts:
                raise ValueError(
                    f"num_experts_per_tok={self.num_experts_per_tok} must be in "
                    f"1..num_experts={self.num_experts}"
                )
            groups, topk = self.moe_router_num_groups, self.moe_router_group_topk
            if self.num_experts % groups != 0 or topk > groups:
                raise ValueError(
                    f"moe_router_num_groups={groups} must divide num_experts={self.num_experts} "
                    f"and be >= moe_router_group_topk={topk}"
                )
            if self.first_k_dense_layers > self.num_hidden_layers:
                raise ValueError(
                    f"first_k_dense_layers={self.first_k_dense_layers} exceeds "
                    f"num_hidden_layers={self.num_hidden_layers}"
                )
        if self.is_mla and (self.qk_nope_head_dim is None or self.qk_rope_head_dim is None):
            raise ValueError("kv_lora_rank is set (MLA) but qk_nope_head_dim/qk_rope_head_dim not")
        return self

    # ----- derived quantities (pure, cheap) -----
    @property
    def num_kv_heads(self) -> int:
        """Key/value heads (= query heads for MHA)."""
        return self.num_key_value_heads or self.num_attention_heads

    @property
    def kv_channels(self) -> int:
        """Per-head q/k/v dimension for non-MLA attention."""
        return self.head_dim or self.hidden_size // self.num_attention_heads

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank is not None

    @property
    def is_gated_mlp(self) -> bool:
        return self.activation in GATED_ACTIVATIONS

    @property
    def arch_type(self) -> ArchType:
        return "moe" if self.is_moe else "dense"

    @property
    def num_moe_layers(self) -> int:
        """Layers whose MLP is a mixture of experts."""
        if not self.is_moe:
            return 0
        candidates = self.num_hidden_layers - self.first_k_dense_layers
        return (candidates + self.moe_layer_freq - 1) // self.moe_layer_freq

    @property
    def num_dense_layers(self) -> int:
        return self.num_hidden_layers - self.num_moe_layers

    @property
    def expert_intermediate_size(self) -> int:
        return self.moe_intermediate_size or self.intermediate_size

    @property
    def shared_intermediate_size(self) -> int:
        if self.shared_expert_intermediate_size is not None:
            return self.shared_expert_intermediate_size
        return self.num_shared_experts * self.expert_intermediate_size

    @property
    def norms_per_layer(self) -> int:
        if self.num_norms_per_layer is not None:
            return self.num_norms_per_layer
        return 1 if self.parallel_attention_mlp else 2
