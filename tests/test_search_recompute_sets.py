"""Selective-recompute module sets and the FP8 GEMM scope as search dimensions (issue 18).

The framework profile lists the ``--recompute-modules`` its release accepts
(``recompute_modules_accepted``) and the GEMMs its FP8 recipes can convert
(``fp8_gemm_scopes_accepted``); the search tries every useful set of modules on selective
candidates and every scope on FP8 candidates of models with routed experts, under
``--fix`` / ``--exclude``. The bulk evaluation equals ``estimate_training`` for every set and
scope, and the reported best runs through ``perfcast train`` with the same tokens/s.
"""

from __future__ import annotations

import json
import random

import pytest
from typer.testing import CliRunner

from perfcast.catalog.frameworks import load_framework_profile
from perfcast.catalog.models import load_model
from perfcast.catalog.systems import load_system
from perfcast.cli.main import app
from perfcast.errors import InputError
from perfcast.estimate.training import estimate_training
from perfcast.search.bulk import BulkEvaluator
from perfcast.search.framework_rules import LayoutRules
from perfcast.search.pins import Pin
from perfcast.search.recompute_sets import recompute_module_sets
from perfcast.search.run import search_space
from perfcast.search.space import SearchConstraints
from perfcast.specs import Strategy, Workload
from small_search import small_search

WORKLOAD = Workload(seq_length=2048, global_batch_size=16)
SMALL = dict(max_vpp=2, max_micro_batch_size=2, max_cp=1, sharding=("none",))
MEGATRON_ALL = ("core_attn", "mlp", "moe", "shared_experts", "moe_act", "layernorm",
                "mla_up_proj")


def _space(model: str, gpus: int, framework: str = "megatron-core", pins=(), excluded=(),
           **constraints):
    c = SearchConstraints(**(SMALL | constraints), fixed=tuple(map(Pin.parse, pins)),
                          excluded=tuple(map(Pin.parse, excluded)))
    m, s = load_model(model), load_system("dgx-h100", num_gpus=gpus)
    return m, s, search_space(m, s, WORKLOAD, gpus, c, framework)[1]


def _sets(space) -> set[tuple[str, ...]]:
    return {ms for b in space.blocks for ms in b.module_sets}


def _scopes(space) -> set[str]:
    return {b.fp8_gemm_scope for b in space.blocks if b.precision == "fp8"}


@pytest.mark.parametrize("framework, modules, scopes", [
    ("megatron-core", MEGATRON_ALL, ("all",)),
    ("megatron-core@0.13", tuple(m for m in MEGATRON_ALL if m != "shared_experts"), ("all",)),
    ("megatron-core@0.11", ("core_attn",), ("all",)),
    ("torchtitan", (), ("all", "linear", "grouped")),
])
def test_profile_lists_follow_the_release(framework, modules, scopes):
    rules = LayoutRules.of(load_framework_profile(framework))
    assert set(rules.recompute_modules) == set(modules)
    assert rules.fp8_gemm_scopes == scopes
    profile = load_framework_profile(framework).profile
    for entry in profile.recompute_modules_accepted + profile.fp8_gemm_scopes_accepted:
        assert entry.source and entry.says


@pytest.mark.parametrize("model, precision, recipe, expected", [
    ("llama-3.1-8b", "bf16", "tensorwise", 7),  # 2^3 - 1 of core_attn, mlp, layernorm
    ("mixtral-8x7b", "bf16", "tensorwise", 11),  # {core_attn, layernorm} x {-, moe_act, moe}
    ("mixtral-8x7b", "fp8", "delayed", 3),  # TE refuses moe_act, layernorm under delayed
    # {core_attn, mlp, layernorm, mla_up_proj} x {-, moe_act, shared, both, moe} - 1
    ("deepseek-v3", "bf16", "tensorwise", 79),
])
def test_module_sets_per_model(model, precision, recipe, expected):
    m = load_model(model)
    options = Strategy(num_gpus=1)
    sets = recompute_module_sets(MEGATRON_ALL, ("core_attn",), m, options, precision, recipe)
    assert len(sets) == expected == len(set(sets))
    assert sets[0] == ("core_attn",)
    for modules in sets:
        assert not ({"moe_act", "shared_experts"} & set(modules) and "moe" in modules)
        assert m.is_moe or not {"moe", "moe_act", "shared_experts"} & set(modules)
        assert m.is_mla or "mla_up_proj" not in modules
        assert m.num_dense_layers or "mlp" not in modules
        # every set is a valid strategy for the model
        Strategy(num_gpus=1, recompute="selective", recompute_modules=modules,
                 precision=precision, fp8_recipe=recipe)
    assert recompute_module_sets((), ("op_sac",), m, options, precision, recipe) == [("op_sac",)]


def test_space_tries_module_sets_on_selective_blocks_only():
    _, _, space = _space("llama-3.2-1b", 8, fp8=False)
    # 7 candidate sets less core_attn+mlp, which another set beats in both re-run seconds and
    # stored bytes at the reference shape (search.recompute_prune)
    assert len(_sets(space)) == 6 and ("core_attn", "mlp") not in _sets(space)
    for b in space.blocks:
        assert bool(b.module_sets) == (b.recompute == "selective")
        assert b.module_set.size == max(len(b.module_sets), 1)
    # torchtitan's selective recompute is its per-op SAC alone
    _, _, titan = _space("llama-3.2-1b", 8, "torchtitan", fp8=False)
    assert _sets(titan) == {("op_sac",)}


def test_moe_sets_leave_out_ep_overlap_and_scopes_only_for_fp8_moe():
    _, _, space = _space("mixtral-8x7b", 16, pins=("recompute=selective",), fp8=False)
    assert len(_sets(space)) == 9  # 11 candidates less two dominated (search.recompute_prune)
    for b in space.blocks:
        if any("moe" in ms for ms in b.module_sets):
            assert all("moe" in ms for ms in b.module_sets)
            assert not b.ep_overlap.any()
    _, _, titan = _space("mixtral-8x7b", 16, "torchtitan", pins=("pp=1",))
    assert _scopes(titan) == {"all", "linear", "grouped"}
    assert {b.fp8_gemm_scope for b in titan.blocks if b.precision == "bf16"} == {"all"}
    _, _, dense = _space("llama-3.2-1b", 8, "torchtitan", pins=("pp=1",))
    assert _scopes(dense) == {"all"}
    _, _, megatron = _space("mixtral-8x7b", 16, pins=("pp=1",))
    assert _scopes(megatron) == {"all"}


def test_pins_select_module_sets_and_scopes():
    _, _, fixed = _space("llama-3.2-1b", 8, pins=("recompute_modules=mlp+core_attn",), fp8=False)
    assert _sets(fixed) == {("core_attn", "mlp")}
    assert {b.recompute for b in fixed.blocks} == {"none", "selective", "full"}
    _, _, excluded = _space("llama-3.2-1b", 8, excluded=("modules=layernorm",), fp8=False)
    # 6 candidates left, of them core_attn+mlp dominated (search.recompute_prune)
    assert len(_sets(excluded)) == 5 and ("layernorm",) not in _sets(excluded)
    _, _, grouped = _space("mixtral-8x7b", 16, "torchtitan", pins=("pp=1",
                                                                  "fp8_gemm_scope=grouped"))
    assert _scopes(grouped) == {"grouped"}
    _, _, counted = _space("mixtral-8x7b", 16, "torchtitan", pins=("pp=1",))
    assert counted.fp8_scope_variants == 2 * sum(
        len(b) for b in counted.blocks if b.precision == "fp8" and b.fp8_gemm_scope == "all")


@pytest.mark.parametrize("text, message", [
    ("recompute_modules=attn", "unknown module 'attn'"),
    ("recompute_modules=mlp,mlp", "repeats a module"),
    ("recompute_modules=op_sac,mlp", "op_sac is used alone"),
    ("fp8_gemm_scope=experts", "all, linear, grouped"),
])
def test_bad_pins_name_the_value(text, message):
    with pytest.raises(InputError, match=message):
        Pin.parse(text)


def test_cli_bad_pin_is_one_line_exit_2():
    out = CliRunner().invoke(app, ["search", "-m", "llama-3.2-1b", "-g", "8", "--fix",
                                   "recompute_modules=core_attn,attn"])
    assert out.exit_code == 2
    assert len(out.output.strip().splitlines()) == 1 and "attn" in out.output
    assert "Traceback" not in out.output


@pytest.mark.parametrize("model, gpus, framework, pins", [
    ("llama-3.2-1b", 8, "megatron-core", ("recompute=selective",)),
    # the framework's own set beside one other: both timed per module
    ("llama-3.2-1b", 8, "megatron-core", ("recompute=selective", "recompute_modules=core_attn",
                                          "recompute_modules=mlp")),
    ("mixtral-8x7b", 16, "megatron-core", ("recompute=selective", "pp=1")),
    ("mixtral-8x7b", 16, "torchtitan", ("precision=fp8", "pp=1")),
])
def test_bulk_equals_estimate_training_for_every_set_and_scope(model, gpus, framework, pins):
    m, s, space = _space(model, gpus, framework, pins=pins)
    evaluator = BulkEvaluator.for_space(m, s, WORKLOAD, space)
    rng = random.Random(18)
    seen = set()
    for block in space.blocks:
        metrics = evaluator.evaluate(block)
        for row in rng.sample(range(len(block)), min(4, len(block))):
            strategy = block.strategy(row)
            report = estimate_training(m, s, strategy, WORKLOAD)
            assert metrics.step_time_s[row] == pytest.approx(report.step_time_s, rel=1e-9)
            assert metrics.memory_bytes[row] == pytest.approx(report.memory.peak_bytes,
                                                              rel=1e-9)
            seen.add((strategy.recompute_modules, strategy.fp8_gemm_scope))
    assert len(seen) >= 2  # several sets / scopes checked


def test_module_sets_change_time_and_memory():
    """Recomputing more costs time and saves memory: the bulk rows of one layout differ per
    set (mlp re-runs the MLP GEMMs and drops their inputs)."""
    m, s, space = _space("llama-3.2-1b", 8, pins=("recompute=selective", "tp=1", "pp=1",
                                                  "mbs=1", "precision=bf16"), fp8=False)
    evaluator = BulkEvaluator.for_space(m, s, WORKLOAD, space)
    block = space.blocks[0]
    metrics = evaluator.evaluate(block)
    sets = list(block.module_sets)
    step = {ms: metrics.step_time_s[i] for i, ms in enumerate(sets)}
    memory = {ms: metrics.memory_bytes[i] for i, ms in enumerate(sets)}
    assert step[("mlp", "layernorm")] > step[("layernorm",)]
    assert memory[("mlp", "layernorm")] < memory[("layernorm",)]
    assert step[("core_attn", "mlp", "layernorm")] > step[("mlp", "layernorm")]


def _train_args(common: list[str], s: dict, framework: str) -> list[str]:
    args = ["train", *common, "--tp", str(s["tp"]), "--pp", str(s["pp"]), "--vpp",
            str(s["vpp"]), "--ep", str(s["ep"]), "--micro-batch-size", str(s["micro_batch_size"]),
            "--recompute-granularity", s["recompute"], "--precision", s["precision"],
            "--cuda-graphs", s["cuda_graphs"], "--framework", framework, "--json"]
    if s["recompute"] == "selective":
        args += ["--recompute-modules", ",".join(s["recompute_modules"])]
    if s["precision"] == "fp8":
        args += ["--fp8-recipe", s["fp8_recipe"], "--fp8-gemm-scope", s["fp8_gemm_scope"]]
    args += ["--etp", str(s["etp"])] if s["etp"] is not None else []
    args += ["--sequence-parallel"] if s["sequence_parallel"] else []
    args += ["--tp-comm-overlap"] if s["tp_comm_overlap"] else []
    args += ["--fsdp"] if s["fsdp"] else (["--distributed-optimizer"]
                                         if s["distributed_optimizer"] else [])
    return args


@pytest.mark.parametrize("model, gpus, framework, pins", [
    ("llama-3.2-1b", 8, "megatron-core", ["--fix", "recompute=selective", "--exclude",
                                          "recompute_modules=core_attn"]),
    ("llama-3.2-1b", 8, "megatron-core", ["--fix", "recompute_modules=mlp,layernorm",
                                          "--fix", "recompute=selective"]),
    ("mixtral-8x7b", 8, "torchtitan", ["--fix", "precision=fp8", "--fix",
                                       "fp8_gemm_scope=linear", "--fix", "pp=1"]),
])
def test_reported_best_with_modules_or_scope_runs_in_train(model, gpus, framework, pins):
    runner = CliRunner()
    common = ["-m", model, "-g", str(gpus), "--seq-length", "2048", "--global-batch-size", "16"]
    out = runner.invoke(app, ["search", *common, "--max-cp", "1", "--top", "2", "--json",
                              "--framework", framework, *pins])
    assert out.exit_code == 0, out.output
    result = json.loads(out.output)
    for best in result["best"]:
        s = best["strategy"]
        if "recompute_modules=mlp,layernorm" in pins:
            assert s["recompute_modules"] == ["mlp", "layernorm"]
        if "fp8_gemm_scope=linear" in pins:
            assert s["fp8_gemm_scope"] == "linear"
        train = runner.invoke(app, _train_args(common, s, framework))
        assert train.exit_code == 0, train.output
        forecast = json.loads(train.output)
        assert forecast["tokens_per_s_per_gpu"] == pytest.approx(best["tokens_per_s_per_gpu"],
                                                                 rel=1e-9)
        assert forecast["peak_memory_bytes"] == pytest.approx(best["peak_memory_bytes"],
                                                              rel=1e-9)


def test_search_text_counts_module_and_scope_variants():
    out = small_search("--top", "1", "--fix", "recompute=selective", "--fix",
                       "recompute_modules=mlp")
    assert out.exit_code == 0, out.output
    assert "only in the recompute module set" not in " ".join(out.output.split())  # one set
    assert "sel:mlp" in out.output
    out = small_search("--top", "1", "--fix", "recompute=selective")
    assert "only in the recompute module set" in " ".join(out.output.split())
