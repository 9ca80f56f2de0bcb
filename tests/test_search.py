"""Strategy search: enumeration, bulk evaluation equals the scalar estimator, ranking, CLI."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from perfcast.catalog.models import load_model
from perfcast.catalog.systems import load_system
from perfcast.cli.main import app
from perfcast.estimate.training import estimate_training
from perfcast.search.bulk import BulkEvaluator
from perfcast.search.enumerate import enumerate_strategies
from perfcast.search.pins import Pin
from perfcast.search.rank import pareto_front, top_k
from perfcast.search.space import CUDA_GRAPH_SCOPES, SearchConstraints
from perfcast.specs import Workload
from perfcast.specs.compat import check_strategy_for_model, check_workload_for_strategy

TINY = dict(max_vpp=1, max_micro_batch_size=1, max_cp=1, fp8=False, sharding=("none",))


def _space(name, gpus, seq, gbs, **constraints):
    model, system = load_model(name), load_system("dgx-h100", num_gpus=gpus)
    workload = Workload(seq_length=seq, global_batch_size=gbs)
    space = enumerate_strategies(model, system, gpus, workload, SearchConstraints(**constraints))
    return model, system, workload, space


def test_enumeration_count_by_hand():
    # Llama-3-8B (32 layers) on 2 GPUs, global batch 2: layouts (tp, pp) = (1, 1) dp 2,
    # (2, 1) dp 1 without SP, with SP, with SP and TP comm overlap, (1, 2) dp 1; (2, 2) needs
    # 4 GPUs: 1 invalid of 4. Recompute none (1) or full with 1..31 or all layers of the stage
    # (32; pp 2: 16 + 1).
    # Without CUDA graphs and activation offload (pinned):
    plain = (Pin(key="cuda_graphs", value="none"), Pin(key="offload", value="0"))
    *_, space = _space("llama-3-8b", 2, 4096, 2, recompute=("none", "full"), fixed=plain,
                       **TINY)
    assert space.invalid == 1
    assert len(space) == 33 + 3 * 33 + 17
    assert space.recompute_layer_variants == len(space) - (2 + 3 * 2 + 2)
    assert space.offload_layer_variants == 0
    *_, space = _space("llama-3-8b", 2, 4096, 2, recompute=("none",), fixed=plain,
                       **{**TINY, "sharding": ("none", "fsdp")})
    assert len(space) == 5 + 1  # FSDP only where there is a DP group: (1, 1)
    # Megatron-Core's scopes for a dense model (none, attention, full: x3) and, at pp 1 without
    # recompute, activation offload of 0 or 2..32 layers (32 values; 1 layer stays staged).
    *_, space = _space("llama-3-8b", 2, 4096, 2, recompute=("none", "full"), **TINY)
    assert len(space) == 3 * (4 * 32 + 4 * 32 + 17)
    assert space.recompute_layer_variants == 3 * (4 * 31 + 15)
    assert space.offload_layer_variants == 3 * 4 * 31
    assert space.distinct_without_recompute_layers == 3 * (4 + 4 + 2)
    scopes = {CUDA_GRAPH_SCOPES[int(g)] for b in space.blocks for g in b.column("cuda_graphs")}
    assert scopes == {"none", "attention", "full"}


def _rows(space):
    for block in space.blocks:
        for i in range(len(block)):
            yield block, i


@settings(max_examples=25, deadline=None)
@given(gpus=st.sampled_from([1, 2, 4, 6, 8, 12, 16, 24, 32, 48, 64]),
       gbs=st.sampled_from([8, 16, 48, 64]))
def test_tp_pp_dp_cp_equals_gpus(gpus, gbs):
    *_, space = _space("llama-3-8b", gpus, 4096, gbs, recompute=("none",), max_vpp=2,
                       max_micro_batch_size=2, max_cp=4, fp8=False)
    assert len(space) > 0
    for block in space.blocks:
        assert np.all(block.tp * block.pp * block.dp * block.cp == gpus)


def test_every_enumerated_strategy_passes_compat():
    model, _, workload, space = _space("mixtral-8x7b", 16, 4096, 32, max_vpp=2,
                                       max_micro_batch_size=2, max_cp=2)
    rng = random.Random(1)
    rows = [(b, rng.randrange(len(b))) for b in rng.choices(space.blocks, k=300)]
    for block, i in rows:
        strategy = block.strategy(i)  # the Strategy validator runs here
        check_strategy_for_model(model, strategy)
        check_workload_for_strategy(workload, strategy)
        assert strategy.tp * strategy.pp * strategy.dp * strategy.cp == 16


@pytest.mark.parametrize("case, samples", [
    (("llama-3-8b", 64, 8192, 256, {}), 600),
    (("mixtral-8x7b", 16, 4096, 64, {"max_micro_batch_size": 2, "max_cp": 2}), 400),
])
def test_bulk_equals_estimate_training(case, samples):
    name, gpus, seq, gbs, constraints = case
    model, system, workload, space = _space(name, gpus, seq, gbs, **constraints)
    metrics = BulkEvaluator.for_space(model, system, workload, space).evaluate_all(space)
    rng = random.Random(7)
    for _ in range(samples):
        b = rng.randrange(len(space.blocks))
        i = rng.randrange(len(space.blocks[b]))
        report = estimate_training(model, system, space.blocks[b].strategy(i), workload)
        step, memory = metrics[b].step_time_s[i], metrics[b].memory_bytes[i]
        assert step == pytest.approx(report.step_time_s, rel=1e-9)
        tps = workload.tokens_per_step / step / gpus
        assert tps == pytest.approx(report.tokens_per_s_per_gpu, rel=1e-9)
        assert memory == pytest.approx(report.memory.peak_bytes, rel=1e-9)
        assert (memory <= system.gpu.usable_hbm_bytes) == report.memory.fits


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 20), st.integers(0, 20)), min_size=1, max_size=60))
def test_pareto_front_has_no_dominated_point(points):
    x, y = (np.array(v, dtype=float) for v in zip(*points, strict=True))
    front = pareto_front(x, y)
    for i in front:
        beaten = (x >= x[i]) & (y >= y[i]) & ((x > x[i]) | (y > y[i]))
        assert not beaten.any()
    for j in set(range(len(x))) - set(front):
        assert any(x[i] >= x[j] and y[i] >= y[j] for i in front)


def test_top_k_breaks_ties_by_lower_index():
    """Of rows tied with the k-th score the lowest indices are kept (``argpartition`` alone
    keeps any of them): the full-recompute blocks scored from their first fits
    (``search.recompute_fit``) rank the same rows as timing every count."""
    scores = np.array([1, 1, 0, 0, 0, 0, 0, 0, 2, 1, 2, 1, 1, 2, 2, 1, 1, 1, 2, 0, 2, 2, 0, 1,
                       2, 1, 0, 2, 2, 2, 0, 0, 2, 0], dtype=float)
    assert list(top_k(scores, 3)) == [8, 10, 13]
    idx = np.arange(len(scores))
    for k in range(1, len(scores)):
        assert list(top_k(scores, k)) == list(idx[np.lexsort((idx, -scores))][:k])


def test_top_k_orders_best_first_and_skips_infeasible():
    scores = np.array([3.0, -np.inf, 7.0, 5.0, 7.0])
    assert list(top_k(scores, 3)) == [2, 4, 3]
    assert list(top_k(scores, 10)) == [2, 4, 3, 0]


def _search(*args):
    return CliRunner().invoke(app, ["search", "--model", "llama3-8b", "--gpus", "16",
                                    "--global-batch-size", "32", "--seq-length", "4096",
                                    "--max-cp", "2", *args])


def test_search_json_keys_and_best_is_best():
    result = _search("--json", "--top", "3")
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert {"evaluated", "feasible", "infeasible", "invalid", "best", "pareto"} <= set(out)
    assert out["evaluated"] == out["feasible"] + out["infeasible"]
    best = out["best"]
    assert len(best) == 3
    assert {"strategy", "tokens_per_s_per_gpu", "step_time_s", "memory_bytes"} <= set(best[0])
    rates = [b["tokens_per_s_per_gpu"] for b in best]
    assert rates == sorted(rates, reverse=True)
    assert rates[0] >= max(p["tokens_per_s_per_gpu"] for p in out["pareto"])


def test_search_constraint_is_respected_and_csv():
    result = _search("--tp", "2", "--csv", "--top", "2")
    assert result.exit_code == 0, result.output
    lines = result.output.strip().splitlines()
    assert lines[0].startswith("rank,tp,pp")
    assert all(line.split(",")[1] == "2" for line in lines[1:])


@pytest.mark.parametrize("args", [["--tp", "3"], ["--objective", "cost"], ["--model", "nope"]])
def test_search_bad_input_exits_2(args):
    result = _search(*args)
    assert result.exit_code == 2
    assert "error:" in result.output


@pytest.mark.parametrize("backend", ["roofline", "analytical"])
def test_search_kernel_backend_reaches_bulk_and_full_forecasts(backend):
    """``--kernel-backend`` times both the bulk evaluation and the reported forecasts."""
    from perfcast.search.run import search_strategies

    model, system = load_model("llama3-8b"), load_system("dgx-h100", num_gpus=16)
    workload = Workload(seq_length=4096, global_batch_size=64)
    result = search_strategies(model, system, workload, 16, top=1, kernel_backend=backend)
    best = result.best[0].report
    again = estimate_training(model, system.with_num_gpus(16), best.strategy, workload,
                              kernel_backend=backend)
    assert best.step_time_s == pytest.approx(again.step_time_s, rel=1e-12)
    cli = CliRunner().invoke(app, ["search", "--model", "llama3-8b", "--gpus", "16", "--top", "1",
                              "--global-batch-size", "64", "--kernel-backend", backend, "--json"])
    assert cli.exit_code == 0, cli.output
    assert json.loads(cli.stdout)["best"][0]["tokens_per_s_per_gpu"] == pytest.approx(
        best.tokens_per_s_per_gpu, rel=1e-9)
