"""CUDA graphs and activation offload as search dimensions (issue 18, item 2).

The framework profile lists the CUDA-graph scopes it captures (``cuda_graph_scopes_accepted``,
per release) and whether it offloads whole layers' activations (``activation_offload_accepted``);
the search tries only those, under ``--fix`` / ``--exclude``. The bulk evaluation equals
``estimate_training`` for graphed and offloaded rows (host time, graph static buffers, copies
over PCIe or NVLink-C2C), and the reported best equals ``perfcast train`` with the same flags.
"""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from typer.testing import CliRunner

from perfcast.catalog.frameworks import load_framework_profile, training_profiles
from perfcast.catalog.models import load_model
from perfcast.catalog.systems import load_system
from perfcast.cli.main import app
from perfcast.errors import InputError
from perfcast.estimate.training import estimate_training
from perfcast.memory.cuda_graphs import STATIC_TENSORS_PER_REGION, cuda_graph_static_bytes
from perfcast.memory.estimate import estimate_memory
from perfcast.search.bulk import BulkEvaluator
from perfcast.search.framework_rules import LayoutRules
from perfcast.search.pins import Pin
from perfcast.search.run import search_space
from perfcast.search.space import CUDA_GRAPH_SCOPES, SearchConstraints
from perfcast.specs import Strategy, Workload
from small_search import small_search

WORKLOAD = Workload(seq_length=2048, global_batch_size=16)
SMALL = dict(max_vpp=2, max_micro_batch_size=2, max_cp=1, sharding=("none",), fp8=False)


def _space(model: str, gpus: int, framework: str = "megatron-core", system: str = "dgx-h100",
           pins: tuple[str, ...] = (), excluded: tuple[str, ...] = (), **constraints):
    c = SearchConstraints(**(SMALL | constraints), fixed=tuple(map(Pin.parse, pins)),
                          excluded=tuple(map(Pin.parse, excluded)))
    m, s = load_model(model), load_system(system, num_gpus=gpus)
    return m, s, search_space(m, s, WORKLOAD, gpus, c, framework)[1]


def _scopes(space) -> set[str]:
    return {CUDA_GRAPH_SCOPES[int(g)] for b in space.blocks for g in np.unique(b.cuda_graphs)}


def _offloads(space) -> set[int]:
    return {int(n) for b in space.blocks for n in b.cpu_offload_activation_layers.ravel()}


@pytest.mark.parametrize("framework, expected", [
    ("megatron-core", ("none", "attention", "moe", "full")),
    ("megatron-core@0.13", ("none", "attention", "full")),
    ("megatron-core@0.10", ("none", "full")),
    ("torchtitan", ("none",)),
    ("megatron-lm", ("none",)),
    ("deepspeed", ()),
])
def test_profile_scopes_follow_the_release(framework, expected):
    rules = LayoutRules.of(load_framework_profile(framework), "hopper")
    assert rules.cuda_graph_scopes == expected
    assert rules.activation_offload == framework.startswith("megatron-core")


def test_profile_entries_are_sourced():
    for profile in training_profiles():
        for value in profile.cuda_graph_scopes_accepted + profile.activation_offload_accepted:
            assert len(value.source) > 30 and value.says, profile.name


def test_scopes_searched_per_model_and_framework():
    # Dense: 'moe' captures nothing (the same strategy as 'none'), so it is not tried.
    assert _scopes(_space("llama-3.2-1b", 8)[2]) == {"none", "attention", "full"}
    assert _scopes(_space("llama-3.2-1b", 8, "megatron-core@0.10")[2]) == {"none", "full"}
    assert _scopes(_space("llama-3.2-1b", 8, "torchtitan")[2]) == {"none"}
    # Dropless MoE: a captured MoE block needs static shapes (frameworks.md 1.5).
    assert _scopes(_space("mixtral-8x7b", 8, max_vpp=1, max_micro_batch_size=1)[2]) == {
        "none", "attention"}
    rules = LayoutRules.of(load_framework_profile("megatron-core"), "hopper")
    assert rules.graph_scopes("none", True, True) == ("none", "attention", "moe", "full")


def test_offload_only_at_pp1_without_recompute_where_the_framework_has_it():
    model, _, space = _space("llama-3.2-1b", 8, recompute=("none", "selective"))
    layers = model.num_hidden_layers
    assert _offloads(space) == {0, *range(2, layers + 1)}  # 1 layer stays staged: 1 == 0
    for block in space.blocks:
        if block.cpu_offload_activation_layers.size > 1:
            assert block.pp == 1 and block.recompute == "none"
    assert _offloads(_space("llama-3.2-1b", 8, "torchtitan")[2]) == {0}


def test_pins_select_scopes_and_offload():
    space = _space("llama-3.2-1b", 8, pins=("cuda_graphs=full",))[2]
    assert _scopes(space) == {"full"}
    space = _space("llama-3.2-1b", 8, excluded=("cuda_graph=none", "offload=0"))[2]
    assert "none" not in _scopes(space) and 0 not in _offloads(space)
    assert {b.pp for b in space.blocks} == {1}  # offload needs pp 1
    space = _space("llama-3.2-1b", 8, pins=("offload=4",))[2]
    assert _offloads(space) == {4}
    assert Pin.parse("cpu_offloading_num_layers=0") == Pin(key="offload", value="0")
    for text, message in (("offload=-1", "layer count"), ("cuda_graphs=layer", "takes one of")):
        with pytest.raises(InputError, match=message):
            Pin.parse(text)
    out = CliRunner().invoke(app, ["search", "-m", "llama-3.2-1b", "-g", "8", "--fix",
                                   "cuda_graphs=everything"])
    assert out.exit_code == 2 and "cuda_graphs takes one of" in out.output


@pytest.mark.parametrize("model, gpus, system", [
    ("llama-3.2-1b", 8, "dgx-h100"),
    ("llama-3.2-1b", 4, "gb200-nvl72"),  # NVLink-C2C host link
    ("mixtral-8x7b", 8, "dgx-h100"),
])
def test_bulk_equals_estimate_training_for_graphed_and_offloaded_rows(model, gpus, system):
    m, s, space = _space(model, gpus, system=system, recompute=("none",), max_micro_batch_size=1)
    metrics = BulkEvaluator.for_space(m, s, WORKLOAD, space).evaluate_all(space)
    rng, seen = random.Random(3), set()
    rows = [(b, i) for b, block in enumerate(space.blocks) for i in range(len(block))]
    for b, i in rng.sample(rows, min(len(rows), 60)):
        strategy = space.blocks[b].strategy(i)
        report = estimate_training(m, s, strategy, WORKLOAD)
        assert metrics[b].step_time_s[i] == pytest.approx(report.step_time_s, rel=1e-9)
        assert metrics[b].memory_bytes[i] == pytest.approx(report.memory.peak_bytes, rel=1e-9)
        seen.add((strategy.cuda_graphs, strategy.cpu_offload_activation_layers > 0))
    assert {g for g, _ in seen} == _scopes(space) and (model == "mixtral-8x7b" or len(seen) > 3)


def test_graph_static_buffers_by_hand():
    model, system = load_model("llama-3-8b"), load_system("dgx-h100", num_gpus=8)
    workload = Workload(seq_length=4096, global_batch_size=16)
    base = dict(num_gpus=8, tp=2, sequence_parallel=True, micro_batch_size=2)
    plain = estimate_memory(model, system, Strategy(**base), workload).stages[0]
    assert plain.cuda_graph_bytes == 0
    hidden = 2 * 4096 * 4096 * 2 / 2  # b * s * h * 2 bytes / tp (sequence parallel)
    for scope in ("attention", "full"):
        stage = estimate_memory(model, system, Strategy(**base, cuda_graphs=scope),
                                workload).stages[0]
        expected = 32 * 1 * STATIC_TENSORS_PER_REGION * hidden  # 32 layers, 1 in flight
        assert stage.cuda_graph_bytes == pytest.approx(expected, rel=1e-12)
        assert stage.other_bytes - plain.other_bytes == pytest.approx(expected, rel=1e-12)
    mixtral = load_model("mixtral-8x7b")
    moe = cuda_graph_static_bytes(mixtral, Strategy(num_gpus=8, cuda_graphs="moe"), 32, 32,
                                  4096, 3)
    assert moe == 32 * 3 * 4 * 4096 * mixtral.hidden_size * 2


def test_reported_best_with_graphs_and_offload_equals_perfcast_train():
    runner = CliRunner()
    common = ["-m", "llama-3.2-1b", "-g", "8", "--seq-length", "2048", "--global-batch-size",
              "16"]
    for pins in (["--exclude", "cuda_graphs=none", "--fix", "offload=0"],
                 ["--exclude", "offload=0"]):
        out = runner.invoke(app, ["search", *common, "--max-cp", "1", "--top", "1", "--json",
                                  *pins])
        assert out.exit_code == 0, out.output
        best = json.loads(out.output)["best"][0]
        s = best["strategy"]
        args = ["train", *common, "--tp", str(s["tp"]), "--pp", str(s["pp"]), "--vpp",
                str(s["vpp"]), "--micro-batch-size", str(s["micro_batch_size"]),
                "--recompute-granularity", s["recompute"], "--precision", s["precision"],
                "--cuda-graphs", s["cuda_graphs"], "--cpu-offloading-num-layers",
                str(s["cpu_offload_activation_layers"]), "--framework", "megatron-core", "--json"]
        args += ["--fp8-recipe", s["fp8_recipe"]] if s["precision"] == "fp8" else []
        args += ["--sequence-parallel"] if s["sequence_parallel"] else []
        args += ["--tp-comm-overlap"] if s["tp_comm_overlap"] else []
        args += ["--fsdp"] if s["fsdp"] else (["--distributed-optimizer"]
                                             if s["distributed_optimizer"] else [])
        train = runner.invoke(app, args)
        assert train.exit_code == 0, train.output
        forecast = json.loads(train.output)
        assert forecast["step_time_s"] == pytest.approx(best["step_time_s"], rel=1e-9)
        assert forecast["peak_memory_bytes"] == pytest.approx(best["peak_memory_bytes"],
                                                              rel=1e-9)
    assert s["cpu_offload_activation_layers"] > 0


def test_search_text_shows_schedule_and_the_dimensions_in_use():
    out = small_search("--top", "2", "--fix", "cuda_graphs=full", "--fix", "offload=3")
    assert out.exit_code == 0, out.output
    header = next(line for line in out.output.splitlines() if "schedule" in line)
    assert "graphs" in header and "offload" in header
    assert "only in the offloaded layer count" not in out.output  # one count pinned
    plain = small_search("--top", "2", "--fix", "cuda_graphs=none", "--fix", "offload=0")
    header = next(line for line in plain.output.splitlines() if "schedule" in line)
    assert "graphs" not in header and "offload" not in header
