"""A search spread over processes returns exactly what the single-process search returns."""

from __future__ import annotations

import json
from dataclasses import fields

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from perfcast.calibration.bundle import load_calibration
from perfcast.catalog.models import load_model
from perfcast.catalog.systems import load_system
from perfcast.cli.main import app
from perfcast.errors import InputError
from perfcast.kernels.backend import get_backend
from perfcast.report.json_out import to_json
from perfcast.search.bulk import layer_tables
from perfcast.search.parallel import (
    PARALLEL_MIN_STRATEGIES,
    available_cores,
    can_fork,
    contiguous_runs,
    parallel_layer_tables,
    parallel_map,
    resolve_jobs,
)
from perfcast.search.pins import Pin
from perfcast.search.run import search_space, search_strategies
from perfcast.search.space import SearchConstraints
from perfcast.specs import Workload

needs_fork = pytest.mark.skipif(not can_fork(), reason="no fork start method")

CASES = [
    ("llama-3.1-70b", 64, Workload(seq_length=4096, global_batch_size=128),
     SearchConstraints(max_micro_batch_size=2, max_vpp=4)),
    ("mixtral-8x7b", 16, Workload(seq_length=4096, global_batch_size=64),
     SearchConstraints(max_micro_batch_size=2, max_cp=2, max_vpp=2)),
]


def _search_json(name, gpus, workload, constraints, jobs):
    model, system = load_model(name), load_system("dgx-h100", num_gpus=gpus)
    calls = []
    result = search_strategies(model, system, workload, gpus, constraints=constraints, top=7,
                               jobs=jobs, progress=lambda done, total: calls.append(done))
    return to_json(result.to_dict()), calls, result.evaluated


@needs_fork
@pytest.mark.parametrize("name, gpus, workload, constraints", CASES)
def test_parallel_search_is_byte_identical(name, gpus, workload, constraints):
    one, calls_one, total = _search_json(name, gpus, workload, constraints, 1)
    for jobs in (2, 3):
        many, calls, _ = _search_json(name, gpus, workload, constraints, jobs)
        assert many == one
        assert calls[0] == 0 and calls[-1] == total and calls == sorted(calls)
    assert calls_one[-1] == total
    assert len(json.loads(one)["best"]) == 7


@needs_fork
def test_parallel_layer_tables_equal_single_process():
    model, system = load_model("mixtral-8x7b"), load_system("dgx-h100", num_gpus=16)
    workload = Workload(seq_length=4096, global_batch_size=64)
    _, space = search_space(model, system, workload, 16,
                            SearchConstraints(max_micro_batch_size=2, max_cp=2, max_vpp=1,
                                              fixed=(Pin(key="cuda_graphs", value="none"),)))
    calibration = load_calibration()
    backend = calibration.with_kernels(get_backend("analytical"))
    one = layer_tables(model, system, space, 4096, backend, calibration)
    many = parallel_layer_tables(model, system, space, 4096, backend, calibration, jobs=2)
    for name in ("dense", "moe"):
        for f in fields(getattr(one, name)):
            a, b = getattr(getattr(one, name), f.name), getattr(getattr(many, name), f.name)
            assert a.shape == (len(space.layer_keys),)
            assert a.tobytes() == b.tobytes(), f.name
    assert one.extra.keys() == many.extra.keys()


def test_cli_jobs_flag_same_json_and_bad_value_exit_2():
    runner = CliRunner()
    base = ["search", "-m", "llama-3-8b", "-g", "16", "--gbs", "64", "--max-vpp", "2",
            "--max-micro-batch-size", "2", "--json"]
    one = runner.invoke(app, [*base, "--jobs", "1"])
    two = runner.invoke(app, [*base, "--jobs", "2"])
    assert one.exit_code == 0 and two.exit_code == 0, one.output + two.output
    assert one.output == two.output
    for bad, message in (("0", "jobs=0: must be > 0"), ("5000", "jobs=5000: exceeds "
                                                           "MAX_SEARCH_JOBS=1,024")):
        out = runner.invoke(app, [*base, "--jobs", bad])
        assert out.exit_code == 2
        assert out.output.strip().count("\n") == 0 and message in out.output, out.output


@settings(max_examples=60, deadline=None)
@given(weights=st.lists(st.integers(0, 1000), max_size=60), runs=st.integers(1, 20))
def test_contiguous_runs_cover_every_item_once_in_order(weights, runs):
    cut = contiguous_runs(weights, runs)
    assert [i for r in cut for i in r] == list(range(len(weights)))
    assert all(len(r) > 0 for r in cut)
    assert len(cut) <= max(1, min(runs, len(weights))) or not weights


def test_contiguous_runs_balance_equal_weights():
    assert [len(r) for r in contiguous_runs([1] * 100, 4)] == [25, 25, 25, 25]


@needs_fork
def test_parallel_map_keeps_item_order_and_reports_all_weight():
    seen = []
    out = parallel_map(lambda i: i * i, list(range(1, 41)), 2, seen.append)
    assert out == [i * i for i in range(40)]
    assert sum(seen) == sum(range(1, 41))


def test_default_jobs_use_every_core_only_for_large_spaces():
    assert resolve_jobs(None, PARALLEL_MIN_STRATEGIES - 1) == 1
    expected = available_cores() if can_fork() else 1
    assert resolve_jobs(None, PARALLEL_MIN_STRATEGIES) == expected
    assert resolve_jobs(3, 10) == (3 if can_fork() else 1)
    with pytest.raises(InputError, match="MAX_SEARCH_JOBS"):
        resolve_jobs(100_000, 10)
    with pytest.raises(InputError, match="jobs"):
        resolve_jobs(0, 10)


def test_worker_error_reaches_the_caller():
    def work(i):
        if i == 5:
            raise InputError("item", i, "fails")
        return i

    with pytest.raises(InputError, match="item=5"):
        parallel_map(work, [1] * 10, 2)
    assert np.array_equal(parallel_map(lambda i: i, [1] * 3, 1), [0, 1, 2])


def _jobs_in_daemon(queue):
    queue.put((can_fork(), resolve_jobs(None, PARALLEL_MIN_STRATEGIES), resolve_jobs(4, 10)))


@needs_fork
def test_a_daemonic_worker_searches_in_one_process():
    import multiprocessing

    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    worker = context.Process(target=_jobs_in_daemon, args=(queue,), daemon=True)
    worker.start()
    assert queue.get(timeout=60) == (False, 1, 1)
    worker.join(timeout=60)


@needs_fork
def test_a_search_on_a_server_thread_runs_in_one_process():
    """``perfcast serve`` runs commands on server threads: forking there could copy locks other
    threads hold, so such a search stays in its own process."""
    import threading

    seen = []
    thread = threading.Thread(target=lambda: seen.append(
        (can_fork(), resolve_jobs(None, PARALLEL_MIN_STRATEGIES), resolve_jobs(4, 10))))
    thread.start()
    thread.join(timeout=60)
    assert seen == [(False, 1, 1)]
    assert can_fork()


def test_parallel_map_cuts_runs_by_cost_and_counts_progress_by_weight():
    """``costs`` (``run.BLOCK_COST_STRATEGIES`` added to each block's size) cut the runs; the
    results stay in item order and the progress still adds up the weights."""
    weights = [1, 1, 1, 1, 1000, 1000]
    seen = []
    out = parallel_map(lambda i: i * i, weights, 2, seen.append,
                       costs=[w + 500 for w in weights])
    assert out == [i * i for i in range(len(weights))]
    assert sum(seen) == sum(weights)
    # by size alone the four small items form one run; with the fixed cost they split
    assert len(contiguous_runs(weights, 4)) < len(contiguous_runs([w + 500 for w in weights], 4))
