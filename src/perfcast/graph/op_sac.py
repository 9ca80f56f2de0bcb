"""torchtitan per-op selective activation checkpointing (``op_sac``): which matmuls it re-runs.

torchtitan ``activation_checkpoint.mode = "selective"`` with ``selective_ac_option = "op"``
(frameworks.md §3; the default ``SelectiveAC.Config`` on main, TTmain activation_checkpoint.py
L185-195) wraps each transformer block in a checkpoint whose policy, per aten op of the
block's forward, is: ops in ``_op_sac_save_list`` (``aten.mm``, the SDPA kernels, the TP
``reduce_scatter_tensor``, ``aten.max``) are saved, except every second ``aten.mm`` (the
policy counts the block's mm calls and recomputes those with an even count); every other op
(norms, RoPE, SwiGLU, residual adds, casts) is recomputed in the backward. The count restarts
for each block (the policy's ``meta`` is created per checkpoint context), and the MoE router
gate's mm is always recomputed and not counted (``per_op_sac_force_recompute_mm_shapes_by_fqns
= ["moe.router.gate"]``). Routed experts run ``aten._grouped_mm``, which is not ``aten.mm``
and is saved (torchtitan's MoE models add it to the save list; recorded from the torchtitan
repository, unverified in shared/reference).

The mm order is torchtitan's module order: attention ``wq, wk, wv`` (or MLA ``wq_a, wq_b,
wkv_a, wkv_b``), ``wo``; feed-forward ``w1, w3, w2`` (``w2(silu(w1(x)) * w3(x))``); a MoE
layer's shared experts are a feed-forward of the same order. For Llama (7 mms) the recomputed
ones are ``wk``, ``wo`` and ``w3``; a layer with an even number of equal-sized mm pairs (MHA
with a non-gated MLP: q,k,v,o,fc1,fc2) re-runs exactly half of its matmul FLOPs.
perfcast's graph fuses ``wq, wk, wv`` into ``qkv_proj`` and ``w1, w3`` into ``mlp_in_proj``;
``op_sac_gemm_shares`` gives each graph GEMM the share of its FLOPs that is recomputed.
"""

from __future__ import annotations

from dataclasses import dataclass

from perfcast.graph.param_sharding import count_moe_layers
from perfcast.specs.model import ModelSpec


@dataclass(frozen=True)
class TorchtitanMatmul:
    """One ``aten.mm`` of a torchtitan block's forward, per token (before tensor parallelism)."""

    op_name: str
    """The perfcast graph GEMM (``graph.layer``) it is part of."""
    in_width: float
    out_width: float
    row_parallel: bool = False
    """Its output is a partial sum under TP (``wo``, ``w2``): full width on every rank."""

    @property
    def flops_per_token(self) -> float:
        """2·in·out FLOPs per token (one multiply-add per weight)."""
        return 2.0 * self.in_width * self.out_width


@dataclass(frozen=True)
class OpShare:
    """Share of a forward GEMM's FLOPs that op-SAC recomputes."""

    name: str
    share: float


def _attention_matmuls(model: ModelSpec) -> list[TorchtitanMatmul]:
    h, a = model.hidden_size, model.num_attention_heads
    if model.is_mla:
        nope, rope = model.qk_nope_head_dim or 0, model.qk_rope_head_dim or 0
        v_dim = model.v_head_dim or model.kv_channels
        r_q, r_kv = model.q_lora_rank, model.kv_lora_rank or 0
        q = ([TorchtitanMatmul("q_down_proj", h, r_q),
              TorchtitanMatmul("q_up_proj", r_q, a * (nope + rope))] if r_q
             else [TorchtitanMatmul("q_proj", h, a * (nope + rope))])
        return q + [TorchtitanMatmul("kv_down_proj", h, r_kv + rope),
                    TorchtitanMatmul("kv_up_proj", r_kv, a * (nope + v_dim)),
                    TorchtitanMatmul("out_proj", a * v_dim, h, row_parallel=True)]
    d, g = model.kv_channels, model.num_kv_heads
    return [TorchtitanMatmul("qkv_proj", h, a * d), TorchtitanMatmul("qkv_proj", h, g * d),
            TorchtitanMatmul("qkv_proj", h, g * d),
            TorchtitanMatmul("out_proj", a * d, h, row_parallel=True)]


def _feed_forward_matmuls(model: ModelSpec, prefix: str, width: int) -> list[TorchtitanMatmul]:
    h = model.hidden_size
    gates = 2 if model.is_gated_mlp else 1
    return ([TorchtitanMatmul(f"{prefix}_in_proj", h, width) for _ in range(gates)]
            + [TorchtitanMatmul(f"{prefix}_out_proj", width, h, row_parallel=True)])


def torchtitan_matmuls(model: ModelSpec, moe_layer: bool) -> list[TorchtitanMatmul]:
    """The ``aten.mm`` calls op-SAC counts in one block, in forward order."""
    mms = _attention_matmuls(model)
    if not moe_layer:
        return mms + _feed_forward_matmuls(model, "mlp", model.intermediate_size)
    if model.shared_intermediate_size:
        mms += _feed_forward_matmuls(model, "shared_expert", model.shared_intermediate_size)
    return mms


def op_sac_saved(model: ModelSpec, moe_layer: bool) -> list[TorchtitanMatmul]:
    """Counted matmuls whose output op-SAC saves: the 1st, 3rd, 5th, ... (``count % 2 == 1``)."""
    return torchtitan_matmuls(model, moe_layer)[0::2]


def op_sac_recomputed(model: ModelSpec, moe_layer: bool) -> list[TorchtitanMatmul]:
    """Counted matmuls op-SAC re-runs in the backward: the 2nd, 4th, ... (``count % 2 == 0``)."""
    return torchtitan_matmuls(model, moe_layer)[1::2]


def op_sac_gemm_shares(model: ModelSpec, moe_layer: bool) -> tuple[OpShare, ...]:
    """Per graph GEMM, the recomputed share of its forward FLOPs (recomputed mm FLOPs / all mm
    FLOPs of that GEMM); the router's mm is always recomputed (share 1), routed experts'
    grouped GEMMs saved (absent: share 0)."""
    total: dict[str, float] = {}
    redone: dict[str, float] = {}
    recomputed = op_sac_recomputed(model, moe_layer)
    for mm in torchtitan_matmuls(model, moe_layer):
        total[mm.op_name] = total.get(mm.op_name, 0.0) + mm.flops_per_token
    for mm in recomputed:
        redone[mm.op_name] = redone.get(mm.op_name, 0.0) + mm.flops_per_token
    shares = [OpShare(name, redone.get(name, 0.0) / flops) for name, flops in total.items()]
    if moe_layer:
        shares.append(OpShare("router", 1.0))
    return tuple(shares)


def op_sac_recompute_flops_per_token(model: ModelSpec) -> float:
    """Hardware FLOPs per token that op-SAC adds (HFU counts them, MFU does not: Korthikanti
    et al. 2022 §6): over the model's layers, 2·in·out for each recomputed mm, plus the MoE
    router gate (2·h·E) in every MoE layer; no attention (the SDPA output is saved)."""
    num_moe = count_moe_layers(model, range(model.num_hidden_layers))
    num_dense = model.num_hidden_layers - num_moe

    def per_layer(moe: bool) -> float:
        return sum(mm.flops_per_token for mm in op_sac_recomputed(model, moe))

    router = 2.0 * model.hidden_size * model.num_experts if model.is_moe else 0.0
    return num_dense * per_layer(False) + num_moe * (per_layer(True) + router)
