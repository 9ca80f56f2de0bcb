"""MoE execution options in the search: EP overlap and the token dispatcher (issue 18, item 2).

Tried where EP > 1 and the framework runs them on the GPU (its profile's
``moe_token_dispatchers_accepted`` / ``ep_overlap_accepted``), never EP overlap with full
recompute (Megatron-Core asserts it), pinnable with --fix / --exclude, and the bulk evaluation
of such rows equals ``estimate_training``.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from perfcast.catalog.frameworks import load_framework_profile
from perfcast.catalog.models import load_model
from perfcast.catalog.systems import load_system
from perfcast.cli.main import app
from perfcast.estimate.training import estimate_training
from perfcast.search.bulk import BulkEvaluator
from perfcast.search.enumerate import enumerate_strategies
from perfcast.search.framework_rules import LayoutRules, framework_options
from perfcast.search.pins import Pin
from perfcast.search.space import DISPATCHERS, SearchConstraints
from perfcast.specs import Workload

WORKLOAD = Workload(seq_length=4096, global_batch_size=64)
SMALL = dict(max_vpp=1, max_micro_batch_size=1, max_cp=1, fp8=False, sharding=("none",))


def _space(framework="megatron-core", model="mixtral-8x7b", system="dgx-h100", gpus=16,
           **constraints):
    resolved = load_framework_profile(framework)
    spec_system = load_system(system, num_gpus=gpus)
    generation = spec_system.gpu.generation
    return enumerate_strategies(
        load_model(model), spec_system, gpus, WORKLOAD,
        SearchConstraints(**{**SMALL, **constraints}), LayoutRules.of(resolved, generation),
        framework_options(resolved, generation))


def _options(space):
    """(ep > 1, dispatcher, EP overlap, recompute) of every row."""
    out = set()
    for block in space.blocks:
        ep, d, o = (block.column(n) for n in ("ep", "dispatcher", "ep_overlap"))
        out |= {(bool(e > 1), DISPATCHERS[int(x)], bool(y), block.recompute)
                for e, x, y in zip(ep, d, o, strict=True)}
    return out


def test_megatron_core_tries_deepep_and_ep_overlap_where_ep_above_one():
    rows = _options(_space(recompute=("none", "full")))
    with_ep = {(d, o, r) for has_ep, d, o, r in rows if has_ep}
    without_ep = {(d, o) for has_ep, d, o, _ in rows if not has_ep}
    # H100: all-to-all and DeepEP (HybridEP costs as DeepEP: one of them stands for both).
    assert {(d, o) for d, o, r in with_ep if r == "none"} == {
        ("alltoall", False), ("alltoall", True), ("deepep", False), ("deepep", True)}
    assert not any(o for _, o, r in with_ep if r == "full")  # MLM:TC L3002-3046
    assert without_ep == {("alltoall", False)}


@pytest.mark.parametrize("framework, system, expected", [
    ("megatron-core@0.13", "dgx-h100", {("alltoall", False), ("deepep", False)}),
    ("megatron-core@0.11", "dgx-h100", {("alltoall", False)}),
    ("torchtitan", "dgx-h100", {("alltoall", False)}),
    ("megatron-core", "dgx-a100", {("alltoall", False), ("alltoall", True),
                                   ("deepep", False), ("deepep", True)}),
])
def test_options_follow_the_framework_release_and_gpu(framework, system, expected):
    rows = _options(_space(framework, system=system, recompute=("none",)))
    assert {(d, o) for has_ep, d, o, _ in rows if has_ep} == expected


def test_dense_models_get_only_the_default_dispatcher():
    rows = _options(_space(model="llama-3-8b", recompute=("none",)))
    assert {(d, o) for _, d, o, _ in rows} == {("alltoall", False)}


def test_pins_select_dispatcher_and_overlap():
    pinned = _space(recompute=("none",), fixed=(Pin.parse("dispatcher=hybridep"),
                                                Pin.parse("ep_overlap=on")))
    assert {(has_ep, d, o) for has_ep, d, o, _ in _options(pinned)} == {(True, "hybridep", True)}
    excluded = _space(recompute=("none",), excluded=(Pin.parse("moe_token_dispatcher=deepep"),
                                                     Pin.parse("ep_overlap=true")))
    # Without DeepEP, HybridEP (the same cost model) stands for the flex dispatcher.
    assert {(d, o) for _, d, o, _ in _options(excluded)} == {("alltoall", False),
                                                             ("hybridep", False)}


def test_bulk_equals_estimate_training_for_overlap_and_deepep_rows():
    model, system = load_model("mixtral-8x7b"), load_system("dgx-h100", num_gpus=16)
    space = _space(recompute=("none", "selective"), max_micro_batch_size=2)
    evaluator = BulkEvaluator.for_space(model, system, WORKLOAD, space)
    checked = set()
    for block in space.blocks:
        metrics = evaluator.evaluate(block)
        ep, d, o = (block.column(n) for n in ("ep", "dispatcher", "ep_overlap"))
        for combo in {(int(x), bool(y)) for x, y in zip(d[ep > 1], o[ep > 1], strict=True)}:
            row = int(np.flatnonzero((ep > 1) & (d == combo[0]) & (o == combo[1]))[0])
            strategy = block.strategy(row)
            assert (strategy.ep_overlap, strategy.delay_wgrad_compute) == (combo[1], combo[1])
            assert strategy.moe_token_dispatcher == DISPATCHERS[combo[0]]
            report = estimate_training(model, system, strategy, WORKLOAD)
            assert metrics.step_time_s[row] == pytest.approx(report.step_time_s, rel=1e-9)
            assert metrics.memory_bytes[row] == pytest.approx(report.memory.peak_bytes, rel=1e-9)
            checked.add(combo)
    assert len(checked) == 4


def test_cli_best_moe_layout_carries_its_options_and_runs_in_train():
    runner = CliRunner()
    out = runner.invoke(app, ["search", "-m", "mixtral-8x7b", "-g", "16", "--gbs", "64",
                              "--max-vpp", "1", "--max-micro-batch-size", "1", "--max-cp", "1",
                              "--fix", "ep_overlap=true", "--fix", "dispatcher=deepep",
                              "--top", "2", "--json"])
    assert out.exit_code == 0, out.output
    best = json.loads(out.output)["best"]
    assert best
    for candidate in best:
        s = candidate["strategy"]
        assert s["ep"] > 1 and s["ep_overlap"] and s["delay_wgrad_compute"]
        assert s["moe_token_dispatcher"] == "deepep"
        args = ["train", "-m", "mixtral-8x7b", "-g", "16", "--global-batch-size", "64",
                "--tp", str(s["tp"]), "--pp", str(s["pp"]), "--ep", str(s["ep"]),
                "--micro-batch-size", str(s["micro_batch_size"]), "--ep-overlap",
                "--delay-wgrad-compute", "--moe-token-dispatcher", "deepep", "--json"]
        if s["etp"]:
            args += ["--etp", str(s["etp"])]
        train = runner.invoke(app, args)
        assert train.exit_code == 0, train.output
    bad = runner.invoke(app, ["search", "-m", "mixtral-8x7b", "-g", "16", "--fix",
                              "dispatcher=nccl"])
    assert bad.exit_code == 2 and "moe_token_dispatcher takes one of" in bad.output
