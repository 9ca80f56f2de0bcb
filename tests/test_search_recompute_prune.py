"""Selective-recompute module sets pruned to the Pareto front when enumerated (issue 18).

Each candidate set is costed once at a reference shape (``search.recompute_prune``): the sets
the search enumerates are the default plus those no other set beats in both re-run seconds and
stored bytes; every dropped set is beaten by a kept one.
"""

from __future__ import annotations

import pytest

from perfcast.catalog.frameworks import load_framework_profile
from perfcast.catalog.models import load_model
from perfcast.catalog.systems import load_system
from perfcast.search.framework_rules import LayoutRules, framework_options
from perfcast.search.recompute_prune import ModuleSetCost, module_set_costs, pareto_efficient
from perfcast.search.recompute_sets import recompute_module_sets
from perfcast.search.run import search_space
from perfcast.search.space import SearchConstraints
from perfcast.specs import Workload


def _dominates(a: ModuleSetCost, b: ModuleSetCost) -> bool:
    return (a.recompute_s <= b.recompute_s and a.activation_bytes <= b.activation_bytes
            and (a.recompute_s < b.recompute_s or a.activation_bytes < b.activation_bytes))


def test_pareto_efficient_keeps_the_front_and_the_default():
    costs = [ModuleSetCost(("a",), 1.0, 10.0), ModuleSetCost(("b",), 2.0, 12.0),  # b beaten
             ModuleSetCost(("c",), 3.0, 5.0), ModuleSetCost(("d",), 3.0, 5.0),  # d ties c
             ModuleSetCost(("e",), 4.0, 5.0)]  # e beaten by c
    assert pareto_efficient(costs, ("x",)) == [("a",), ("c",)]
    assert pareto_efficient(costs, ("b",)) == [("a",), ("b",), ("c",)]


def _deepseek_candidates(precision: str, recipe: str):
    model, system = load_model("deepseek-v3"), load_system("dgx-h100", num_gpus=1024)
    profile = load_framework_profile("megatron-core")
    rules = LayoutRules.of(profile, system.gpu.generation)
    options = framework_options(profile, system.gpu.generation)
    sets = recompute_module_sets(rules.recompute_modules, options.recompute_modules, model,
                                 options, precision, recipe)
    return model, system, options, sets


@pytest.mark.parametrize("precision, recipe", [("bf16", "tensorwise"), ("fp8", "blockwise")])
def test_deepseek_v3_sets_are_pruned_to_the_front(precision, recipe):
    model, system, options, sets = _deepseek_candidates(precision, recipe)
    assert len(sets) == 79
    costs = module_set_costs(model, 4096, options, precision, recipe, sets, system)
    kept = pareto_efficient(costs, options.recompute_modules)
    by_set = {c.modules: c for c in costs}
    assert options.recompute_modules in kept
    assert len(kept) <= 24  # 79 -> 22 (bf16) / 24 (fp8 blockwise), default included
    for m in kept:  # Pareto-efficient at the reference shape (the default may not be)
        if m != options.recompute_modules:
            assert not any(_dominates(o, by_set[m]) for o in costs)
    for m in set(sets) - set(kept):  # every dropped set is beaten by (or ties) a kept one
        assert any(_dominates(by_set[k], by_set[m]) or (
            by_set[k].recompute_s == by_set[m].recompute_s
            and by_set[k].activation_bytes == by_set[m].activation_bytes) for k in kept)


def test_enumerated_selective_blocks_use_the_pruned_sets():
    model, system, options, sets = _deepseek_candidates("bf16", "tensorwise")
    _, space = search_space(model, system, Workload(seq_length=4096, global_batch_size=1024),
                            1024, SearchConstraints(recompute=("selective",), fp8=False,
                                                    max_micro_batch_size=1, max_cp=1))
    enumerated = {m for b in space.blocks for m in b.module_sets}
    assert options.recompute_modules in enumerated
    assert enumerated < set(sets)
    assert len(enumerated) <= 22
