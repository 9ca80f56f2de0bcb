"""Score one evaluated block: its feasible count, its best rows and its Pareto rows.

The search merges these per-block summaries in block order, whichever process computed them
(``search.parallel``), so the merge is the same as evaluating every block in turn.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from perfcast.search.bulk import BulkEvaluator
from perfcast.search.rank import Objective, objective_score, pareto_front, top_k
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

    def kept(self) -> list[RankedRow]:
        """The block's best rows, best first."""
        return [RankedRow(s, self.block, int(i))
                for s, i in zip(self.top_scores, self.top_rows, strict=True)]

    def front(self) -> list[FrontRow]:
        """The block's Pareto rows, by decreasing tokens/s/GPU."""
        return [FrontRow(x, y, self.block, int(i))
                for x, y, i in zip(self.front_tps, self.front_headroom, self.front_rows,
                                       strict=True)]


@dataclass(frozen=True)
class BlockScorer:
    """Evaluates a block and keeps its ``top`` best feasible rows and its Pareto rows."""

    evaluator: BulkEvaluator
    objective: Objective
    num_gpus: int
    token_budget: float
    price_per_gpu_hour: float
    top: int

    def __call__(self, index: int, block: StrategyBlock) -> BlockSummary:
        metrics = self.evaluator.evaluate(block)
        capacity = self.evaluator.system.gpu.usable_hbm_bytes
        tps = self.evaluator.workload.tokens_per_step / metrics.step_time_s / self.num_gpus
        fits = metrics.memory_bytes <= capacity
        score = np.where(fits, objective_score(self.objective, tps, self.num_gpus,
                                               self.token_budget, self.price_per_gpu_hour),
                         -np.inf)
        best = top_k(score, self.top)
        rows = np.flatnonzero(fits)
        headroom = capacity - metrics.memory_bytes[rows]
        on_front = rows[pareto_front(tps[rows], headroom)]
        return BlockSummary(
            block=index, feasible=int(fits.sum()), top_rows=best, top_scores=score[best],
            front_rows=on_front, front_tps=tps[on_front],
            front_headroom=capacity - metrics.memory_bytes[on_front])
