"""Vpps whose stated pipeline splits give every rank the same kinds of layers share one block
(``search.split_merge``, issue 18): the bulk score of such a block equals ``estimate_training``
of each of its strategies, under each vpp's own split."""

from __future__ import annotations

import numpy as np
import pytest

from perfcast.catalog.models import load_model
from perfcast.catalog.systems import load_system
from perfcast.estimate.training import estimate_training
from perfcast.search.bulk import BulkEvaluator
from perfcast.search.enumerate import default_rules, enumerate_strategies
from perfcast.search.run import search_space
from perfcast.search.space import SearchConstraints
from perfcast.search.split_merge import rank_kinds, ranks_layers, split_groups
from perfcast.specs import Strategy, Workload

SMALL = SearchConstraints(max_micro_batch_size=2, max_cp=2, fp8=False)


def _six_layer_lite():
    """DeepSeek-V2-Lite cut to 6 layers (layer 0 dense, the others MoE)."""
    model = load_model("deepseek-v2-lite")
    return model.model_validate({**model.model_dump(), "num_hidden_layers": 6})


def test_vpps_merge_where_ranks_hold_the_same_layer_kinds():
    """pp 2: vpp 1 and 3 split evenly (ranks 0-2 | 3-5), vpp 2 counts the embedding and loss
    as layers (ranks 0,3,4 | 1,2,5): both give rank 0 the dense layer and two MoE layers, so
    they merge; vpp 4 (ranks 1,3,5 | 0,2,4) moves the dense layer to rank 1: a block of its
    own."""
    model, rules, options = _six_layer_lite(), default_rules(), Strategy(num_gpus=1)
    groups = split_groups(model, options, rules, 2, [1, 2, 3, 4])
    assert [g.vpps for g in groups] == [(1, 2, 3), (4,)]
    for group in groups:
        assert group.splits == tuple(rules.split_fields(6, 2, v) for v in group.vpps)
        kinds = {rank_kinds(model, options, ranks_layers(model, options, 2, v, s))
                 for v, s in zip(group.vpps, group.splits, strict=True)}
        assert len(kinds) == 1
        assert group.stage_layers == ranks_layers(model, options, 2, group.vpps[0],
                                                  group.splits[0])
    assert groups[0].stage_layers == ((0, 1, 2), (3, 4, 5))
    assert groups[1].stage_layers == ((1, 3, 5), (0, 2, 4))


def test_merged_blocks_score_each_vpp_as_estimate_training():
    model = _six_layer_lite()
    system = load_system("dgx-h100", num_gpus=16)
    workload = Workload(seq_length=2048, global_batch_size=64)
    space = enumerate_strategies(model, system, 16, workload, SMALL)
    evaluator = BulkEvaluator.for_space(model, system, workload, space)
    merged = [b for b in space.blocks if b.vpp_options]
    assert merged
    rng = np.random.default_rng(18)
    seen_vpps = set()
    for block in merged[:6]:
        metrics = evaluator.evaluate(block)
        vpps = block.column("vpp")
        for vpp in np.unique(vpps):
            rows = np.flatnonzero(vpps == vpp)
            for i in rng.choice(rows, size=min(2, len(rows)), replace=False):
                strategy = block.strategy(int(i))
                assert strategy.vpp == vpp
                split = default_rules().split_fields(6, strategy.pp, strategy.vpp)
                assert {k: getattr(strategy, k) for k in split} == split
                report = estimate_training(model, system, strategy, workload)
                assert metrics.step_time_s[i] == pytest.approx(report.step_time_s, rel=1e-9)
                assert metrics.memory_bytes[i] == pytest.approx(report.memory.peak_bytes,
                                                                rel=1e-9)
                seen_vpps.add((block.pp, int(vpp), split["account_for_loss_in_pipeline_split"]))
    # a merged block holds vpps of the stated split and of the even one
    assert {flag for _, _, flag in seen_vpps} == {True, False}


def test_llama_405b_blocks_merge_without_losing_strategies():
    """Llama-3.1-405B (126 layers + embedding + loss = 128 units) on 16,384 H100: every vpp of a
    pipeline size that divides the units gives each rank the same layers' kinds, so 2,808
    blocks (one per stated split) become 1,008 over the same 21,695,229 strategies."""
    model = load_model("llama-3.1-405b")
    system = load_system("dgx-h100", num_gpus=16384)
    _, space = search_space(model, system, Workload(seq_length=8192, global_batch_size=2048),
                            16384)
    assert len(space) == 21_695_229
    assert len(space.blocks) == 1_008
