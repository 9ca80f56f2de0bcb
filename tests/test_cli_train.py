"""``perfcast train`` and ``perfcast validate`` from the command line."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from perfcast.cli.main import app

from conftest import shared_path

runner = CliRunner()


def test_train_json_keys():
    result = runner.invoke(app, ["train", "--model", "llama3-8b", "--system", "dgx-h100",
                                 "--gpus", "16", "--tp", "2", "--pp", "2", "--vpp", "2",
                                 "--seq-length", "4096", "--global-batch-size", "32", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    for key in ("step_time_s", "tokens_per_s_per_gpu", "tflops_per_gpu", "mfu", "breakdown_s",
                "memory"):
        assert key in data
    assert sum(data["breakdown_s"].values()) == pytest.approx(data["step_time_s"], rel=1e-9)
    assert data["strategy"]["pipeline_schedule"] == "interleaved"
    assert "stages" in data["memory"]


def test_train_pipeline_schedule_flag():
    base = ["train", "--model", "llama3-8b", "--gpus", "8", "--pp", "4", "--json"]
    gpipe = json.loads(runner.invoke(app, base + ["--pipeline-schedule", "gpipe"]).stdout)
    assert gpipe["strategy"]["pipeline_schedule"] == "gpipe"


def test_train_bad_input_exit_2():
    result = runner.invoke(app, ["train", "--model", "llama3-8b", "--gpus", "8", "--tp", "16"])
    assert result.exit_code == 2
    assert len(result.stderr.strip().splitlines()) == 1


def test_validate_json_shape():
    path = shared_path("ground_truth", "training.csv")
    result = runner.invoke(app, ["validate", "--data", str(path), "--quality", "A", "--json"])
    assert result.exit_code == 0, result.output[-2000:]
    data = json.loads(result.stdout)
    assert {"rows", "skipped", "summary"} <= set(data)
    row = data["rows"][0]
    assert {"row_id", "predicted", "measured", "error"} <= set(row)
