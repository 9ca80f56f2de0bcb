"""Which forward operators Megatron-Core re-runs for each ``--recompute-modules`` entry.

Megatron-Core ``TransformerConfig.recompute_modules`` (frameworks.md §1.3, MLM:TC L560-584):
``core_attn`` checkpoints the attention core (softmax·V; Korthikanti et al. 2022 §5 "selective
recomputation"); ``mlp`` the dense MLP; ``moe`` the whole MoE layer (router, permutation, routed
and shared experts); ``shared_experts`` the shared experts; ``moe_act`` the routed experts'
activation function, ``layernorm`` the input and pre-MLP norms and ``mla_up_proj`` MLA's
up-projections with RoPE (the last three "output-discarding": outputs dropped after use,
rebuilt in backward). The backward then re-runs exactly these forward operators once more.
Operator names are those of ``graph.layer``. ``op_sac`` (torchtitan per-op SAC,
``graph.op_sac``) is no set of whole operators: it re-runs every memory-bound forward op, no
attention, and a share of each GEMM (``forward_recompute_share``).
"""

from __future__ import annotations

from collections.abc import Iterable

from perfcast.graph.op_sac import OpShare
from perfcast.graph.ops import AttentionOp, GemmOp, Op

MODULE_OPS: dict[str, tuple[str, ...]] = {
    "core_attn": ("attention",),
    "mlp": ("mlp_in_proj", "mlp_activation", "mlp_out_proj"),
    "moe": ("router", "router_topk", "router_unfused", "moe_permute", "moe_permute_unfused",
            "moe_regroup",
            "expert_in_proj", "expert_activation",
            "expert_out_proj", "shared_expert_in_proj", "shared_expert_activation",
            "shared_expert_out_proj"),
    "shared_experts": ("shared_expert_in_proj", "shared_expert_activation",
                       "shared_expert_out_proj"),
    "moe_act": ("expert_activation",),
    "layernorm": ("norm",),
    "mla_up_proj": ("q_up_proj", "kv_up_proj", "rotary"),
    "op_sac": (),
}
"""Forward operator names re-run per recomputed module."""


def recomputed_op_names(modules: Iterable[str]) -> frozenset[str]:
    """Forward operator names re-run in backward for ``modules`` (union over modules)."""
    return frozenset(name for module in modules for name in MODULE_OPS[module])


def is_recomputed(op: Op, names: frozenset[str]) -> bool:
    """Whether forward op ``op`` is among ``names``."""
    return op.name in names


def forward_recompute_share(op: Op, modules: Iterable[str], names: frozenset[str],
                            op_sac_shares: tuple[OpShare, ...]) -> float:
    """Share of forward op ``op``'s time re-run in the backward under selective recompute of
    ``modules`` (``names`` = ``recomputed_op_names(modules)``): 1 or 0 per operator for the
    Megatron-Core modules; under ``op_sac`` 0 for attention (SDPA saved), the op's entry in
    ``op_sac_shares`` for a GEMM (0 when absent: routed experts' grouped GEMMs are saved), and
    1 for every memory-bound op (norms, RoPE, activations, casts: not in the save list)."""
    if "op_sac" in modules:
        if isinstance(op, AttentionOp):
            return 0.0
        if isinstance(op, GemmOp):
            return next((s.share for s in op_sac_shares if s.name == op.name), 0.0)
        return 1.0
    return 1.0 if op.name in names else 0.0
