"""Spread a search's work over local processes: layer-table keys, then strategy blocks.

A search has two costly steps, both a list of independent items: the scalar layer times per
``LayerKey`` (``bulk.layer_rows``; most of a MoE search, whose keys multiply by ep and expert
tp) and the bulk evaluation per ``StrategyBlock``. ``parallel_map`` cuts such a list into
contiguous runs of about equal weight, hands them to worker processes
(``concurrent.futures.ProcessPoolExecutor``) and returns the results in item order, so a merge
over them is the single-process merge: the search's result is byte-identical whatever the
number of processes (``tests/test_search_parallel.py``).

Workers are forked (POSIX ``fork``): they inherit the space, the evaluator and the function to
run from the parent's memory, so nothing but the run's bounds and its results (arrays of a few
numbers per item) crosses a pipe. Where ``fork`` does not exist (Windows; macOS offers it but
Python defaults to ``spawn`` there, and we only use it where it is available) the search runs
in one process. numpy's element-wise work runs on one core per process (``cli.blas_threads``
keeps OpenBLAS at one thread), so N processes use N cores.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import TypeVar

import numpy as np

from perfcast.specs.limits import MAX_SEARCH_JOBS, check_positive

T = TypeVar("T")

PARALLEL_MIN_STRATEGIES = 500_000
"""Spaces at least this large use every core by default: ~0.4 s of one core at the bulk
evaluator's ~1.3 M strategies/s (benchmarks/search_speed.py), well above the ~20-50 ms it takes
to fork a worker and return its results."""
RUNS_PER_JOB = 4
"""Contiguous runs per worker: later runs go to the workers that finish first, which evens out
items of unequal cost (a block's cost is not exactly its size)."""

_WORK: Callable | None = None
"""The function the forked workers run on each item (set in the parent before the fork)."""


def available_cores() -> int:
    """CPU cores this process may run on (its affinity mask where the OS has one)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def can_fork() -> bool:
    """Whether this process may start workers that inherit its memory: the ``fork`` start
    method exists, the process is not itself daemonic (a Dask or multiprocessing worker,
    e.g. a ``perfcast sweep --engine dask`` point, may not have children), and the caller is
    the main thread: a fork from another thread copies only that thread, and locks other
    threads hold stay locked in the child (POSIX fork(2), "async-signal-safe" note) — the web
    explorer (``perfcast serve``) runs searches on server threads."""
    return ("fork" in multiprocessing.get_all_start_methods()
            and not multiprocessing.current_process().daemon
            and threading.current_thread() is threading.main_thread())


def resolve_jobs(requested: int | None, num_strategies: int) -> int:
    """Processes for a search of ``num_strategies``: ``requested`` when given (checked against
    ``MAX_SEARCH_JOBS``), else every available core when the space has at least
    ``PARALLEL_MIN_STRATEGIES`` strategies, else 1; always 1 without ``fork``."""
    if requested is not None:
        check_positive("jobs", requested, MAX_SEARCH_JOBS)
    if not can_fork():
        return 1
    if requested is not None:
        return requested
    return available_cores() if num_strategies >= PARALLEL_MIN_STRATEGIES else 1


def contiguous_runs(weights: Sequence[float], num_runs: int) -> list[range]:
    """Cut items with ``weights`` into at most ``num_runs`` non-empty contiguous ranges of
    about equal total weight, in order."""
    n = len(weights)
    if n == 0:
        return []
    num_runs = max(1, min(num_runs, n))
    cumulative = np.cumsum(np.maximum(np.asarray(weights, dtype=np.float64), 1.0))
    targets = cumulative[-1] * np.arange(1, num_runs) / num_runs
    cuts = np.unique(np.searchsorted(cumulative, targets, side="left") + 1)
    edges = [0] + [int(c) for c in cuts if 0 < c < n] + [n]
    return [range(a, b) for a, b in zip(edges[:-1], edges[1:], strict=True) if b > a]


def _run(items: range) -> list:
    """Worker: ``_WORK`` on each item of a run."""
    assert _WORK is not None, "parallel_map's work function is set before the fork"
    return [_WORK(i) for i in items]


def parallel_map(work: Callable[[int], T], weights: Sequence[int], jobs: int,
                 progress: Callable[[int], None] | None = None,
                 costs: Sequence[float] | None = None) -> list[T]:
    """``[work(i) for i in range(len(weights))]`` over ``jobs`` processes, in item order.

    ``progress(w)`` is called with the summed weight of each finished run (of each item when
    ``jobs`` is 1). ``costs`` (default: ``weights``) cut the runs: what an item costs to
    compute where that is not its weight in the progress count. ``work`` may be a closure:
    forked workers inherit it.
    """
    global _WORK
    if jobs <= 1 or len(weights) < 2 or not can_fork():
        out = []
        for i, weight in enumerate(weights):
            out.append(work(i))
            if progress is not None:
                progress(weight)
        return out
    runs = contiguous_runs(weights if costs is None else costs, jobs * RUNS_PER_JOB)
    _WORK = work
    try:
        with ProcessPoolExecutor(max_workers=min(jobs, len(runs)),
                                 mp_context=multiprocessing.get_context("fork")) as pool:
            futures = {pool.submit(_run, run): run for run in runs}
            for future in as_completed(futures):
                if progress is not None:
                    progress(int(sum(weights[i] for i in futures[future])))
            return [item for future in futures for item in future.result()]
    finally:
        _WORK = None


def parallel_layer_tables(model, system, space, seq_length: int, backend, calibration,
                          jobs: int = 1):
    """``bulk.layer_tables`` with the layer keys spread over ``jobs`` processes (same
    arguments; the per-key times do not depend on which process computes them)."""
    from perfcast.search.bulk import concat_layer_tables, layer_rows, stack_layer_rows

    runs = contiguous_runs([1] * len(space.layer_keys), jobs * RUNS_PER_JOB)
    # Each run's rows stacked as arrays where they are computed: a pipe carries arrays, not a
    # million small dataclasses, and the stacking runs on every core.
    parts = parallel_map(lambda r: stack_layer_rows([layer_rows(model, system, space, seq_length,
                                                                backend, calibration, runs[r])]),
                         [len(run) for run in runs], jobs if len(runs) > 1 else 1)
    return concat_layer_tables(parts)
