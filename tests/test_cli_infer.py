"""``perfcast infer`` and ``perfcast validate`` on the inference schema, from the command line."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from perfcast.cli.main import app

from conftest import shared_path

runner = CliRunner()


def test_infer_json_keys():
    result = runner.invoke(app, ["infer", "--model", "llama-3.1-70b", "--system", "dgx-h100",
                                 "--tp", "4", "--batch-size", "16", "--input-len", "1024",
                                 "--output-len", "256", "--precision", "fp8",
                                 "--kv-precision", "fp8", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    for key in ("ttft_s", "tpot_s", "e2e_latency_s", "output_tokens_per_s",
                "output_tokens_per_s_per_gpu", "max_batch_size", "memory",
                "prefill_breakdown_s", "decode_step_breakdown_s"):
        assert key in data
    assert sum(data["decode_step_breakdown_s"].values()) == pytest.approx(data["tpot_s"])
    assert data["precision"] == {"weights": "fp8", "activations": "fp8", "kv_cache": "fp8"}


def test_infer_text_report():
    result = runner.invoke(app, ["infer", "--model", "llama3-8b", "--weight-precision", "int4",
                                 "--batching", "continuous", "--batch-size", "32"])
    assert result.exit_code == 0, result.output
    assert "TPOT" in result.stdout and "max batch" in result.stdout


def test_infer_curve_and_plot(tmp_path):
    plot = tmp_path / "curve.png"
    result = runner.invoke(app, ["infer", "--model", "llama3-8b", "--plot", str(plot), "--json"])
    assert result.exit_code == 0, result.output
    points = json.loads(result.stdout)["points"]
    assert [p["batch_size"] for p in points][:3] == [1, 2, 4]
    assert points[-1]["output_tokens_per_s_per_gpu"] > points[0]["output_tokens_per_s_per_gpu"]
    assert plot.stat().st_size > 1000


@pytest.mark.parametrize("args", [
    ["--tp", "3"],                       # 32 heads not divisible by 3
    ["--precision", "fp8", "--system", "dgx-a100"],  # no FP8 on A100
    ["--batch-size", "0"],
    ["--offload-weights", "1.5"],
])
def test_infer_bad_input_exit_2(args):
    result = runner.invoke(app, ["infer", "--model", "llama3-8b", *args])
    assert result.exit_code == 2, result.output
    assert len(result.stderr.strip().splitlines()) == 1


def test_validate_inference_json_shape():
    path = shared_path("ground_truth", "inference.csv")
    result = runner.invoke(app, ["validate", "--data", str(path), "--json"])
    assert result.exit_code == 0, result.output[-2000:]
    data = json.loads(result.stdout)
    assert data["schema"] == "inference"
    row = data["rows"][0]
    assert {"row_id", "predicted", "measured", "error", "metric", "unit"} <= set(row)
    assert "by_source" in data["summary"] and "by_metric" in data["summary"]
