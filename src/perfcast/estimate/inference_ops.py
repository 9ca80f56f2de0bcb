"""Operators of one serving step of one layer on one GPU, built from the training graph.

A serving step runs ``tokens`` new tokens through every layer: a prefill of b sequences of s
prompt tokens has b·s; a decode step of a batch of B sequences has B (one per sequence); a
continuous-batching step mixes both (Agrawal et al., Sarathi-Serve, 2024 §4: chunked prefills
ride along with decodes). The GEMMs, memory-bound ops and collectives of the step are the
forward ops of ``graph.layer`` at that token count; only attention differs between phases and
is built here (``AttentionPass``): a prefill pass is causal flash attention over the prompt,
a decode pass reads every cached key and value once (Pope et al. 2022 §3.1).

MoE decode reads only the experts its tokens hit: with T tokens each routed to k of E experts
uniformly, an expert is missed by all of them with probability (1 − k/E)^T, so the expected
number of distinct experts touched is E·(1 − (1 − k/E)^T) (occupancy of E bins by T draws of
k; the balanced-routing assumption of Fedus et al., Switch Transformer, 2022 §2.2). With
expert parallelism the step waits for the busiest EP rank (the expert outputs meet in the TP
all-reduce or the all-to-all combine), so a GPU's expert GEMMs cover the expected *largest*
number of distinct experts hit on any one of the ep ranks, not the mean: E[max] of ep
binomial counts (``busiest_rank_experts_hit``). At a few decode tokens this is ~1.5× the mean
for DeepSeek-V3 at EP 8; at hundreds of tokens every expert is hit and it equals the mean.
A learned router is not uniform either: the busiest EP rank receives ``moe_load_imbalance``
times the balanced share of the routed tokens (``graph.stage.moe_load_imbalance``: 1 without EP
or under forced balancing, a stated value, else the dropless learned-router imbalance of
``calibration/moe_routing.yaml``, measured on Qwen3-235B-A22B at EP 8 from forced-balance /
real-routing pairs; the same value training uses), which sets the pace of a prefill step's
compute-bound expert GEMMs and of the busiest rank's dispatch (``LayerShape.routed_load``).

MLA decode reads the compressed latent (DeepSeek-V2 §2.1.2) and applies the key and value
up-projections per query instead of to the cache: W_UK to the query's no-rope part, W_UV to the
attention output (the split matrices, ``kv_up_proj``'s bytes). Engines that multiply them into
the neighbouring projections ahead of time ("absorbed": W_UQ·W_UK and W_UV·W_O, DeepSeek-V2
§2.1.2 "we can absorb W_UK into W_UQ, and W_UV into W_O") read bigger matrices every decode
step: heads·kv_lora_rank columns instead of heads·(nope + rope) and heads·v_head_dim
(``absorbed_mla_decode_ops``; vLLM ≤ 0.7.3, ``EngineConfig.mla_decode_weights``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from math import lgamma

import numpy as np

from perfcast.arrays import Floats
from perfcast.graph.layer import (
    ACT_BYTES,
    LayerShape,
    attention_forward_ops,
    layer_comm_ops,
    layer_memory_bound_ops,
    mlp_forward_ops,
)
from perfcast.graph.ops import AttentionOp, Collective, CommOp, GemmOp, Group, MemoryOp, Phase
from perfcast.graph.stage import moe_load_imbalance
from perfcast.specs.model import ModelSpec
from perfcast.specs.strategy import Strategy


@dataclass(frozen=True)
class AttentionPass:
    """``num_seqs`` sequences each attending ``seq_q`` new queries to ``seq_kv`` keys."""

    num_seqs: float
    seq_q: float
    seq_kv: Floats
    """Keys per sequence: a float, or a numpy array (one entry per decode step)."""
    causal: bool

    @property
    def decode(self) -> bool:
        """Reads a cache (decode, or speculative verification of seq_q tokens), not causal."""
        return not self.causal


@dataclass(frozen=True)
class StepOps:
    """Ops of one layer for one step on one GPU (attention as passes, timed separately)."""

    compute: tuple[GemmOp | MemoryOp, ...]
    comm: tuple[CommOp, ...]
    attention: tuple[AttentionPass, ...]


def expected_experts_hit(num_experts: float, top_k: float, tokens: Floats) -> Floats:
    """Expected distinct experts receiving at least one of ``tokens`` tokens: E·(1 − (1 − k/E)^T).
    Array-friendly in ``tokens``."""
    return num_experts * (1.0 - (1.0 - top_k / num_experts) ** tokens)


def busiest_rank_experts_hit(num_experts: int, top_k: float, tokens: Floats, ep: int) -> Floats:
    """Expected largest number of distinct experts hit on one of ``ep`` ranks of E/ep experts.

    Each expert is hit with probability p = 1 − (1 − k/E)^T (module docstring), so a rank's
    count is Binomial(n = E/ep, p), and the ranks are treated as independent (their counts are
    weakly negatively correlated through the fixed T·k draws: a slight overestimate). The
    expected maximum of ep i.i.d. counts is Σ_{j<n} (1 − F(j)^ep) with F the binomial CDF
    (E[X] = Σ_{j≥0} P(X > j) for a non-negative integer X; P(max ≤ j) = F(j)^ep). ep = 1 gives
    the mean n·p. Array-friendly in ``tokens``.
    """
    per_rank = max(int(round(num_experts / ep)), 1)
    p = 1.0 - (1.0 - top_k / num_experts) ** tokens
    if ep <= 1:
        return per_rank * p
    q = np.clip(np.asarray(p, dtype=float), 1e-12, 1.0 - 1e-12)[..., None]
    i = np.arange(per_rank + 1)
    log_choose = np.array([lgamma(per_rank + 1) - lgamma(j + 1) - lgamma(per_rank - j + 1)
                           for j in i])
    pmf = np.exp(log_choose + i * np.log(q) + (per_rank - i) * np.log1p(-q))
    cdf = np.minimum(np.cumsum(pmf, axis=-1)[..., :per_rank], 1.0)
    return np.sum(1.0 - cdf ** ep, axis=-1)


def _moe_read_only_hit(model: ModelSpec, strategy: Strategy, ops: list, tokens: Floats,
                       routed_load: float = 1.0) -> list:
    """Expert GEMMs over the experts the busiest EP rank's tokens hit, not all local experts:
    ``m`` rows per hit expert (the busiest rank's routed tokens, ``routed_load`` × the balanced
    share, over the mean count of hit experts) on the largest expected count of hit experts of
    any rank (module docstring)."""
    E, k, ep = model.num_experts, model.num_experts_per_tok, strategy.ep
    hit_mean = np.maximum(expected_experts_hit(E, k, tokens) / ep, 1e-9)
    hit = np.maximum(busiest_rank_experts_hit(E, k, tokens, ep), 1e-9)
    routed_tokens = tokens * k / ep * routed_load
    out = []
    for op in ops:
        if isinstance(op, GemmOp) and op.name.startswith("expert_"):
            op = replace(op, m=routed_tokens / hit_mean, batch=hit)
        out.append(op)
    return out


def absorbed_mla_decode_ops(model: ModelSpec, ops: list, heads: float) -> list:
    """The attention GEMMs of an MLA decode step with the up-projections absorbed (module
    docstring), as vLLM@0.7.3 attention/backends/mla/utils.py runs them by default
    (VLLM_MLA_PERFORM_MATRIX_ABSORPTION=1, envs.py L546-547; process_weights_after_loading
    L329-387): W_Q_UK = W_UQ·W_UK (q_lora_rank × heads·kv_lora_rank, requantized to FP8) and
    W_QR (q_lora_rank × heads·rope, kept in 16 bit: "W_QR is small so for simplicity we dont
    bother requantizing it", L326-327) replace ``q_up_proj``; W_UV_O = W_UV·W_O (heads·kv_lora_rank
    × hidden, FP8) replaces ``out_proj``; no ``kv_up_proj`` runs. ``heads`` = query heads on
    the GPU. For DeepSeek-V3 at 16 heads a GPU the three read 74 MB a layer instead of 21 MB."""
    r_kv, rope = float(model.kv_lora_rank or 0), float(model.qk_rope_head_dim or 0)
    out = []
    for op in ops:
        if not isinstance(op, GemmOp) or op.name not in ("q_up_proj", "q_proj", "kv_up_proj",
                                                         "out_proj"):
            out.append(op)
        elif op.name == "out_proj":
            out.append(replace(op, name="out_absorbed_proj", k=heads * r_kv))
        elif op.name != "kv_up_proj":  # q_up_proj / q_proj: its input width k stays
            out.append(replace(op, name="q_absorbed_proj", n=heads * r_kv))
            out.append(replace(op, name="q_rope_proj", n=heads * rope, fp8_eligible=False))
    return out


def step_dispatcher(strategy: Strategy, passes: tuple[AttentionPass, ...]) -> str:
    """The MoE dispatcher of one step: with 'deepep-low-latency', decode-only steps use DeepEP's
    low-latency kernels and steps with prefill tokens its normal kernels (DeepEP README: normal
    kernels for training and inference prefill, low-latency kernels for inference decoding;
    SGLang ``--deepep-mode auto`` switches the same way)."""
    if strategy.moe_token_dispatcher != "deepep-low-latency":
        return strategy.moe_token_dispatcher
    return strategy.moe_token_dispatcher if all(p.decode for p in passes) else "deepep"


def step_layer_ops(
    model: ModelSpec,
    strategy: Strategy,
    tokens: Floats,
    passes: tuple[AttentionPass, ...],
    moe: bool,
    attention_dp: bool = False,
    mla_absorbed: bool = False,
    dp_all_gather: bool = False,
) -> StepOps:
    """Forward ops of one layer for a step of ``tokens`` tokens with attention ``passes``.

    ``attention_dp`` (DeepSeek-V3 §3.4 serving: attention data-parallel inside the TP group)
    runs attention unsplit on 1/tp of the sequences and keeps TP for the MLP/experts only.
    ``mla_absorbed``: an MLA model's attention GEMMs in the absorbed form
    (``absorbed_mla_decode_ops``; decode steps of engines that absorb). ``dp_all_gather``:
    under attention DP the ranks' hidden states are gathered for the MLP by a collective
    all-gather of the step's tokens every layer (SGLang 0.4.3-0.4.4,
    ``EngineConfig.attention_dp_gather``), besides the MLP's all-reduce.
    """
    tp = strategy.tp
    shape = LayerShape(micro_batch=1, seq_length=tokens, tp=tp, ep=strategy.ep,
                       expert_tp=strategy.expert_tp, moe=moe,
                       moe_token_dispatcher=step_dispatcher(strategy, passes),
                       moe_load_imbalance=moe_load_imbalance(strategy) if moe else 1.0)
    attn_shape = replace(shape, seq_length=tokens / tp, tp=1) if attention_dp else shape
    attention = [op for op in attention_forward_ops(model, attn_shape)
                 if not isinstance(op, AttentionOp)]
    if mla_absorbed and model.is_mla:
        attention = absorbed_mla_decode_ops(model, attention,
                                            model.num_attention_heads / attn_shape.tp)
    mlp = mlp_forward_ops(model, shape)
    if moe:
        mlp = _moe_read_only_hit(model, strategy, mlp, tokens, shape.routed_load)
    memory = layer_memory_bound_ops(model, shape)
    comm = [op for op in layer_comm_ops(model, shape)
            if isinstance(op, CommOp) and op.phase == Phase.FORWARD]
    if attention_dp:  # each rank dispatches only its own tokens (1/tp of the step) to the experts
        comm = [replace(op, count=op.count / 2) if op.name == "tp_all_reduce" else
                replace(op, size_bytes=op.size_bytes / tp) if op.group == Group.EP else op
                for op in comm]
        passes = tuple(replace(p, num_seqs=p.num_seqs / tp) for p in passes)
        if dp_all_gather and tp > 1:
            comm.append(CommOp("dp_all_gather", Phase.FORWARD, Group.TP, Collective.ALL_GATHER,
                               ACT_BYTES * tokens * model.hidden_size))
    compute = tuple(op for op in attention + mlp + memory if isinstance(op, GemmOp | MemoryOp))
    return StepOps(compute=compute, comm=tuple(comm), attention=passes)


def head_step_ops(model: ModelSpec, strategy: Strategy,
                  logits_tokens: Floats) -> tuple[GemmOp | MemoryOp, ...]:
    """Final norm and LM head for the ``logits_tokens`` tokens that are sampled (one per
    sequence: prefill needs only the last prompt position's logits)."""
    h, V, t = model.hidden_size, model.vocab_size, strategy.tp
    return (
        MemoryOp("final_norm", Phase.FORWARD, 2 * 2 * logits_tokens * h),
        GemmOp("lm_head", Phase.FORWARD, logits_tokens, V / t, h, fp8_eligible=False),
    )


def attention_op(model: ModelSpec, strategy: Strategy, p: AttentionPass,
                 attention_dp: bool = False) -> AttentionOp:
    """The flash-attention record of a prefill pass (heads split over TP unless attention-DP)."""
    heads = model.num_attention_heads / (1 if attention_dp else strategy.tp)
    d_qk, d_v = head_dims(model)
    return AttentionOp("attention", Phase.FORWARD, batch=p.num_seqs, heads=heads, seq_q=p.seq_q,
                       seq_kv=p.seq_kv, head_dim_qk=d_qk, head_dim_v=d_v, causal=p.causal,
                       window=model.sliding_window)


def head_dims(model: ModelSpec) -> tuple[float, float]:
    """(d_qk, d_v) of the attention kernel (MLA: nope + rope and v_head_dim)."""
    if model.is_mla:
        nope, rope = model.qk_nope_head_dim or 0, model.qk_rope_head_dim or 0
        return nope + rope, model.v_head_dim or model.kv_channels
    return model.kv_channels, model.kv_channels
