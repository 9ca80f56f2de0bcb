"""``perfcast search`` flags: --framework, --fix / --exclude, --timings, and the limits."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from perfcast.cli.main import app
from perfcast.search.pins import Pin
from perfcast.search.run import MAX_SEARCH_GPUS
from perfcast.search.space import SearchConstraints

SMALL = ["search", "-m", "llama-3-8b", "-g", "8", "--global-batch-size", "16", "--max-vpp", "2",
         "--max-micro-batch-size", "2", "--max-cp", "2", "--top", "3"]


def _search(*extra: str) -> dict:
    result = CliRunner().invoke(app, [*SMALL, "--json", *extra])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_json_is_deterministic_and_timings_opt_in():
    first, second = _search(), _search()
    assert "evaluate_s" not in first
    assert first == second
    assert _search("--timings")["evaluate_s"] > 0


def test_counts_distinct_and_recompute_layer_variants():
    out = _search()
    assert out["framework"] == "megatron-core"
    assert 0 < out["distinct"] < out["evaluated"]
    assert out["offload_layer_variants"] > 0  # Megatron-Core offloads at pp 1, no recompute
    assert (out["distinct"] + out["recompute_layer_variants"] + out["offload_layer_variants"]
            == out["evaluated"])
    none = _search("--exclude", "recompute=full", "--fix", "offload=0")
    assert none["recompute_layer_variants"] == none["offload_layer_variants"] == 0
    assert none["evaluated"] == none["distinct"]


def test_fix_and_exclude_pin_dimensions():
    out = _search("--fix", "tp=2", "--fix", "sp=true", "--exclude", "precision=fp8",
                  "--exclude", "sharding=zero2")
    for c in out["best"] + out["pareto"]:
        s = c["strategy"]
        assert s["tp"] == 2 and s["sequence_parallel"] and s["precision"] == "bf16"
        assert s["zero_stage"] != 2
    fixed = _search("--fix", "tp_comm_overlap=false", "--fix", "schedule=1f1b")
    for c in fixed["best"] + fixed["pareto"]:
        assert not c["strategy"]["tp_comm_overlap"] and c["strategy"]["vpp"] == 1
    assert fixed["evaluated"] < _search()["evaluated"]


def test_framework_rules_apply():
    # llm-foundry has no pipeline parallelism; torchtitan splits layers unevenly.
    foundry = _search("--framework", "llm-foundry")
    assert {c["strategy"]["pp"] for c in foundry["best"] + foundry["pareto"]} == {1}
    assert foundry["framework"] == "llm-foundry"
    # Megatron-Core's profile reduces gradients in bf16; the candidates carry it.
    assert _search()["best"][0]["strategy"]["grad_reduce_dtype"] == "bf16"


@pytest.mark.parametrize("args, bound", [
    (["-g", "1000000000000"], f"{MAX_SEARCH_GPUS:,}"),
    (["-g", "8", "--max-micro-batch-size", "100000"], "256"),
    (["-g", "8", "--max-vpp", "1000"], "64"),
    (["-g", "8", "--fix", "bogus=1"], "tp_comm_overlap"),
    (["-g", "8", "--framework", "nonesuch"], "megatron-core"),
    (["-g", "8", "--fix", "tp=3"], "no valid strategy"),
])
def test_bad_input_is_one_line_exit_2(args, bound):
    result = CliRunner().invoke(app, ["search", "-m", "llama-3-8b", *args])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and bound in lines[0], lines


def test_pin_parse_and_allows():
    pin = Pin.parse("MBS=2")
    assert (pin.key, pin.value) == ("micro_batch_size", "2")
    c = SearchConstraints(fixed=(Pin.parse("tp=2"), Pin.parse("tp=4")),
                          excluded=(Pin.parse("sp=false"),))
    assert c.allowed("tp", [1, 2, 4, 8]) == [2, 4]
    assert c.allowed("sequence_parallel", [False, True]) == [True]
    assert c.allows("pp", 16)


def test_schedule_simulation_bound_is_one_line_exit_2():
    from perfcast.specs.limits import MAX_PIPELINE_PASSES

    args = ["schedule", "--schedule", "interleaved", "--virtual-stages", "4", "--stages", "128",
            "--micro-batches", "4096", "--forward-time", "1", "--backward-time", "2"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and f"{MAX_PIPELINE_PASSES.value:,}" in lines[0]
    assert 128 * 4096 * 4 > MAX_PIPELINE_PASSES.value


@pytest.mark.parametrize("text, message", [
    ("sp=maybe", "true or false"),
    ("tp=0", "positive integer"),
    ("recompute=fulll", "none, selective, full"),
    ("fp8_recipe=fp3", "tensorwise"),
    ("sharding=zero3", "distributed_optimizer"),
])
def test_pin_values_are_checked(text, message):
    from perfcast.errors import InputError

    with pytest.raises(InputError, match=message):
        Pin.parse(text)


def test_pin_values_are_normalized():
    assert Pin.parse("SP=yes").value == "true"
    assert Pin.parse("tp_comm_overlap=0").value == "false"
    assert Pin.parse("tp=08").value == "8"
