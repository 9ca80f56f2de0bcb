"""2D tensor parallelism (TP-SP over a rows x cols grid, --tp2d): volumes by hand, the 1 x t
grid equals 1D TP with SP, FLOPs and memory split tp ways, CLI errors."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from perfcast.catalog.models import load_model
from perfcast.catalog.systems import load_system
from perfcast.cli.main import app
from perfcast.estimate.training import estimate_training
from perfcast.graph.layer import LayerShape, layer_ops
from perfcast.graph.ops import Collective, Group, Phase
from perfcast.graph.tensor_parallel_2d import tp2d_buffer_bytes, tp2d_comm_ops
from perfcast.search.pins import Pin
from perfcast.specs import Strategy, Workload

LLAMA = load_model("llama-3-70b")  # h 8192, 64 heads, 8 KV heads, d 128, ffn 28672 (gated)
T = 8192


def _forward(ops):
    return {op.name: op for op in ops if op.phase == Phase.FORWARD}


def test_volumes_by_hand_on_a_2x4_grid():
    ops = _forward(tp2d_comm_ops(LLAMA, T, rows=2, cols=4))
    # Row collectives (4 ranks): the residual stream's hidden slice h/r for all T tokens.
    assert ops["tp2d_row_all_gather"].size_bytes == 2 * T * 8192 / 2
    assert ops["tp2d_row_all_gather"].group == Group.TP_ROW
    assert ops["tp2d_row_all_gather"].count == ops["tp2d_row_reduce_scatter"].count == 2
    # Column collectives (2 ranks): widths over c = 4.
    assert ops["tp2d_col_qkv"].size_bytes == 2 * T * (64 + 16) * 128 / 4
    assert ops["tp2d_col_qkv"].collective == Collective.REDUCE_SCATTER
    assert ops["tp2d_col_kv"].size_bytes == 2 * T * 2 * 8 * 128 / 4
    assert ops["tp2d_col_attn_out"].size_bytes == 2 * T * 64 * 128 / 4
    assert ops["tp2d_col_mlp_in"].size_bytes == 2 * T * 2 * 28672 / 4
    assert ops["tp2d_col_mlp_out"].size_bytes == 2 * T * 28672 / 4
    assert ops["tp2d_norm_stats"].size_bytes == 8 * T / 4
    assert all(op.group == Group.TP_COL for n, op in ops.items() if "col" in n or "norm" in n)
    backward = [op for op in tp2d_comm_ops(LLAMA, T, 2, 4) if op.phase != Phase.FORWARD]
    assert sum(o.size_bytes * o.count for o in backward) == sum(
        o.size_bytes * o.count for o in ops.values())


def test_one_by_t_grid_is_1d_sequence_parallel_volumes():
    ops = _forward(tp2d_comm_ops(LLAMA, T, rows=1, cols=8))
    one_d = _forward(layer_ops(LLAMA, LayerShape(micro_batch=1, seq_length=T, tp=8,
                                                 sequence_parallel=True))[1])
    assert set(ops) == {"tp2d_row_all_gather", "tp2d_row_reduce_scatter"}
    assert ops["tp2d_row_all_gather"].size_bytes == one_d["tp_all_gather"].size_bytes
    assert ops["tp2d_row_reduce_scatter"].size_bytes == one_d["tp_reduce_scatter"].size_bytes


def _shape(rows, tp=8):
    return LayerShape(micro_batch=1, seq_length=T, tp=tp, tp_rows=rows, sequence_parallel=True)


@pytest.mark.parametrize("rows", [2, 4, 8])
def test_flops_per_rank_are_one_tp_share(rows):
    flops = lambda shape: sum(op.flops for op in layer_ops(LLAMA, shape)[0])  # noqa: E731
    assert flops(_shape(rows)) == pytest.approx(flops(_shape(1)), rel=1e-12)


def _train(**fields):
    system = load_system("dgx-h100", num_gpus=64)
    strategy = Strategy(num_gpus=64, pp=4, sequence_parallel=True, distributed_optimizer=True,
                        **fields)
    return estimate_training(LLAMA, system, strategy, Workload(seq_length=T, global_batch_size=64))


def test_grid_of_one_row_equals_1d_tp():
    assert _train(tp=16, tp2d_rows=1).step_time_s == _train(tp=16).step_time_s


def test_2d_splits_memory_like_1d_plus_the_kv_gather():
    one, two = _train(tp=16), _train(tp=16, tp2d_rows=4)
    assert two.memory.stages[0].weights_bytes == one.memory.stages[0].weights_bytes
    extra = two.memory.stages[0].activations_bytes - one.memory.stages[0].activations_bytes
    assert extra == pytest.approx(tp2d_buffer_bytes(LLAMA, T, 16, 4), rel=1e-9)
    assert tp2d_buffer_bytes(LLAMA, T, 16, 4) == 2 * T * 2 * 8 * 128 / 4
    assert tp2d_buffer_bytes(LLAMA, T, 16, 1) == 0.0
    assert two.breakdown.tp_comm_s > 0
    assert any("no listed framework" in a for a in two.assumptions)


runner = CliRunner()


@pytest.mark.parametrize(("args", "words"), [
    (["-m", "llama-3-70b", "--gpus", "16", "--tp2d", "4x4"], "sequence_parallel"),
    (["-m", "llama-3-70b", "--gpus", "16", "--tp", "8", "--tp2d", "4x4", "--sequence-parallel"],
     "disagrees with tp=8"),
    (["-m", "llama-3-70b", "--gpus", "16", "--tp2d", "4by4", "--sequence-parallel"], "ROWSxCOLS"),
    (["-m", "llama-3-70b", "--gpus", "32", "--tp2d", "2x16", "--sequence-parallel"],
     "num_key_value_heads=8"),
    (["-m", "mixtral-8x7b", "--gpus", "8", "--tp2d", "2x4", "--sequence-parallel"], "experts"),
])
def test_cli_bad_grid_exits_2(args, words):
    for command in ("train", "memory"):
        result = runner.invoke(app, [command, *args])
        assert result.exit_code == 2, result.output
        assert words in result.output and "Traceback" not in result.output


def test_cli_train_takes_the_grid():
    result = runner.invoke(app, ["train", "-m", "llama-3-70b", "--gpus", "64", "--pp", "4",
                                 "--tp2d", "4x4", "--sequence-parallel"])
    assert result.exit_code == 0, result.output
    assert "TP 16 (2D 4×4," in result.output
    result = runner.invoke(app, ["train", "-m", "llama-3-70b", "--gpus", "64", "--pp", "4",
                                 "--tp2d", "4x4", "--sequence-parallel", "--json"])
    report = json.loads(result.output)
    assert report["strategy"]["tp2d_rows"] == 4 and report["strategy"]["tp"] == 16
    assert any("no listed framework" in a for a in report["assumptions"])


def _space(framework, **constraints):
    from perfcast.catalog.frameworks import load_framework_profile
    from perfcast.search.enumerate import enumerate_strategies
    from perfcast.search.framework_rules import LayoutRules
    from perfcast.search.space import SearchConstraints

    system = load_system("dgx-h100", num_gpus=16)
    c = SearchConstraints(max_vpp=1, max_micro_batch_size=1, fp8=False, max_cp=1,
                          sharding=("none",), recompute=("none",), **constraints)
    workload = Workload(seq_length=T, global_batch_size=16)
    space = enumerate_strategies(LLAMA, system, 16, workload, c,
                                 LayoutRules.of(load_framework_profile(framework)))
    return system, workload, space


def _grids(space):
    return {(int(tp), int(r)) for b in space.blocks
            for tp, r in zip(b.column("tp"), b.column("tp2d_rows"), strict=True)}


def test_search_offers_2d_grids_only_under_a_profile_that_runs_them():
    assert all(r == 1 for _, r in _grids(_space("megatron-core")[2]))
    grids = _grids(_space("analytical")[2])
    assert {(8, 2), (8, 4), (16, 2), (16, 8)} <= grids  # cols 4, 2, 8, 2 divide 8 KV heads
    assert (16, 1) in grids and (8, 8) in grids  # rows 8 on tp 8: cols 1
    pinned = _grids(_space("analytical", fixed=(Pin.parse("tp2d_rows=2"),))[2])
    assert {r for _, r in pinned} == {2}


def test_search_bulk_equals_estimate_training_on_2d_grids():
    import random

    from perfcast.search.bulk import BulkEvaluator

    system, workload, space = _space("analytical", fixed=(Pin.parse("sp=true"),))
    metrics = BulkEvaluator.for_space(LLAMA, system, workload, space).evaluate_all(space)
    rng, grids = random.Random(5), set()
    for _ in range(150):
        b = rng.randrange(len(space.blocks))
        i = rng.randrange(len(space.blocks[b]))
        strategy = space.blocks[b].strategy(i)
        grids.add(strategy.tp2d_rows > 1)
        report = estimate_training(LLAMA, system, strategy, workload)
        assert metrics[b].step_time_s[i] == pytest.approx(report.step_time_s, rel=1e-9)
        assert metrics[b].memory_bytes[i] == pytest.approx(report.memory.peak_bytes, rel=1e-9)
    assert grids == {True, False}
