"""``search_strategies``: enumerate, evaluate in bulk, rank, and forecast the winners in full."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable

import numpy as np

from perfcast.calibration.bundle import Calibration
from perfcast.errors import InputError
from perfcast.estimate.training import estimate_training
from perfcast.kernels.backend import DEFAULT_KERNEL_BACKEND, KernelBackendName
from perfcast.schedule.pipeline import CLOSED_FORM_SCHEDULES, schedule_chunks
from perfcast.search.block_score import BlockScorer, RankedRow
from perfcast.search.bulk import BulkEvaluator
from perfcast.search.enumerate import enumerate_strategies
from perfcast.search.framework_rules import (
    DEFAULT_SEARCH_FRAMEWORK,
    LayoutRules,
    framework_options,
)
from perfcast.search.parallel import parallel_layer_tables, parallel_map, resolve_jobs
from perfcast.search.progress_watch import observed
from perfcast.search.rank import (
    Objective,
    objective_score,
    pareto_front,
    time_to_train_s,
    training_cost_usd,
)
from perfcast.search.result import SearchCandidate, SearchResult
from perfcast.search.space import SearchConstraints, StrategySpace
from perfcast.specs.hardware import SystemSpec
from perfcast.specs.limits import MAX_GPUS
from perfcast.specs.model import ModelSpec
from perfcast.specs.strategy import Strategy
from perfcast.specs.workload import Workload

DEFAULT_TOKEN_BUDGET = 1e12
"""Tokens to train for the time and cost objectives (1 T tokens) unless given."""
MAX_PARETO_POINTS = 50
"""Pareto points forecast in full (evenly spaced along the front when it is longer)."""
BLOCK_COST_STRATEGIES = 20_000
"""What scoring one block costs beyond its strategies, in strategies (``search.parallel``
cuts the blocks into runs of equal cost with it): ~2.5 ms of fixed work per block (its stages'
parameters, memory and collectives, the summary) against ~0.11 us per strategy, fitted over
the 1,008 blocks of the Llama-3.1-405B x 16,384 search on 2 shared cores. With the size
alone, the last of 8 runs (the largest blocks, fewest of them) cost 1.68 CPU-s against
0.32-0.71 for the others."""
MAX_SEARCH_GPUS = MAX_GPUS.value
"""Largest GPU count searched (1,048,576): about five times the largest GPU clusters built to
date (xAI Colossus, ~200,000 H100/H200 in 2025); beyond it a count is a typo, not a plan."""


def search_space(model: ModelSpec, system: SystemSpec, workload: Workload, num_gpus: int,
                 constraints: SearchConstraints | None = None,
                 framework: str = DEFAULT_SEARCH_FRAMEWORK,
                 calibration: Calibration | None = None) -> tuple[LayoutRules, StrategySpace]:
    """The framework's layout rules and every strategy it runs on ``num_gpus`` GPUs of
    ``system``, with its defaults for the options not searched (``calibration``, the shipped
    one when None, prices the selective module sets it prunes)."""
    from perfcast.catalog.frameworks import load_framework_profile

    resolved = load_framework_profile(framework)
    generation = system.gpu.generation
    rules = LayoutRules.of(resolved, generation)
    return rules, enumerate_strategies(model, system, num_gpus, workload, constraints, rules,
                                       framework_options(resolved, generation), calibration)


def search_strategies(
    model: ModelSpec,
    system: SystemSpec,
    workload: Workload,
    num_gpus: int,
    constraints: SearchConstraints | None = None,
    objective: Objective | str = Objective.THROUGHPUT,
    top: int = 5,
    token_budget: float = DEFAULT_TOKEN_BUDGET,
    price_per_gpu_hour: float | None = None,
    progress: Callable[[int, int], None] | None = None,
    kernel_backend: KernelBackendName | str = DEFAULT_KERNEL_BACKEND,
    calibration: Calibration | None = None,
    framework: str = DEFAULT_SEARCH_FRAMEWORK,
    jobs: int | None = None,
) -> SearchResult:
    """Best strategies for ``model`` on ``num_gpus`` GPUs of ``system`` that ``framework``
    (a profile ``NAME[@VERSION]``) runs, with its defaults for the options not searched (no
    side effects).

    ``progress(done, total)`` is called after each evaluated block. ``kernel_backend`` times
    the kernels of both the bulk evaluation and the full forecasts of the reported strategies;
    ``calibration`` (``perfcast.calibration.bundle``; the shipped one when None) calibrates both.
    ``jobs`` processes share the work (``search.parallel``; None: every core when the space is
    large); the result does not depend on it.
    """
    objective = Objective(objective)
    if objective is Objective.COST and price_per_gpu_hour is None:
        raise InputError("price_per_gpu_hour", None, "is needed for objective 'cost'")
    if num_gpus > MAX_SEARCH_GPUS:
        raise InputError("gpus", num_gpus, f"exceeds the search bound of {MAX_SEARCH_GPUS:,} "
                         f"GPUs (MAX_SEARCH_GPUS)")
    system = system.with_num_gpus(num_gpus)
    rules, space = search_space(model, system, workload, num_gpus, constraints, framework,
                                calibration)
    total = len(space)
    if total == 0:
        raise InputError("gpus", num_gpus, "no valid strategy under the search constraints")
    jobs = resolve_jobs(jobs, total)
    start = time.perf_counter()
    progress = observed(progress)  # and a watcher of this thread's (perfcast serve)
    if progress is not None:
        progress(0, total)
    tables = functools.partial(parallel_layer_tables, jobs=jobs)
    evaluator = BulkEvaluator.for_space(model, system, workload, space, kernel_backend,
                                        calibration, tables)
    scorer = BlockScorer(evaluator, objective, num_gpus, token_budget, price_per_gpu_hour or 0.0,
                         top)
    done = 0

    def advance(n: int) -> None:
        nonlocal done
        done += n
        if progress is not None:
            progress(done, total)

    summaries = parallel_map(lambda b: scorer(b, space.blocks[b]),
                             [len(block) for block in space.blocks], jobs, advance,
                             [len(block) + BLOCK_COST_STRATEGIES for block in space.blocks])
    feasible = sum(summary.feasible for summary in summaries)
    timed = sum(summary.timed for summary in summaries)
    memory_probed = sum(summary.memory_probed for summary in summaries)
    kept = [item for summary in summaries for item in summary.kept()]
    front = [item for summary in summaries for item in summary.front()]
    evaluate_s = time.perf_counter() - start

    kept.sort(key=lambda item: (-item.score, item.block, item.row))
    if front:
        xy = np.array([(item.tokens_per_s_per_gpu, item.headroom_bytes) for item in front])
        on_front = pareto_front(xy[:, 0], xy[:, 1])
        if len(on_front) > MAX_PARETO_POINTS:
            on_front = on_front[np.linspace(0, len(on_front) - 1, MAX_PARETO_POINTS).astype(int)]
        pareto = [(front[j].block, front[j].row) for j in on_front]
    else:
        pareto = []

    def candidate(b: int, i: int) -> SearchCandidate:
        # The block's options carry the split the framework needs (embedding/loss as layers,
        # a layout string: ``LayoutRules.split_groups``), as the bulk score ran it.
        strategy = space.blocks[b].strategy(int(i))
        report = estimate_training(model, system, strategy, workload,
                                   kernel_backend=kernel_backend, calibration=calibration)
        t = float(time_to_train_s(token_budget, report.tokens_per_s_per_gpu, num_gpus))
        cost = (None if price_per_gpu_hour is None
                else float(training_cost_usd(t, num_gpus, price_per_gpu_hour)))
        flags = rules.split_flags(model.num_hidden_layers, strategy.pp, strategy.vpp)
        return SearchCandidate(report=report, time_to_train_s=t, cost_usd=cost,
                               framework_flags=flags)

    def exact_score(c: SearchCandidate) -> float:
        return float(objective_score(objective, c.report.tokens_per_s_per_gpu, num_gpus,
                                     token_budget, price_per_gpu_hour or 0.0))

    def cost(b: int, i: int) -> int:
        block = space.blocks[b]
        strategy = block.strategy(int(i))
        return simulation_cost(strategy, workload.global_batch_size
                               // (strategy.micro_batch_size * strategy.dp))

    best = rescore_best(kept, top, candidate, exact_score, cost)
    return SearchResult(
        model=model.name, system=system.name, gpu=system.gpu.name, num_gpus=num_gpus,
        seq_length=workload.seq_length, global_batch_size=workload.global_batch_size,
        objective=objective.value, token_budget=token_budget, evaluated=total,
        feasible=feasible, invalid=space.invalid, framework=rules.framework,
        distinct=space.distinct_without_recompute_layers,
        recompute_layer_variants=space.recompute_layer_variants,
        offload_layer_variants=space.offload_layer_variants,
        recompute_module_variants=space.recompute_module_variants,
        fp8_scope_variants=space.fp8_scope_variants,
        timed=timed, memory_probed=memory_probed,
        best=best,
        pareto=tuple(candidate(b, i) for b, i in affordable(pareto, cost)), evaluate_s=evaluate_s,
    )


MAX_RESCORED_CANDIDATES = 64
"""Most bulk-ranked candidates forecast in full to settle the best (~4 ms each with a
closed-form schedule)."""
MAX_RESCORED_SIMULATION_COST = 2_000_000
"""Budget of the event simulations run to re-score zero-bubble / DualPipe candidates, in
units of pp² · micro-batches · chunks (the greedy simulation does O(pp) work per pass): about
5 s on one core (ZB-V at pp 64 with 64 micro-batches costs ~524,000 units, ~1-2 s)."""


def simulation_cost(strategy: Strategy, num_micro_batches: int) -> int:
    """Cost units of the event simulation a full forecast of ``strategy`` runs (0 for the
    closed-form schedules)."""
    if strategy.schedule in CLOSED_FORM_SCHEDULES or strategy.pp == 1:
        return 0
    return strategy.pp ** 2 * num_micro_batches * schedule_chunks(strategy.schedule, 1)


def rescore_best(kept: list[RankedRow], top: int,
                 candidate: Callable[[int, int], SearchCandidate],
                 exact_score: Callable[[SearchCandidate], float],
                 cost: Callable[[int, int], int]) -> tuple[SearchCandidate, ...]:
    """The ``top`` best of ``kept`` (sorted by bulk score, best first) by their full forecast.

    The bulk score is exact for GPipe / 1F1B / interleaved (the closed form that
    ``estimate_training`` also runs) and an upper bound for the zero-bubble and DualPipe
    schedules (``schedule.pipeline_bound.pipeline_work_bound_s``: their step is never shorter than
    it). So candidates are forecast in bulk order until ``top`` of them score at least the
    next one's bound (branch and bound: no later candidate can beat them), or
    ``MAX_RESCORED_CANDIDATES`` have been. A zero-bubble candidate whose simulation
    (``cost``) no longer fits ``MAX_RESCORED_SIMULATION_COST`` is skipped, not reported; it
    may be better than the reported ones (the pipeline bound is at most 7.4% (ZB-H1),
    16.6% (ZB-V) and 27.1% (DualPipe) below the simulation over the grid of
    ``tests/test_pipeline_bound.py``, exact for one micro-batch). The reported best are full
    forecasts, equal to ``perfcast train`` with the same flags."""
    scored: list[tuple[float, int, SearchCandidate]] = []
    budget = MAX_RESCORED_SIMULATION_COST
    for n, item in enumerate(kept):
        if n >= MAX_RESCORED_CANDIDATES:
            break
        if len(scored) >= top and item.score <= sorted(s for s, _, _ in scored)[-top]:
            break
        units = cost(item.block, item.row)
        if units > budget:
            continue
        budget -= units
        c = candidate(item.block, item.row)
        scored.append((exact_score(c), n, c))
    scored.sort(key=lambda e: (-e[0], e[1]))
    return tuple(c for _, _, c in scored[:top])


def affordable(rows: list[tuple[int, int]], cost: Callable[[int, int], int]
               ) -> list[tuple[int, int]]:
    """``rows`` (block, row) in order, skipping those whose event simulation no longer fits
    ``MAX_RESCORED_SIMULATION_COST`` (the Pareto points forecast in full: up to 50, each a
    simulation where its schedule is zero-bubble or DualPipe)."""
    budget, out = MAX_RESCORED_SIMULATION_COST, []
    for b, i in rows:
        units = cost(b, i)
        if units <= budget:
            budget -= units
            out.append((b, i))
    return out
