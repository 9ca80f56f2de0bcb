"""Warm-up requests left out of the latency statistics (``ServingWorkload.warmup_requests``)
and the rows whose statistic is not stated (``validate.serving_rows.statistic_unstated``)."""

from __future__ import annotations

import csv

import numpy as np
import pytest
from pydantic import ValidationError

from perfcast.catalog.models import load_model
from perfcast.catalog.systems import load_system
from perfcast.estimate.serving import estimate_serving, replica_workload
from perfcast.estimate.serving_report import run_statistics
from perfcast.estimate.serving_sim import SimulatedRun
from perfcast.specs.serving import ServingWorkload
from perfcast.specs.strategy import Strategy
from perfcast.validate.catalog_lookup import default_catalog
from perfcast.validate.serving_rows import parse_serving_row, row_statistic, statistic_unstated

from conftest import shared_path


def _run(ttft_s: list[float]) -> SimulatedRun:
    n = len(ttft_s)
    first = np.asarray(ttft_s)
    return SimulatedRun(
        arrival_s=np.zeros(n), first_token_s=first, finish_s=first + 1.0,
        input_len=np.full(n, 100), output_len=np.full(n, 11), gap_s=np.array([0.1]),
        gap_weight=np.array([10.0 * n]), num_steps=10)


def test_warmup_requests_leave_the_latencies_not_the_throughput():
    run = _run([4.0, 3.0, 1.0, 2.0])
    everything, steady = run_statistics(run), run_statistics(run, 2)
    assert everything.ttft.mean_s == pytest.approx(2.5)
    assert steady.ttft.mean_s == pytest.approx(1.5)
    assert steady.e2e_latency.mean_s == pytest.approx(2.5)
    assert steady.tpot.mean_s == pytest.approx(0.1)
    assert (steady.output_tokens, steady.num_requests, steady.duration_s) == \
        (everything.output_tokens, everything.num_requests, everything.duration_s)


def test_warmup_must_leave_requests_to_measure():
    with pytest.raises(ValidationError, match="warmup_requests=10"):
        ServingWorkload(mode="concurrency", concurrency=10, num_requests=10, warmup_requests=10)


def test_replicas_share_the_warmup():
    w = ServingWorkload(mode="concurrency", concurrency=8, num_requests=80, warmup_requests=8)
    assert replica_workload(w, 4).warmup_requests == 2


def test_start_up_burst_raises_the_mean_ttft_of_a_closed_loop():
    """All c prompts at t = 0 queue behind each other: leaving them out lowers the mean TTFT
    by at least c(c − 1)/(2N) prefill times of the burst (``statistic_unstated``)."""
    c, n = 32, 320
    model, system = load_model("llama-3.1-8b"), load_system("dgx-h100", num_gpus=1)

    def serve(warmup: int):
        w = ServingWorkload(mode="concurrency", concurrency=c, num_requests=n, input_len=4096,
                            output_len=256, warmup_requests=warmup)
        return estimate_serving(model, system, Strategy(num_gpus=1), w, engine="vllm")

    everything, steady = serve(0), serve(c)
    alone = estimate_serving(model, system, Strategy(num_gpus=1), ServingWorkload(
        mode="concurrency", concurrency=1, num_requests=2, input_len=4096, output_len=256),
        engine="vllm").ttft.mean_s
    floor = c * (c - 1) / (2 * n) * alone * 0.5  # batched prefills: at least half as fast
    assert everything.ttft.mean_s - steady.ttft.mean_s * (n - c) / n >= floor
    assert steady.output_tokens_per_s == everything.output_tokens_per_s


def _rows() -> dict[str, dict[str, str]]:
    with shared_path("ground_truth", "inference.csv").open(newline="", encoding="utf-8") as f:
        return {r["row_id"]: r for r in csv.DictReader(f)}


def test_rows_that_do_not_state_their_statistic_measure_the_steady_state():
    rows = _rows()
    unstated = [r for r in rows.values() if statistic_unstated(r["notes"])
                and r["batching"].startswith("continuous (fixed concurrency")]
    assert len(unstated) >= 20
    for row in unstated:
        case = parse_serving_row(row, default_catalog(), "x")
        c = case.workload.concurrency
        assert case.workload.warmup_requests == (c if c > 1 else 0)
        assert case.statistic == "mean" or case.quantity not in ("ttft", "tpot", "itl")
        assert row_statistic(row["notes"], "ttft") == "mean"


def test_rows_that_state_their_statistic_keep_every_request():
    rows = _rows()
    stated = [r for r in rows.values() if "median" in r["notes"].lower()
              and r["batching"].startswith("continuous (fixed concurrency")
              and r["metric"] == "ttft" and not statistic_unstated(r["notes"])]
    assert stated
    for row in stated[:10]:
        try:
            case = parse_serving_row(row, default_catalog(), "x")
        except ValueError:
            continue
        assert case.workload.warmup_requests == 0
