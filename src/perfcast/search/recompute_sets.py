"""Selective-recompute module sets and FP8 GEMM scopes the search tries.

Module sets. Megatron-Core's ``--recompute-modules`` (frameworks.md 1.3, MLM:TC L560-584) takes
any list of ``core_attn``, ``mlp``, ``moe``, ``shared_experts``, ``moe_act``, ``layernorm``,
``mla_up_proj`` (``shared_experts`` from core_v0.14.0); the framework profile lists the modules
of its release (``recompute_modules_accepted``). The search tries every non-empty set of the
modules that re-run something in the model, leaving out sets no better than another:

* a module with no operator in the model recomputes nothing and saves nothing (the strategy
  without it again): ``mlp`` needs a dense-MLP layer, ``moe`` / ``moe_act`` a MoE layer,
  ``moe_act`` also grouped expert GEMMs (MLM:TC asserts ``moe_grouped_gemm``),
  ``shared_experts`` shared experts, ``mla_up_proj`` multi-latent attention;
* ``moe`` re-runs the whole MoE layer, shared experts and expert activation included
  (``graph.recompute_modules.MODULE_OPS``), and drops all of its activations
  (``memory.activations``): with ``moe_act`` or ``shared_experts`` beside it a set re-runs the
  same operators and keeps the same bytes as with ``moe`` alone, so those sets are left out;
* ``moe_act`` and ``layernorm`` are output-discarding checkpoints that Transformer Engine
  refuses under the FP8 ``delayed`` recipe (frameworks.md 1.3, TE >= 2.6).

What remains has additive costs: the modules' operators are disjoint, so a set re-runs the sum
of its modules' forward seconds (``search.bulk`` times each module once per layer) and drops the
sum of their activation terms. Each module trades its own seconds for its own bytes, in a ratio
that moves with the layout (sequence, TP, CP, micro-batch); enumeration keeps only the sets on
the (seconds, bytes) Pareto front at one reference shape (``search.recompute_prune``: DeepSeek-V3
79 -> 22 in BF16) and the bulk evaluation ranks those layout by layout.

FP8 GEMM scopes (``Strategy.fp8_gemm_scope``): a framework that converts linear layers and the
routed experts' grouped GEMMs separately (``fp8_gemm_scopes_accepted``: torchtitan) may run
FP8 on either or both; where the model has no routed experts every scope is ``all``.
"""

from __future__ import annotations

import itertools
from typing import get_args

from perfcast.errors import InputError
from perfcast.specs.model import ModelSpec
from perfcast.specs.strategy import RecomputeModule, Strategy

MODULE_ORDER: tuple[str, ...] = get_args(RecomputeModule)
"""Canonical order of modules in a set (``Strategy.recompute_modules``' Literal order)."""
WHOLE_MOE_PARTS = frozenset({"moe_act", "shared_experts"})
"""Modules whose operators ``moe`` re-runs as well (``graph.recompute_modules.MODULE_OPS``)."""
FP8_DELAYED_REFUSES = frozenset({"moe_act", "layernorm"})
"""Output-discarding modules Transformer Engine refuses under delayed FP8 scaling."""


def module_set_text(modules: tuple[str, ...]) -> str:
    """A module set as ``--fix/--exclude recompute_modules=`` compares it: canonical order,
    comma-separated (``core_attn,mlp``)."""
    return ",".join(sorted(modules, key=MODULE_ORDER.index))


def parse_module_set(text: str) -> tuple[str, ...]:
    """``core_attn,mlp`` or ``core_attn+mlp`` as a canonical module tuple (``InputError``
    naming the text for an unknown or repeated module, or ``op_sac`` beside another)."""
    names = [n.strip() for n in text.replace("+", ",").split(",")]
    unknown = [n for n in names if n not in MODULE_ORDER]
    if unknown:
        raise InputError("pin", f"recompute_modules={text}",
                         f"unknown module {unknown[0]!r}; modules are {', '.join(MODULE_ORDER)}")
    if len(set(names)) != len(names):
        raise InputError("pin", f"recompute_modules={text}", "repeats a module")
    if "op_sac" in names and len(names) > 1:
        raise InputError("pin", f"recompute_modules={text}", "op_sac is used alone")
    return tuple(sorted(names, key=MODULE_ORDER.index))


def useful_modules(accepted: tuple[str, ...], model: ModelSpec, options: Strategy,
                   precision: str, fp8_recipe: str) -> tuple[str, ...]:
    """The ``accepted`` modules that re-run operators of ``model`` under ``options`` and the
    block's precision and recipe (module docstring)."""
    present = {
        "core_attn": True, "layernorm": True, "op_sac": True,
        "mlp": model.num_dense_layers > 0,
        "moe": model.is_moe,
        "moe_act": model.is_moe and options.moe_grouped_gemm,
        "shared_experts": model.is_moe and model.shared_intermediate_size > 0,
        "mla_up_proj": model.is_mla,
    }
    delayed = precision == "fp8" and fp8_recipe == "delayed"
    return tuple(m for m in accepted
                 if present[m] and not (delayed and m in FP8_DELAYED_REFUSES))


def recompute_module_sets(accepted: tuple[str, ...], default: tuple[str, ...],
                          model: ModelSpec, options: Strategy, precision: str,
                          fp8_recipe: str) -> list[tuple[str, ...]]:
    """Module sets to try on selective blocks: the framework's ``default`` alone when it
    accepts no list, else every non-empty set of ``useful_modules`` without ``moe`` beside
    its parts, smallest first (the default set first among its size), canonical order."""
    if not accepted:
        return [default]
    modules = useful_modules(accepted, model, options, precision, fp8_recipe)
    sets = [tuple(sorted(combo, key=MODULE_ORDER.index))
            for size in range(1, len(modules) + 1)
            for combo in itertools.combinations(modules, size)
            if not ("moe" in combo and WHOLE_MOE_PARTS & set(combo))]
    return sorted(sets, key=lambda s: (len(s), s != default))


def fp8_gemm_scopes(accepted: tuple[str, ...], model: ModelSpec, precision: str) -> list[str]:
    """FP8 GEMM scopes to try: the framework's where the precision is FP8 and the model has
    routed experts (grouped GEMMs), else ``all`` (module docstring)."""
    if precision != "fp8" or not model.is_moe or not accepted:
        return ["all"]
    return list(accepted)
