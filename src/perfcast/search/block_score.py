"""Score one evaluated block: its feasible count, its best rows and its Pareto rows.

The search merges these per-block summaries in block order, whichever process computed them
(``search.parallel``), so the merge is the same as evaluating every block in turn. A
full-recompute block is scored from the fewest recomputed layers that fit of each layout
(``search.recompute_fit``): the same feasible count and best rows as timing every count.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from perfcast.search.block_stream import SLICE_STRATEGIES, score_in_slices
from perfcast.search.bulk import BulkEvaluator
from perfcast.search.rank import Objective, objective_score, pareto_front, top_k
from perfcast.search.recompute_fit import (
    CountRows,
    every_count,
    every_layout,
    first_fit,
    has_recompute_axis,
)
from perfcast.search.space import StrategyBlock


@dataclass(frozen=True)
class RankedRow:
    """One row of one block, with its objective score."""

    score: float
    block: int
    row: int


@dataclass(frozen=True)
class FrontRow:
    """One row of one block on the block's Pareto front of tokens/s/GPU vs memory headroom."""

    tokens_per_s_per_gpu: float
    headroom_bytes: float
    block: int
    row: int


@dataclass(frozen=True, eq=False)
class BlockSummary:
    """What the search keeps of one block (arrays: cheap to send between processes)."""

    block: int
    feasible: int
    top_rows: np.ndarray
    top_scores: np.ndarray
    front_rows: np.ndarray
    front_tps: np.ndarray
    front_headroom: np.ndarray
    timed: int = 0
    """Strategies whose step time was computed (the block's size unless its recompute layer
    counts were settled by ``search.recompute_fit``)."""
    memory_probed: int = 0
    """Strategies whose peak memory alone was computed (``recompute_fit.first_fit``)."""

    def kept(self) -> list[RankedRow]:
        """The block's best rows, best first."""
        return [RankedRow(s, self.block, int(i))
                for s, i in zip(self.top_scores, self.top_rows, strict=True)]

    def front(self) -> list[FrontRow]:
        """The block's Pareto rows, by decreasing tokens/s/GPU."""
        return [FrontRow(x, y, self.block, int(i))
                for x, y, i in zip(self.front_tps, self.front_headroom, self.front_rows,
                                       strict=True)]


FIT_MIN_COUNTS = 16
"""Fewest recompute layer counts of a block scored from its first fits (``search.
recompute_fit``): that path runs about a dozen evaluations of one count per layout where
timing every count is one evaluation of them all (broadcast: the counts add little work)."""
FIT_MIN_ROWS = 200_000
"""Fewest strategies of a block scored from its first fits: below it, the per-evaluation
overhead outweighs the rows saved. Measured on 2 shared cores (CPU s over the blocks of
``benchmarks/search_speed.py``, every count vs first fits): Mixtral x 64 H100, 16 counts,
~390,000 rows a block: 4.23 vs 3.45; 32 counts, ~260,000 rows: 1.08 vs 0.71; Llama-3.1-405B
x 16,384, 16 counts, ~40,000 rows: 0.45 vs 1.16; 63 counts, ~150,000 rows: 1.04 vs 1.06."""


@dataclass(frozen=True)
class BlockScorer:
    """Evaluates a block and keeps its ``top`` best feasible rows and its Pareto rows."""

    evaluator: BulkEvaluator
    objective: Objective
    num_gpus: int
    token_budget: float
    price_per_gpu_hour: float
    top: int
    fit_min_counts: int = FIT_MIN_COUNTS
    fit_min_rows: int = FIT_MIN_ROWS
    slice_strategies: int = SLICE_STRATEGIES
    """Strategies per evaluated slice of a large block (``search.block_stream``)."""

    def __call__(self, index: int, block: StrategyBlock) -> BlockSummary:
        if (has_recompute_axis(block) and block.recompute_num_layers.size >= self.fit_min_counts
                and len(block) >= self.fit_min_rows):
            path = self.fewest_recomputed
        else:
            path = self.every_row
        return score_in_slices(index, block, path, self.top, self.slice_strategies)

    def every_row(self, index: int, block: StrategyBlock) -> BlockSummary:
        """The summary of ``block`` from the step time and memory of each of its rows."""
        metrics = self.evaluator.evaluate(block)
        rows = np.arange(len(block))
        score = self._score(metrics.step_time_s, metrics.memory_bytes)
        best = top_k(score, self.top)
        fitting = np.flatnonzero(metrics.memory_bytes
                                 <= self.evaluator.system.gpu.usable_hbm_bytes)
        return self._summary(index, int(len(fitting)), rows[best], score[best],
                             CountRows(rows[fitting], metrics.step_time_s[fitting],
                                       metrics.memory_bytes[fitting]), len(block), 0)

    def _score(self, step_time_s: np.ndarray, memory_bytes: np.ndarray) -> np.ndarray:
        """Objective score per row; -inf where the row does not fit."""
        capacity = self.evaluator.system.gpu.usable_hbm_bytes
        tps = self.evaluator.workload.tokens_per_step / step_time_s / self.num_gpus
        return np.where(memory_bytes <= capacity,
                        objective_score(self.objective, tps, self.num_gpus, self.token_budget,
                                        self.price_per_gpu_hour), -np.inf)

    def fewest_recomputed(self, index: int, block: StrategyBlock) -> BlockSummary:
        """A full-recompute block's summary from each layout's first fitting recompute layer
        count (``search.recompute_fit``): the same feasible count, top rows and Pareto rows
        as ``every_row``."""
        capacity = self.evaluator.system.gpu.usable_hbm_bytes
        num_counts = block.recompute_num_layers.size
        first, probed = first_fit(self.evaluator, block, capacity)
        fitting = np.flatnonzero(first < num_counts)
        last = np.full(len(first), num_counts - 1)
        at_first = every_layout(self.evaluator, block, np.minimum(first, last), fitting)
        first_score = self._score(at_first.step_time_s, at_first.memory_bytes)
        leaders = np.sort(top_k(first_score, self.top))  # ties: lower row first
        candidates = every_count(self.evaluator, block, fitting[leaders],
                                 first[fitting[leaders]])
        score = self._score(candidates.step_time_s, candidates.memory_bytes)
        order = np.lexsort((candidates.rows, -score))[:self.top]
        order = order[np.isfinite(score[order])]
        ends = every_layout(self.evaluator, block, last, fitting)
        inner = self._open_layouts(block, fitting, first, at_first, ends)
        front = CountRows(*(np.concatenate([getattr(part, f) for part in (at_first, ends, inner)])
                            for f in ("rows", "step_time_s", "memory_bytes")))
        timed = 2 * len(first) + num_counts * len(leaders) + len(inner.rows)
        return self._summary(index, int((num_counts - first).sum()), candidates.rows[order],
                             score[order], front, timed, probed)

    def _open_layouts(self, block: StrategyBlock, fitting: np.ndarray, first: np.ndarray,
                      at_first: CountRows, ends: CountRows) -> CountRows:
        """Every fitting count of the layouts whose counts may reach the block's Pareto front.

        Along a layout the tokens/s/GPU falls and the headroom rises with the count, so no
        count beats the corner (first fit's tokens/s/GPU, all layers' headroom): the layouts
        whose corner a point of the two ends' front beats are left out (what beats the corner
        beats each of its counts)."""
        capacity = self.evaluator.system.gpu.usable_hbm_bytes
        per_token = self.evaluator.workload.tokens_per_step / self.num_gpus
        xa, yb = per_token / at_first.step_time_s, capacity - ends.memory_bytes
        x = np.concatenate((xa, per_token / ends.step_time_s))
        y = np.concatenate((capacity - at_first.memory_bytes, yb))
        front = pareto_front(x, y)  # by decreasing x, so increasing y
        fx, fy = x[front], y[front]
        ahead = np.searchsorted(-fx, -xa, side="right")  # front points with x >= xa
        last = np.maximum(ahead - 1, 0)
        beaten = (ahead > 0) & ((fy[last] > yb) | ((fy[last] == yb) & (fx[last] > xa)))
        open_ = np.flatnonzero(~beaten)
        return every_count(self.evaluator, block, fitting[open_], first[fitting[open_]])

    def _summary(self, index: int, feasible: int, top_rows: np.ndarray, top_scores: np.ndarray,
                 fitting: CountRows, timed: int, probed: int) -> BlockSummary:
        """The block's summary with the Pareto rows of its ``fitting`` rows."""
        capacity = self.evaluator.system.gpu.usable_hbm_bytes
        tps = self.evaluator.workload.tokens_per_step / fitting.step_time_s / self.num_gpus
        headroom = capacity - fitting.memory_bytes
        order = np.argsort(fitting.rows, kind="stable")  # row order, as the whole block's
        on_front = order[pareto_front(tps[order], headroom[order])]
        return BlockSummary(
            block=index, feasible=feasible, top_rows=top_rows, top_scores=top_scores,
            front_rows=fitting.rows[on_front], front_tps=tps[on_front],
            front_headroom=headroom[on_front], timed=timed, memory_probed=probed)
