"""``perfcast infer --concurrency / --request-rate / --offline`` and the fit verdict."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from perfcast.cli.main import app

runner = CliRunner()
LATENCIES = ("ttft_s", "tpot_s", "itl_s", "e2e_latency_s")


def _infer(*args: str):
    return runner.invoke(app, ["infer", "--model", "llama-3.1-70b", "--system", "dgx-h100",
                               "--tp", "8", *args])


def test_concurrency_json_keys():
    result = _infer("--concurrency", "64", "--input-len", "1024", "--output-len", "256",
                    "--num-requests", "300", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["fits"] is True
    for key in LATENCIES:
        assert isinstance(data[key], float) and data[key] > 0
        assert set(data["percentiles"][key]) == {"median", "p90", "p99"}
    for key in ("output_tokens_per_s", "output_tokens_per_s_per_gpu", "requests_per_s"):
        assert data[key] > 0
    assert data["output_tokens_per_s_per_gpu"] * 8 == data["output_tokens_per_s"]
    assert data["workload"]["num_requests"] == 300


def test_request_rate_and_offline_modes():
    rate = _infer("--request-rate", "2", "--num-requests", "100", "--json")
    offline = _infer("--offline", "--num-requests", "100", "--engine", "sglang", "--json")
    assert rate.exit_code == 0 and offline.exit_code == 0, rate.output + offline.output
    assert json.loads(rate.stdout)["workload"]["mode"] == "request_rate"
    assert json.loads(offline.stdout)["engine"] == "sglang"


def test_fits_line_comes_first():
    result = _infer("--concurrency", "8", "--num-requests", "50")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[0].startswith("fits")
    static = runner.invoke(app, ["infer", "--model", "llama-3.1-405b", "--system", "dgx-h100"])
    assert static.exit_code == 0
    assert static.stdout.splitlines()[0].startswith("does NOT fit")


def test_405b_on_one_h100_says_does_not_fit():
    result = runner.invoke(app, ["infer", "--model", "llama-3.1-405b", "--system", "dgx-h100",
                                 "--concurrency", "4", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["fits"] is False and data["max_concurrent_seqs"] == 0


def test_two_modes_is_a_one_line_error():
    result = _infer("--concurrency", "4", "--offline")
    assert result.exit_code == 2
    assert "--offline" in result.output and "Traceback" not in result.output


def test_bad_range_ratio_is_a_one_line_error():
    result = _infer("--concurrency", "4", "--length-range-ratio", "1.5")
    assert result.exit_code == 2
    assert "length_range_ratio" in result.output and "Traceback" not in result.output


def test_pipeline_parallel_serving_runs():
    result = _infer("--tp", "4", "--pp", "2", "--concurrency", "16", "--num-requests", "64",
                    "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["tpot_s"] > 0


def test_warmup_requests_leave_the_start_up_burst_out():
    args = ("--concurrency", "32", "--num-requests", "320", "--input-len", "4096", "--json")
    everything = json.loads(_infer(*args).stdout)
    steady = json.loads(_infer(*args, "--warmup-requests", "32").stdout)
    assert steady["workload"]["warmup_requests"] == 32
    assert steady["ttft_s"] < everything["ttft_s"]
    assert steady["output_tokens_per_s"] == everything["output_tokens_per_s"]


def test_warmup_of_every_request_is_a_one_line_error():
    result = _infer("--concurrency", "8", "--num-requests", "8", "--warmup-requests", "8")
    assert result.exit_code == 2
    assert "warmup_requests=8" in result.output and "Traceback" not in result.output
