"""Full-recompute blocks scored from each layout's fewest recomputed layers that fit (issue 18).

``search.recompute_fit`` times a layout's first fitting recompute layer count, its next few
where they can rank, and by branch and bound the counts that can reach the Pareto front,
instead of every count. These tests hold it to timing every count (``BlockScorer.every_row``)
on random small models, GPU counts and memory capacities: the same feasible count, best rows
and scores, and Pareto rows.
"""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from perfcast.calibration.bundle import load_calibration
from perfcast.catalog.models import load_model
from perfcast.catalog.systems import load_system
from perfcast.search.block_score import BlockScorer
from perfcast.search.bulk import BulkEvaluator
from perfcast.search.enumerate import enumerate_strategies
from perfcast.search.rank import Objective
from perfcast.search.recompute_fit import first_fit, has_recompute_axis
from perfcast.search.run import DEFAULT_TOKEN_BUDGET, search_strategies
from perfcast.search.space import SearchConstraints
from perfcast.specs import Workload

GIB = 2**30
SMALL = SearchConstraints(recompute=("full",), fp8=False, max_micro_batch_size=2, max_cp=1,
                          tp_comm_overlap=(False,), sharding=("none", "fsdp"))


def _small_model(name: str, layers: int, dense: int):
    """A catalog model cut to ``layers`` layers (``dense`` leading dense ones for MoE)."""
    model = load_model(name)
    update: dict[str, int] = {"num_hidden_layers": layers}
    if model.is_moe and name.startswith("deepseek"):
        update["first_k_dense_layers"] = min(dense, layers - 1)
    return model.model_validate({**model.model_dump(), **update})


def _scorer(model_name, layers, dense, gpus, capacity_gib, seq, top):
    model = _small_model(model_name, layers, dense)
    system = load_system("dgx-h100", num_gpus=gpus)
    gpu = system.gpu.model_copy(update={"hbm_usable_bytes": capacity_gib * GIB})
    system = system.model_copy(update={"gpu": gpu})
    workload = Workload(seq_length=seq, global_batch_size=8 * gpus)
    space = enumerate_strategies(model, system, gpus, workload, SMALL)
    evaluator = BulkEvaluator.for_space(model, system, workload, space)
    return space, evaluator, BlockScorer(evaluator, Objective.THROUGHPUT, gpus,
                                         DEFAULT_TOKEN_BUDGET, 0.0, top)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model_name=st.sampled_from(["llama-3.2-1b", "deepseek-v2-lite", "mixtral-8x7b"]),
       layers=st.integers(3, 12), dense=st.integers(1, 3), gpus=st.sampled_from([2, 4, 8]),
       capacity_gib=st.floats(4, 80), seq=st.sampled_from([2048, 4096]),
       top=st.integers(1, 5))
def test_fewest_recomputed_layers_equal_timing_every_count(model_name, layers, dense, gpus,
                                                           capacity_gib, seq, top):
    space, evaluator, scorer = _scorer(model_name, layers, dense, gpus, capacity_gib, seq, top)
    full = [(i, b) for i, b in enumerate(space.blocks) if has_recompute_axis(b)]
    assert full
    for i, block in full:
        fast, every = scorer.fewest_recomputed(i, block), scorer.every_row(i, block)
        assert fast.feasible == every.feasible
        assert fast.top_rows.tolist() == every.top_rows.tolist()
        assert fast.top_scores.tolist() == every.top_scores.tolist()
        assert fast.front_rows.tolist() == every.front_rows.tolist()
        assert fast.front_tps.tolist() == every.front_tps.tolist()
        assert fast.memory_probed > 0 and every.timed == len(block)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model_name=st.sampled_from(["llama-3.2-1b", "deepseek-v2-lite"]),
       layers=st.integers(3, 16), dense=st.integers(1, 3), gpus=st.sampled_from([2, 4]),
       capacity_gib=st.floats(4, 60))
def test_first_fit_is_the_fewest_fitting_count(model_name, layers, dense, gpus, capacity_gib):
    """The bisection's count is the first along the axis whose memory fits, and every count
    after it fits (memory never rises with more recomputed layers)."""
    space, evaluator, _ = _scorer(model_name, layers, dense, gpus, capacity_gib, 4096, 1)
    capacity = capacity_gib * GIB
    for block in (b for b in space.blocks if has_recompute_axis(b)):
        num_counts = block.recompute_num_layers.size
        fits = (evaluator.evaluate(block).memory_bytes <= capacity).reshape(-1, num_counts)
        first, probed = first_fit(evaluator, block, capacity)
        expected = np.where(fits.any(axis=1), fits.argmax(axis=1), num_counts)
        assert first.tolist() == expected.tolist()
        assert all(row[j:].all() for row, j in zip(fits, first, strict=True))
        assert probed <= len(first) * int(np.ceil(np.log2(num_counts + 1)))


def test_search_reports_what_it_timed():
    """A search counts every strategy (``evaluated``) and reports how many it timed and
    memory-probed; a block large enough is scored from its first fits, timing fewer rows."""
    model, system = load_model("llama-3.2-1b"), load_system("dgx-h100", num_gpus=8)
    result = search_strategies(model, system, Workload(seq_length=4096, global_batch_size=64),
                               8, SMALL, top=3, jobs=1)
    out = result.to_dict()
    assert out["evaluated"] == out["distinct"] + out["recompute_layer_variants"]
    assert out["recompute_layer_variants"] > 0
    assert 0 < out["timed"] and out["memory_probed"] >= 0
    space, _, scorer = _scorer("llama-3.2-1b", 16, 1, 8, 8.0, 4096, 3)
    block = max((b for b in space.blocks if has_recompute_axis(b)),
                key=lambda b: (b.recompute_num_layers.size, len(b)))  # pp 1: 16 counts
    index = space.blocks.index(block)
    fit = BlockScorer(**{**scorer.__dict__, "fit_min_counts": 1, "fit_min_rows": 1})
    summary = fit(index, block)
    assert summary.timed < len(block) / 2 and summary.memory_probed > 0  # 166 and 120 of 384
    assert summary.feasible == scorer.every_row(index, block).feasible > 0


def test_module_set_pruning_uses_the_search_calibration(monkeypatch):
    """``--calibration`` reaches the costs of the pruned selective module sets, as it reaches
    the rest of the search: the shipped calibration is never loaded for them."""
    import perfcast.search.recompute_prune as prune

    mine = load_calibration()
    seen = []
    costs = prune.module_set_costs

    def spy(*args, **kwargs):
        seen.append(kwargs.get("calibration", args[7] if len(args) > 7 else None))
        return costs(*args, **kwargs)

    def shipped(*args, **kwargs):
        raise AssertionError("the shipped calibration was loaded")

    monkeypatch.setattr(prune, "module_set_costs", spy)
    monkeypatch.setattr(prune, "load_calibration", shipped)
    model, system = load_model("mixtral-8x7b"), load_system("dgx-h100", num_gpus=8)
    search_strategies(model, system, Workload(seq_length=4096, global_batch_size=16), 8,
                      SearchConstraints(recompute=("selective",), fp8=False,
                                        max_micro_batch_size=1, max_cp=1,
                                        tp_comm_overlap=(False,), sharding=("none",)),
                      top=1, calibration=mine, jobs=1)
    assert seen and all(c is mine for c in seen)
