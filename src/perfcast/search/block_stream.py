"""Score a large block in slices of its rows and merge the slices' summaries (issue 18).

A ``StrategyBlock``'s first axis holds its size rows (tp, cp, ep, micro-batch, ...; shape
(rows, 1, 1)), the others its vpp and its last axis (recompute counts, offloaded layers or
module sets) broadcast against them, so its flat row order is ``row x (V x K) + ...``: the rows
``a:b`` of the first axis are the contiguous flat rows ``a V K : b V K``. Evaluating such slices
one after another keeps every temporary array of ``search.bulk`` at the slice's size (tens of
MB rather than the GB of an 18-million-strategy selective block, whose arrays also fall out of
the CPU caches) and gives the same numbers: every formula is element-wise along the rows.

The merge is exact:

* ``feasible``, ``timed`` and ``memory_probed`` add;
* the ``top`` best rows of the block are among the ``top`` best of each slice; ranking their
  union by (score, row) as ``rank.top_k`` does (ties: lower row first) gives the block's;
* a row on the block's Pareto front is on its slice's front (no row of the slice beats it; of
  identical points the block keeps the lowest row, which is also its slice's lowest), and a
  row off the block's front is beaten by a row on it, so the front of the union of the slices'
  fronts, taken in row order (``rank.pareto_front`` keeps the first of identical points), is
  the block's front.

``tests/test_search_block_stream.py`` checks that a sliced block's summary equals the
unsliced one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields, replace
from typing import Any

import numpy as np

from perfcast.search.rank import pareto_front
from perfcast.search.space import StrategyBlock

SLICE_STRATEGIES = 1 << 18
"""Strategies per evaluated slice of a block (262,144: 2 MiB per float array, the unit of
``search.bulk``'s temporaries). Measured on 2 shared cores, every 20th block of the
DeepSeek-V3 x 1,024 H100 search (89 M strategies), strategies/s/core: unsliced 2.87 M;
4 M per slice 3.56 M; 1 M 4.27 M; 262,144 4.75 M; 131,072 4.11 M (the per-call overhead of an
evaluation, a few ms, starts to count)."""


def row_count(block: StrategyBlock) -> int:
    """Size rows of ``block`` (its first axis)."""
    return int(block.shape[0])


def row_slice(block: StrategyBlock, start: int, stop: int) -> StrategyBlock:
    """Rows ``start:stop`` of ``block``'s first axis, as a block (arrays of one row on that
    axis, broadcast over it, are kept)."""
    rows = row_count(block)
    update: dict[str, Any] = {}  # the block's per-row array fields, by name
    for f in fields(block):
        value = getattr(block, f.name)
        if f.init and isinstance(value, np.ndarray) and value.ndim and value.shape[0] == rows:
            update[f.name] = value[start:stop]
    return replace(block, **update)


def slice_bounds(block: StrategyBlock, max_strategies: int) -> list[tuple[int, int]]:
    """Consecutive (start, stop) row ranges of ``block`` of at most ``max_strategies``
    strategies each (at least one row)."""
    rows = row_count(block)
    per_row = max(len(block) // max(rows, 1), 1)
    step = max(max_strategies // per_row, 1)
    return [(a, min(a + step, rows)) for a in range(0, rows, step)]


def merge_summaries(index: int, parts: list, offsets: list[int], top: int):
    """One ``BlockSummary`` of block ``index`` from its slices' summaries ``parts``, whose
    rows start at flat row ``offsets`` of the block (see the module docstring)."""
    from perfcast.search.block_score import BlockSummary

    top_rows = np.concatenate([p.top_rows + o for p, o in zip(parts, offsets, strict=True)])
    top_scores = np.concatenate([p.top_scores for p in parts])
    order = np.lexsort((top_rows, -top_scores))[:top]
    front_rows = np.concatenate([p.front_rows + o for p, o in zip(parts, offsets, strict=True)])
    front_tps = np.concatenate([p.front_tps for p in parts])
    front_headroom = np.concatenate([p.front_headroom for p in parts])
    by_row = np.argsort(front_rows, kind="stable")
    on_front = by_row[pareto_front(front_tps[by_row], front_headroom[by_row])]
    return BlockSummary(
        block=index, feasible=sum(p.feasible for p in parts),
        top_rows=top_rows[order], top_scores=top_scores[order],
        front_rows=front_rows[on_front], front_tps=front_tps[on_front],
        front_headroom=front_headroom[on_front], timed=sum(p.timed for p in parts),
        memory_probed=sum(p.memory_probed for p in parts))


def score_in_slices(index: int, block: StrategyBlock, score: Callable, top: int,
                    max_strategies: int = SLICE_STRATEGIES):
    """``score(index, block)`` (a ``BlockScorer`` path returning a ``BlockSummary``) over
    slices of at most ``max_strategies`` strategies, merged into the block's summary."""
    bounds = slice_bounds(block, max_strategies)
    if len(bounds) == 1:
        return score(index, block)
    per_row = len(block) // row_count(block)
    parts = [score(index, row_slice(block, a, b)) for a, b in bounds]
    return merge_summaries(index, parts, [a * per_row for a, _ in bounds], top)
