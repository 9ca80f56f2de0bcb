"""The fewest recomputed layers that fit: full-recompute blocks scored without timing every
recompute layer count (issue 18).

A full-recompute block's last axis is the recompute layer count ``recompute_num_layers``, in
increasing order of recomputed layers (1, 2, ..., L-1, then 0 = all; ``search.enumerate``).
Along that axis, for every layout (every other axis):

* the peak memory never rises: each recomputed layer stores its input instead of all its
  activations (``memory.estimate._stage_layer_activations``; Korthikanti et al. 2022 §4.1);
* the step time never falls: each recomputed layer re-runs its forward
  (``schedule.stage_time.assemble_stage_time``) and, under ZeRO-3 with a live-parameter limit,
  its gather (``schedule.data_parallel.zero3_regathered_layers``).

So the counts that fit are a suffix of the axis, starting at the layout's first fit, and the
first fit is the layout's best (fastest) fitting count. It is found by bisection on the peak
memory (``BulkEvaluator.peak_memory``; ceil(log2(K + 1)) probes for K counts) rather than in
closed form: memory is not affine in the count where a stage mixes dense and MoE layers
(``moe_reduced`` rounds down) nor across stages (each caps the count at its own layers and the
peak is their maximum), while monotonicity holds everywhere. Then:

* ``feasible`` is exact: the layout's K - first-fit counts fit;
* the block's ``top`` rows are exact: a row (layout, j) ranks after (layout, first fit), so the
  top ``top`` rows are among the counts of the ``top`` best layouts, which are timed (ties by
  row index, as ``rank.top_k``);
* the Pareto rows (tokens/s/GPU vs memory headroom) are exact: a layout's counts lie between
  its first fit (fastest) and all layers recomputed (most headroom), so none beats the corner
  (first fit's tokens/s/GPU, all layers' headroom); only the layouts whose corner no point of
  the two ends' front beats are timed at every count.

``tests/test_search_recompute_fit.py`` checks the result equals timing every count.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np

from perfcast.search.bulk import BulkEvaluator
from perfcast.search.space import StrategyBlock


def has_recompute_axis(block: StrategyBlock) -> bool:
    """Whether ``block``'s last axis is a recompute layer count of more than one value (full
    recompute: no offloaded layers nor module sets share the axis)."""
    return (block.recompute == "full" and block.recompute_num_layers.size > 1
            and block.cpu_offload_activation_layers.size == 1 and block.module_set.size == 1)


def layouts_at(block: StrategyBlock, layouts: np.ndarray) -> StrategyBlock:
    """The rows of ``block`` at flat layout indices ``layouts`` (shape (n,)) with every count,
    as a block of shape (n, 1, K)."""
    layout_shape = block.shape[:-1] + (1,)
    update: dict[str, Any] = {}  # the block's array fields, by name
    for f in fields(block):
        value = getattr(block, f.name)
        if not f.init or not isinstance(value, np.ndarray) or f.name == "recompute_num_layers":
            continue
        flat = np.broadcast_to(value, layout_shape).reshape(-1)
        update[f.name] = flat[layouts].reshape(-1, 1, 1)
    return replace(block, **update)


def with_counts(block: StrategyBlock, count_index) -> StrategyBlock:
    """``block`` at one recompute count per layout: ``count_index`` (an index on the count
    axis) of the layout shape (the block's shape with a last axis of 1) or a scalar. The other
    sizes keep their broadcast shapes, so the evaluation costs what one count of the block
    does."""
    counts = block.recompute_num_layers.reshape(-1)[count_index]
    return replace(block, recompute_num_layers=np.asarray(counts, dtype=np.int64).reshape(
        np.shape(count_index) or (1, 1, 1)))


def first_fit(evaluator: BulkEvaluator, block: StrategyBlock, capacity_bytes: float
              ) -> tuple[np.ndarray, int]:
    """Per flat layout of ``block`` (full recompute, ``has_recompute_axis``), the index on the
    count axis of the fewest recomputed layers that fit in ``capacity_bytes`` (K, the number
    of counts, where none fits), and how many strategies' memory the bisection computed."""
    num_counts = block.recompute_num_layers.size
    layout_shape = block.shape[:-1] + (1,)
    lo = np.zeros(layout_shape, dtype=np.int64)
    hi = np.full(layout_shape, num_counts, dtype=np.int64)
    probed = 0
    while True:
        open_ = lo < hi
        if not open_.any():
            return lo.reshape(-1), probed
        mid = np.minimum((lo + hi) // 2, num_counts - 1)
        memory = evaluator.peak_memory(with_counts(block, mid)).reshape(layout_shape)
        probed += lo.size
        fits = memory <= capacity_bytes
        hi = np.where(open_ & fits, mid, hi)
        lo = np.where(open_ & ~fits, mid + 1, lo)


def every_layout(evaluator: BulkEvaluator, block: StrategyBlock, count_index: np.ndarray,
                 layouts: np.ndarray) -> CountRows:
    """``CountRows`` of ``layouts`` (flat, ascending) at ``count_index`` (one per flat layout
    of the block, below K), evaluated over every layout at once (``with_counts``)."""
    num_counts = block.recompute_num_layers.size
    layout_shape = block.shape[:-1] + (1,)
    metrics = evaluator.evaluate(with_counts(block, count_index.reshape(layout_shape)))
    return CountRows(layouts * num_counts + count_index[layouts], metrics.step_time_s[layouts],
                     metrics.memory_bytes[layouts])


@dataclass(frozen=True, eq=False)
class CountRows:
    """Step time and memory of chosen rows of a full-recompute block, with their flat row
    indices in the block (layout x K + count index)."""

    rows: np.ndarray
    step_time_s: np.ndarray
    memory_bytes: np.ndarray


def every_count(evaluator: BulkEvaluator, block: StrategyBlock, layouts: np.ndarray,
                fitting_from: np.ndarray) -> CountRows:
    """``CountRows`` of every count from ``fitting_from`` on (one count index per layout) of
    ``layouts`` (flat, ascending), evaluated as one block of those layouts."""
    num_counts = block.recompute_num_layers.size
    if not len(layouts):
        empty = np.empty(0)
        return CountRows(np.empty(0, dtype=np.int64), empty, empty)
    metrics = evaluator.evaluate(layouts_at(block, layouts))
    index = np.arange(num_counts)
    keep = (index[None, :] >= fitting_from[:, None]).ravel()
    rows = (layouts[:, None] * num_counts + index[None, :]).ravel()
    return CountRows(rows[keep], metrics.step_time_s[keep], metrics.memory_bytes[keep])
