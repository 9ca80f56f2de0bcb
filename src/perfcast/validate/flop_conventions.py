"""FLOP-counting conventions of the ground-truth sources: TFLOP/s/GPU -> tokens/s/GPU.

../shared/ground_truth/README.md, "Judge throughput, not published TFLOP/s": score on tokens/s,
and where a source gives only TFLOP/s, convert with that source's own formula:

| source | recompute counted? | attention counted as |
|---|---|---|
| Narayanan 2021 (``F = 96·B·s·l·h²·(1 + s/6h + V/16lh)``) | yes (4 passes) | full |
| MPT, torchtitan, NeMo up to 25.07 | no | full (non-causal) |
| PaLM / Llama convention (``6N + 12·L·H·Q·T`` per token) | no | full |

Conventions here:

- ``narayanan_4pass``: Narayanan et al. 2021 Eq. (3), FLOPs per iteration
  ``F = 96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h))`` with a recompute forward pass (megatron_sc21,
  Tables 1 and 2). Per token: ``F/(B·s) = 96·l·h²·(1 + s/(6h) + V/(16·l·h))``.
- ``narayanan_3pass``: the same without the recompute pass, ``72·l·h²·(...)``: the model FLOPs
  of Korthikanti et al. 2022 (their MFU "excludes recompute"; HFU includes it). Check: 22B,
  s 2048, 930.9 tokens/s/GPU -> 41.5% of 312 TFLOP/s, the published MFU.
- ``six_n_full_attention``: ``6·N + 12·L·w·s`` per token (w = query width a·d_head), attention
  counted over the full s×s score matrix (non-causal). N is the active matmul parameter count
  with the LM head counted once and the input embedding excluded. MPT
  (``3·(2N·s + 4·l·d·s²)`` per sequence, N = all params incl. the tied embedding), torchtitan
  (``6N + 12·l·h·q·t``, N without the token embedding) and NeMo ``flops_formulas`` before
  2025-08 (``l·h²·(12 + 12g/a + 18f/h + 12s/h + 6V/(lh))`` for Llama) all reduce to it; they
  differ only in norm weights and biases (< 0.1%). For MLA the attention term is
  ``6·L·s·a·(d_qk + d_v)``.
- ``megatron_causal`` / ``megatron_causal_mtp``: Megatron-LM ``num_floating_point_operations``
  (``megatron/training/training.py``, ``transformer_flops``; ../shared/ground_truth/
  training_2025_additions.md: "Megatron counts causal attention and MTP"). Projections and MLPs
  at 3 passes x 2 FLOP per MAC, attention scores and context over half of the s×s matrix
  (causal), routed experts at top-k (+ shared experts), the LM head per output head, no
  recompute, no router or norms outside MLA/MTP; ``_mtp`` adds the model's multi-token-prediction
  layers (``--mtp-num-layers``) as extra decoder layers, their two norms and ``eh_proj``, and one
  more LM head each (``megatron_flops_per_token``).
"""

from __future__ import annotations

from typing import Literal

from perfcast.graph.params import count_params
from perfcast.specs.model import ModelSpec

FlopConvention = Literal["narayanan_4pass", "narayanan_3pass", "six_n_full_attention",
                         "megatron_causal", "megatron_causal_mtp"]

TERA = 1e12

SOURCE_CONVENTIONS: dict[str, FlopConvention] = {
    "megatron_sc21": "narayanan_4pass",
    "korthikanti2022": "narayanan_3pass",
    "mosaic_mpt": "six_n_full_attention",
    "torchtitan": "six_n_full_attention",
    "nemo_perf": "six_n_full_attention",
    "palm": "six_n_full_attention",
}
"""Convention of each source when its ``tflops_definition`` cell names none (README table).

nemo_automodel is absent on purpose: its formula is not restated, and arithmetic on its rows
that give both numbers fits no single convention (Llama-3-70B matches causal attention to 1.4%,
the MoE rows differ by about 20%). Its rows all publish tokens/s, so no conversion is needed."""


def narayanan_flops_per_token(
    num_layers: int, hidden_size: int, seq_length: int, vocab_size: int, passes: int = 4
) -> float:
    """Narayanan et al. 2021 Eq. (3) per token: ``24·passes·l·h²·(1 + s/(6h) + V/(16·l·h))``.

    ``passes`` = 4 counts the recompute forward (the paper's 96), 3 does not (72).
    Units: FLOP per token.
    """
    layers, h, s, v = num_layers, hidden_size, seq_length, vocab_size
    return 24.0 * passes * layers * h * h * (1.0 + s / (6.0 * h) + v / (16.0 * layers * h))


def six_n_params(model: ModelSpec) -> int:
    """N of the ``6N`` conventions: active parameters without the input embedding (and learned
    position table), LM head counted once (tied or not)."""
    counts = count_params(model)
    lm_head = model.vocab_size * model.hidden_size
    return counts.active - counts.embedding - counts.lm_head + lm_head


def attention_flops_per_token(model: ModelSpec, seq_length: int) -> float:
    """Training FLOPs of the score and context matmuls per token, full (non-causal) s×s.

    Forward ``2·s·a·d_qk + 2·s·a·d_v`` per layer, times 3 for forward + backward:
    ``6·L·s·a·(d_qk + d_v)`` = ``12·L·(a·d)·s`` for standard attention.
    """
    a = model.num_attention_heads
    if model.is_mla:
        d_qk = (model.qk_nope_head_dim or 0) + (model.qk_rope_head_dim or 0)
        d_v = model.v_head_dim or model.kv_channels
    else:
        d_qk = d_v = model.kv_channels
    return 6.0 * model.num_hidden_layers * seq_length * a * (d_qk + d_v)


def six_n_flops_per_token(model: ModelSpec, seq_length: int) -> float:
    """``6·N + 12·L·w·s`` per token (MPT / torchtitan / NeMo / PaLM convention). FLOP/token."""
    return 6.0 * six_n_params(model) + attention_flops_per_token(model, seq_length)


def _megatron_attention_per_layer(model: ModelSpec, seq_length: int) -> float:
    """Attention FLOPs per token per layer in ``transformer_flops`` (3 passes, 2 FLOP/MAC).

    GQA/MHA: ``12·h·q·(1 + g/a) + 6·q·s`` (q = a·d query width, g KV groups; the ``s/2h``
    term is the causal half of ``QK^T`` and ``PV``). MLA: ``6·(q_term + r_kv·(h + a·(d_nope +
    d_v) + 1) + h·d_rope + a·d_v·h + s·a·(d_nope + d_rope)/2 + s·a·d_v/2)`` with
    ``q_term = r_q·(h + a·(d_nope + d_rope) + 1)`` (or ``h·a·(d_nope + d_rope)`` without a
    query LoRA). FLOP per token per layer.
    """
    h, a, s = model.hidden_size, model.num_attention_heads, seq_length
    if model.is_mla:
        d_nope, d_rope = model.qk_nope_head_dim or 0, model.qk_rope_head_dim or 0
        d_v = model.v_head_dim or model.kv_channels
        r_kv = model.kv_lora_rank or 0
        if model.q_lora_rank is None:
            q_term = h * a * (d_nope + d_rope)
        else:
            q_term = model.q_lora_rank * (h + a * (d_nope + d_rope) + 1)
        return 6.0 * (q_term + r_kv * (h + a * (d_nope + d_v) + 1) + h * d_rope + a * d_v * h
                      + s * a * (d_nope + d_rope) / 2 + s * a * d_v / 2)
    q = a * model.kv_channels
    return 12.0 * h * q * (1.0 + model.num_kv_heads / a) + 6.0 * q * s


def megatron_flops_per_token(model: ModelSpec, seq_length: int, mtp_layers: int = 0) -> float:
    """Megatron-LM ``num_floating_point_operations`` / (batch · seq) for a decoder model.

    ``12·h·g·(f·L_dense + f_e·k·L_moe + f_sh·L_moe) + L'·attn + 6·mtp·(3h + 2h²)
    + 6·h·V·(mtp + 1)`` with g = 3/2 for gated MLPs, L' = L + mtp, MTP layers counted as MoE
    layers when the last decoder layer is MoE (Megatron-LM ``megatron/training/training.py``,
    ``num_floating_point_operations`` -> ``transformer_flops``; the vocabulary padding to a
    multiple of 128·TP is left out, < 0.2% for the rows here). FLOP per token.
    """
    h = model.hidden_size
    gated = 1.5 if model.is_gated_mlp else 1.0
    moe_layers, dense_layers = model.num_moe_layers, model.num_dense_layers
    last_is_moe = model.is_moe and moe_layers > 0 and (
        (model.num_hidden_layers - 1 - model.first_k_dense_layers) % model.moe_layer_freq == 0)
    if last_is_moe:
        moe_layers += mtp_layers
    else:
        dense_layers += mtp_layers
    mlp = model.intermediate_size * dense_layers
    if model.is_moe:
        mlp += (model.expert_intermediate_size * model.num_experts_per_tok
                + model.shared_intermediate_size) * moe_layers
    layers = model.num_hidden_layers + mtp_layers
    return (12.0 * h * gated * mlp
            + layers * _megatron_attention_per_layer(model, seq_length)
            + 6.0 * mtp_layers * (3 * h + 2 * h * h)
            + 6.0 * h * model.vocab_size * (mtp_layers + 1))


def flops_per_token(convention: FlopConvention, model: ModelSpec, seq_length: int) -> float:
    """FLOPs per trained token that a source's TFLOP/s figure counts."""
    if convention == "six_n_full_attention":
        return six_n_flops_per_token(model, seq_length)
    if convention == "megatron_causal":
        return megatron_flops_per_token(model, seq_length)
    if convention == "megatron_causal_mtp":
        return megatron_flops_per_token(model, seq_length, model.num_nextn_predict_layers)
    passes = 4 if convention == "narayanan_4pass" else 3
    return narayanan_flops_per_token(
        model.num_hidden_layers, model.hidden_size, seq_length, model.vocab_size, passes
    )


def convention_for(source_id: str, tflops_definition: str) -> FlopConvention | None:
    """The convention named by a row's ``tflops_definition`` text, else its source's default.

    Text rules: "96*B*s*l*h^2" / "Eq. 3" / "includes recompute" -> ``narayanan_4pass``;
    "Korthikanti" -> ``narayanan_3pass``; "num_floating_point_operations" or "Megatron" with
    "causal" -> ``megatron_causal`` (``megatron_causal_mtp`` when the text names MTP); "6*N",
    "NeMo", "flops_formulas", "torchtitan" -> ``six_n_full_attention``.
    """
    text = tflops_definition.lower().replace(" ", "")
    megatron = "num_floating_point_operations" in text or (
        "megatron" in text and "causal" in text and "non-causal" not in text)
    if megatron:
        return "megatron_causal_mtp" if "mtp" in text else "megatron_causal"
    if "96*b*s*l*h^2" in text or "eq.3" in text or "includesrecompute" in text:
        return "narayanan_4pass"
    if "korthikanti" in text:
        return "narayanan_3pass"
    if any(key in text for key in ("6*n", "6n+", "nemo", "flops_formulas", "torchtitan")):
        return "six_n_full_attention"
    return SOURCE_CONVENTIONS.get(source_id)


def tokens_per_s_from_tflops(tflops_per_gpu: float, flops_per_token_: float) -> float:
    """Tokens/s/GPU = TFLOP/s/GPU · 1e12 / (FLOP per token)."""
    return tflops_per_gpu * TERA / flops_per_token_


def tflops_from_mfu(mfu: float, peak_tflops: float) -> float:
    """Achieved model TFLOP/s/GPU from an MFU fraction and the peak the source used
    (README: A100 312 TF; H100 BF16 989 TF; MPT's FP8 MFU uses 1979 TF)."""
    return mfu * peak_tflops
