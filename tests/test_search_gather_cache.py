"""The bulk evaluator's cache of gathered layer tables (``BulkEvaluator._gathered``, issue 18):
it keeps the tables of whole row selections that blocks share, never those of a block's row
slices (views made once, ``search.block_stream``), and stays under ``GATHER_CACHE_BYTES``;
a search scored in slices with the cache bounded gives the numbers of one scored whole."""

from __future__ import annotations

import dataclasses

import numpy as np

from perfcast.catalog.models import load_model
from perfcast.catalog.systems import load_system
from perfcast.search import bulk
from perfcast.search.block_score import BlockScorer
from perfcast.search.block_stream import slice_bounds
from perfcast.search.bulk import BulkEvaluator
from perfcast.search.enumerate import enumerate_strategies
from perfcast.search.rank import Objective
from perfcast.search.run import DEFAULT_TOKEN_BUDGET
from perfcast.search.space import SearchConstraints
from perfcast.specs import Workload

SMALL = SearchConstraints(max_micro_batch_size=1, max_cp=1, fp8=False)


def _evaluator():
    model = load_model("deepseek-v2-lite")
    model = model.model_validate({**model.model_dump(), "num_hidden_layers": 4})
    system = load_system("dgx-h100", num_gpus=16)
    workload = Workload(seq_length=2048, global_batch_size=64)
    space = enumerate_strategies(model, system, 16, workload, SMALL)
    return space, BulkEvaluator.for_space(model, system, workload, space)


def _summaries(scorer: BlockScorer, space) -> list[dict]:
    return [{f.name: np.asarray(getattr(s, f.name)).tolist() for f in dataclasses.fields(s)}
            for s in (scorer(i, block) for i, block in enumerate(space.blocks))]


def test_slices_are_not_kept_and_the_cache_is_bounded(monkeypatch):
    space, evaluator = _evaluator()
    whole = BlockScorer(evaluator, Objective.THROUGHPUT, 16, DEFAULT_TOKEN_BUDGET, 0.0, 3,
                        fit_min_rows=1, slice_strategies=1 << 40)
    expected = _summaries(whole, space)
    kept = len(evaluator._gathers)
    assert kept  # whole blocks share their selections' tables
    assert all(array.flags.owndata for array, _ in evaluator._gathers.values())

    bound = 4096  # bytes: a few small selections' tables
    monkeypatch.setattr(bulk, "GATHER_CACHE_BYTES", bound)
    fresh = dataclasses.replace(evaluator, _gathers={}, _gathered_bytes=[0])
    sliced = dataclasses.replace(whole, evaluator=fresh, slice_strategies=64)
    assert any(len(slice_bounds(b, 64)) > 1 for b in space.blocks)  # slices are exercised
    assert _summaries(sliced, space) == expected
    assert all(array.flags.owndata for array, _ in fresh._gathers.values())
    cached = sum(getattr(table, f.name).nbytes for _, table in fresh._gathers.values()
                 for f in dataclasses.fields(table))
    assert cached == fresh._gathered_bytes[0]
    # one table larger than the bound is kept alone; otherwise the cache stays under it
    assert cached <= bound or len(fresh._gathers) == 1
