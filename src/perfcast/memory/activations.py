"""Activation bytes stored for backward, per transformer layer per micro-batch.

Source: Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer
Models" (arXiv:2205.05198), Section 4 and Table 2. For a GPT layer with 16-bit activations:

    no parallelism:          s·b·h·(34 + 5·a·s/h)
    tensor parallel:         s·b·h·(10 + 24/t + 5·a·s/(h·t))
    + sequence parallel:     s·b·h/t·(34 + 5·a·s/h)
    tensor + selective:      s·b·h·(10 + 24/t)
    seq. par. + selective:   s·b·h·34/t
    full recompute:          2·s·b·h   (layer input only)

The 34 = attention 11 (QKV input 2, Q and K 4, V 2, out-proj input 2, dropout mask 1)
+ MLP 19 (input 2, GELU input 8, GELU output 8, dropout mask 1) + two LayerNorm inputs 4;
5·a·s² = softmax output 2 + dropout mask 1 + dropout output 2. Here each term is built from the
model's actual shapes (GQA K/V, gated MLPs, MoE, MLA), so the GPT case reduces to Table 2
exactly. Flash attention (Dao et al. 2022) stores no s×s matrix, only the fp32 log-sum-exp
(4·a·s·b bytes). Context parallelism splits the sequence: s is the per-rank s/cp.
With FP8 training the linear layers keep their saved inputs in FP8 (1 B: the QKV/MLP-in
norm outputs, the out-projection input, MLA latents, fc2 inputs and MoE permuted tokens), and
Megatron-Core's ``recompute_modules`` drop the terms of the recomputed submodules; torchtitan's
per-op SAC (``op_sac``) keeps its own set (``memory.op_sac_activations``).
Functions are array-friendly (numpy broadcasting over s, b, t).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from perfcast.specs.dtypes import ACTIVATION_BYTES, BYTES_PER_ELEMENT, MASK_BYTES
from perfcast.specs.model import ModelSpec

ACT_BYTES = ACTIVATION_BYTES
"""16-bit activations (bf16/fp16), Korthikanti et al. 2022 §4.1."""
LSE_BYTES = BYTES_PER_ELEMENT["fp32"]
"""Flash attention keeps the softmax log-sum-exp per row in fp32 (Dao et al. 2022, Alg. 1)."""


@dataclass(frozen=True)
class ActivationOptions:
    """The execution choices that change what a layer stores."""

    tp: int = 1
    sequence_parallel: bool = False
    recompute: str = "none"
    """'none', 'selective' (``recompute_modules`` recomputed) or 'full' (only layer input
    kept)."""
    recompute_modules: tuple[str, ...] = ("core_attn",)
    """Megatron-Core ``--recompute-modules`` under selective recompute (the default core_attn
    is Korthikanti's selective recomputation)."""
    flash_attention: bool = True
    expert_tp: int = 1
    vocab_size_padded: int | None = None
    """LM-head rows after padding (logits width); None = the model's vocab_size."""
    offload_modules: tuple[str, ...] = ()
    """Megatron-Core fine-grained activation offloading: submodules whose saved inputs go to
    host memory (``offloaded_module_bytes``)."""
    fp8_linear_inputs: bool = False
    """FP8 training: linear layers save their input for the weight gradient in FP8 (1 B),
    the tensor the FP8 GEMM consumed (Transformer Engine saves the quantized input;
    DeepSeek-V3 report §3.3.2 "Low-Precision Storage")."""
    fp8_moe_act_inputs: bool = False
    """The MoE experts' activation (SwiGLU) inputs, the gate and up outputs, cached in FP8
    (1 B) instead of 16-bit: DeepSeek-V3 report §3.3.2, "Inputs of the SwiGLU operator in
    MoE ... we cache the inputs of the SwiGLU operator and recompute its output in the backward
    pass. These activations are also stored in FP8" (``Strategy.fp8_moe_act_inputs``)."""


def _replicated_terms(model: ModelSpec, s, b):
    """Bytes outside the TP-sharded regions: norm inputs, dropout masks on the residual path.

    Korthikanti Table 2's "10·s·b·h": LayerNorm inputs 4, QKV input 2, MLP input 2, masks 2.
    """
    h = model.hidden_size
    sbh = s * b * h
    norm_inputs = model.norms_per_layer * ACT_BYTES * sbh
    # Inputs to the column-parallel GEMMs (QKV and MLP-in); with parallel attention/MLP they
    # share one normalized input.
    gemm_inputs = (1 if model.parallel_attention_mlp else 2) * ACT_BYTES * sbh
    masks = (2 * MASK_BYTES * sbh) if model.hidden_dropout > 0 else 0 * sbh
    return norm_inputs + gemm_inputs + masks


def _attention_sharded_terms(model: ModelSpec, s, b):
    """Attention bytes inside the TP region excluding the s² core: Q, K, V, out-proj input."""
    a = model.num_attention_heads
    if model.is_mla:
        nope = model.qk_nope_head_dim or 0
        rope = model.qk_rope_head_dim or 0
        v_dim = model.v_head_dim or model.kv_channels
        q_k = 2 * a * (nope + rope)
        v = a * v_dim
        out_in = a * v_dim
        latents = (model.q_lora_rank or 0) + (model.kv_lora_rank or 0) + rope
        return ACT_BYTES * s * b * (q_k + v + out_in + latents)
    d, g = model.kv_channels, model.num_kv_heads
    return ACT_BYTES * s * b * (a * d + g * d + g * d + a * d)


def _attention_core_terms(model: ModelSpec, s, b, flash_attention: bool):
    """The attention core: softmax output (+ dropout mask and output) or flash-attention LSE."""
    a = model.num_attention_heads
    if flash_attention:
        return LSE_BYTES * a * s * b
    per_score = ACT_BYTES + (MASK_BYTES + ACT_BYTES if model.attention_dropout > 0 else 0)
    return per_score * a * s * s * b


def _mla_up_proj_terms(model: ModelSpec, s, b):
    """MLA up-projection outputs (Q, K, V heads after RoPE) that ``mla_up_proj`` recompute
    drops: 2·a·(d_nope + d_rope) + a·d_v per token (inside ``_attention_sharded_terms``)."""
    if not model.is_mla:
        return 0 * s
    a, nope, rope = model.num_attention_heads, model.qk_nope_head_dim or 0, model.qk_rope_head_dim or 0
    return ACT_BYTES * s * b * (2 * a * (nope + rope) + a * (model.v_head_dim or model.kv_channels))


def _norm_output_terms(model: ModelSpec, s, b):
    """Norm outputs kept as the QKV and MLP-in GEMM inputs (2·s·b·h each; one with parallel
    attention/MLP): what ``layernorm`` recompute drops (inside ``_replicated_terms``)."""
    return (1 if model.parallel_attention_mlp else 2) * ACT_BYTES * s * b * model.hidden_size


def _mlp_sharded_terms(model: ModelSpec, s, b, ffn_hidden: int, tokens_factor: float = 1.0):
    """MLP bytes inside the TP region: activation input(s) and output, width f.

    Gated (SwiGLU): gate and up outputs 2·2·f, product 2·f = 6·s·b·f.
    Non-gated (GELU): activation input 2·f and output 2·f = 4·s·b·f (Korthikanti: 16·s·b·h).
    """
    per_token = (6 if model.is_gated_mlp else 4) * ffn_hidden
    return per_token * s * b * tokens_factor


def _attention_linear_inputs(model: ModelSpec, s, b):
    """Stored attention terms that are linear-layer inputs: the out-projection input, and MLA's
    latents (inputs of the up-projections)."""
    a = model.num_attention_heads
    if model.is_mla:
        v_dim = model.v_head_dim or model.kv_channels
        latents = (model.q_lora_rank or 0) + (model.kv_lora_rank or 0)
        return ACT_BYTES * s * b * (a * v_dim + latents)
    return ACT_BYTES * s * b * a * model.kv_channels


def _permuted_terms(model: ModelSpec, s, b):
    """The k permuted copies of each token (the routed experts' fc1 input), 16-bit."""
    return ACT_BYTES * model.num_experts_per_tok * s * b * model.hidden_size


def _moe_extra_terms(model: ModelSpec, s, b):
    """MoE bookkeeping: router logits (fp32, s·b·E·4) and the permuted expert inputs (k copies)."""
    k = model.num_experts_per_tok
    router = 4 * s * b * model.num_experts
    permuted = ACT_BYTES * k * s * b * model.hidden_size
    return router + permuted


def moe_act_input_keep(opts: ActivationOptions) -> float:
    """Share of the 16-bit bytes the MoE activation inputs keep: 1/2 when cached in FP8
    (``ActivationOptions.fp8_moe_act_inputs``, DeepSeek-V3 §3.3.2), else 1."""
    return BYTES_PER_ELEMENT["fp8"] / ACT_BYTES if opts.fp8_moe_act_inputs else 1.0


def layer_activation_bytes(model: ModelSpec, s, b, opts: ActivationOptions, moe_layer=False):
    """Bytes one layer stores for backward for one micro-batch (Korthikanti Table 2, general).

    ``s`` is the per-rank sequence length (s/cp with context parallelism), ``b`` the
    micro-batch size. Returns bytes per GPU.
    """
    t = opts.tp
    h = model.hidden_size
    if opts.recompute == "full":
        divisor = t if opts.sequence_parallel else 1
        return ACT_BYTES * s * b * h / divisor
    modules = set(opts.recompute_modules) if opts.recompute == "selective" else set()
    if "op_sac" in modules:  # torchtitan per-op SAC keeps its own set of tensors
        from perfcast.memory.op_sac_activations import op_sac_layer_bytes

        return op_sac_layer_bytes(model, s, b, opts, moe_layer)
    # FP8 linear inputs keep 1 of their 2 bytes: the share of a term that is a GEMM input.
    fp8_keep = BYTES_PER_ELEMENT["fp8"] / ACT_BYTES if opts.fp8_linear_inputs else 1.0
    replicated = _replicated_terms(model, s, b) - (1 - fp8_keep) * _norm_output_terms(model, s, b)
    if "layernorm" in modules:
        replicated = replicated - fp8_keep * _norm_output_terms(model, s, b)
    sharded = _attention_sharded_terms(model, s, b) - (1 - fp8_keep) * _attention_linear_inputs(
        model, s, b)
    if "mla_up_proj" in modules:
        sharded = sharded - _mla_up_proj_terms(model, s, b)
    # Gated MLP: 2·f of the 6·f per token is the fc2 input (the activation's output); else 2·f
    # of 4·f.
    fc2_share = 2 / (6 if model.is_gated_mlp else 4)
    if moe_layer:
        k = model.num_experts_per_tok
        expert = _mlp_sharded_terms(model, s, b, model.expert_intermediate_size, k)
        # moe_act drops the fc2 input; FP8 keeps it in 1 B.
        # The rest (gate and up outputs, 1 - fc2_share) is the activation input: FP8 under
        # fp8_moe_act_inputs.
        act_in = (1 - fc2_share) * moe_act_input_keep(opts)
        expert = expert * (act_in + fc2_share * (0 if "moe_act" in modules else fp8_keep))
        shared_width = model.shared_intermediate_size
        shared = _mlp_sharded_terms(model, s, b, shared_width) if shared_width else 0
        shared = shared * (act_in + fc2_share * fp8_keep)
        if "shared_experts" in modules:
            shared = 0
        # Expert grid: T·k·etp/tp routed tokens per GPU at width ffn/etp, i.e. the expert
        # terms over tp whatever etp (``graph.layer.mlp_forward_ops``). The permuted copies
        # are the experts' fc1 input.
        extra = _moe_extra_terms(model, s, b) - (1 - fp8_keep) * _permuted_terms(model, s, b)
        mlp = expert + shared + extra
        if "moe" in modules:
            mlp = 0 * s
    else:
        mlp = _mlp_sharded_terms(model, s, b, model.intermediate_size) * (
            1 - fc2_share * (1 - fp8_keep))
        if "mlp" in modules:
            mlp = 0 * s
    core = 0 * s if "core_attn" in modules else _attention_core_terms(
        model, s, b, opts.flash_attention
    )
    offloaded = offloaded_module_bytes(model, s, b, opts, moe_layer)
    if opts.sequence_parallel:
        return (replicated + sharded + mlp + core) / t - offloaded
    return replicated + (sharded + mlp + core) / t - offloaded


def offloaded_module_bytes(model: ModelSpec, s, b, opts: ActivationOptions, moe_layer=False):
    """Bytes per GPU of one layer's saved tensors that fine-grained offloading keeps in host
    memory (Megatron-Core ``offload_modules``, frameworks.md §1.3: the inputs of the chosen
    submodules): attn_norm / mlp_norm their norm input (2·s·b·h each), qkv_linear the QKV input
    (the norm output, unless layernorm is recomputed), core_attn Q, K, V (unless MLA's
    up-projection is recomputed), attn_proj the out-projection input, expert_fc1 the permuted
    tokens and moe_act the experts' activation input (gate and up outputs), each in the dtype
    it is stored in (FP8 linear inputs)."""
    chosen = set(opts.offload_modules)
    if not chosen or opts.recompute == "full":
        return 0 * s
    t, h, a = opts.tp, model.hidden_size, model.num_attention_heads
    recomputed = set(opts.recompute_modules) if opts.recompute == "selective" else set()
    fp8_keep = BYTES_PER_ELEMENT["fp8"] / ACT_BYTES if opts.fp8_linear_inputs else 1.0
    rep_div = t if opts.sequence_parallel else 1
    sbh = ACT_BYTES * s * b * h
    replicated = sharded = 0 * s
    replicated += sbh * (("attn_norm" in chosen) + ("mlp_norm" in chosen
                                                    and model.norms_per_layer > 1))
    if "qkv_linear" in chosen and "layernorm" not in recomputed:
        replicated += sbh * fp8_keep
    if "core_attn" in chosen:
        if model.is_mla:
            if "mla_up_proj" not in recomputed:
                sharded += _mla_up_proj_terms(model, s, b)
        else:
            sharded += ACT_BYTES * s * b * (a + 2 * model.num_kv_heads) * model.kv_channels
    if "attn_proj" in chosen:
        v_dim = (model.v_head_dim or model.kv_channels) if model.is_mla else model.kv_channels
        sharded += ACT_BYTES * s * b * a * v_dim * fp8_keep
    if moe_layer and "expert_fc1" in chosen:
        sharded += _permuted_terms(model, s, b) * fp8_keep
    if moe_layer and "moe_act" in chosen:
        expert = _mlp_sharded_terms(model, s, b, model.expert_intermediate_size,
                                    model.num_experts_per_tok)
        sharded += expert * (1 - 2 / (6 if model.is_gated_mlp else 4)) * moe_act_input_keep(opts)
    return replicated / rep_div + sharded / t


def recompute_working_bytes(model: ModelSpec, s, b, opts: ActivationOptions, moe_layer=False):
    """Extra peak during backward with full recompute: one layer's activations rebuilt at once.

    Korthikanti et al. 2022 §5: full recomputation re-runs each layer's forward just before its
    backward, so the full per-layer set of one layer is live at the peak.
    """
    if opts.recompute == "selective" and "op_sac" in opts.recompute_modules:
        from perfcast.memory.op_sac_activations import op_sac_working_bytes

        return op_sac_working_bytes(model, s, b, opts, moe_layer)
    if opts.recompute != "full":
        return 0 * s
    return layer_activation_bytes(model, s, b, replace(opts, recompute="none"), moe_layer)


def embedding_activation_bytes(model: ModelSpec, s, b, opts: ActivationOptions):
    """First stage: the embedding's dropout mask s·b·h (Korthikanti §4.3), /t with SP."""
    if model.hidden_dropout <= 0:
        return 0 * s
    divisor = opts.tp if opts.sequence_parallel else 1
    return MASK_BYTES * s * b * model.hidden_size / divisor


def output_activation_bytes(model: ModelSpec, s, b, opts: ActivationOptions):
    """Last stage: final-norm output 2·s·b·h/t and fp32 logits 4·s·b·V/t for the loss.

    Korthikanti et al. 2022 §4.3: "4·s·b·h/t·(1 + v/h)"; held for one micro-batch at a time.
    """
    t = opts.tp
    head_input = ACT_BYTES * s * b * model.hidden_size / (t if opts.sequence_parallel else 1)
    vocab = model.vocab_size if opts.vocab_size_padded is None else opts.vocab_size_padded
    logits = 4 * s * b * vocab / t
    return head_input + logits
