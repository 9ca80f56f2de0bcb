"""Poisson request-rate forecasts average independent arrival draws (``arrival_draws``): the
forecast is the expected statistic of one benchmark run (``RunStatistics.mean_of``)."""

from __future__ import annotations

from functools import cache

import pytest
from typer.testing import CliRunner

from perfcast.catalog.models import load_model
from perfcast.catalog.systems import load_system
from perfcast.cli.main import app
from perfcast.estimate.serving import estimate_serving
from perfcast.specs.serving import ServingWorkload
from perfcast.specs.strategy import Strategy


@cache
def _serve(mode: str, draws: int, seed: int = 0):
    workload = ServingWorkload(
        mode=mode, concurrency=16 if mode == "concurrency" else None,
        request_rate_per_s=12.0 if mode == "request_rate" else None, num_requests=200,
        input_len=1024, output_len=256, length_range_ratio=0.8, seed=seed, arrival_draws=draws)
    return estimate_serving(load_model("llama-3.1-8b"), load_system("dgx-h100", num_gpus=1),
                            Strategy(num_gpus=1), workload, engine="vllm")


def test_draws_are_the_mean_of_single_draw_runs_with_consecutive_seeds():
    pooled = _serve("request_rate", 3)
    single = [_serve("request_rate", 1, seed) for seed in range(3)]
    for name in ("ttft", "tpot", "itl", "e2e_latency"):
        for stat in ("mean_s", "median_s", "p90_s", "p99_s"):
            expected = sum(getattr(getattr(r, name), stat) for r in single) / 3
            assert getattr(getattr(pooled, name), stat) == pytest.approx(expected, rel=1e-12)
    assert pooled.output_tokens_per_s == pytest.approx(
        sum(r.output_tokens_per_s for r in single) / 3, rel=1e-12)


def test_one_draw_is_the_single_seeded_run_and_draws_differ():
    assert _serve("request_rate", 1).ttft == _serve("request_rate", 1, 0).ttft
    assert _serve("request_rate", 1, 0).ttft != _serve("request_rate", 1, 1).ttft


def test_closed_loop_concurrency_ignores_arrival_draws():
    assert _serve("concurrency", 5).ttft == _serve("concurrency", 1).ttft
    assert _serve("concurrency", 5).output_tokens_per_s == _serve("concurrency", 1).output_tokens_per_s


@pytest.mark.parametrize("value", ["0", "-3", "1001"])
def test_cli_rejects_a_bad_arrival_draw_count(value):
    result = CliRunner().invoke(app, ["infer", "-m", "llama-3.1-8b", "--gpus", "1",
                                      "--request-rate", "5", "--arrival-draws", value])
    assert result.exit_code == 2
    assert "arrival_draws" in result.output or "arrival-draws" in result.output
