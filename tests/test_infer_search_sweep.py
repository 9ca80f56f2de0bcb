"""``perfcast sweep --serving`` (issue 19 item 2): the best deployment per point is the one
``search_deployments`` finds there, rows are durable and resume, Dask gives the same rows, bad
input is a one-line exit 2."""

from __future__ import annotations

import json
import math
import shlex

import pytest
from typer.testing import CliRunner

from perfcast.catalog.models import load_model
from perfcast.catalog.systems import load_system
from perfcast.cli.main import app
from perfcast.search.sweep import run_sweep
from perfcast.serving_search import Targets, search_deployments
from perfcast.serving_search.sweep import (
    run_serving_task,
    serving_row_columns,
    serving_sweep_tasks,
)


def _tasks():
    return serving_sweep_tasks("llama3-8b", ["dgx-h100", "dgx-a100"], [2], 512, 128,
                               [None], [0.010, 0.0005], None, "vllm", False)


def _same(a: dict, b: dict) -> bool:
    return all((isinstance(a[k], float) and math.isnan(a[k]) and math.isnan(b[k]))
               or a[k] == b[k] for k in a)


def test_rows_are_the_search_results_and_resume_without_rerunning(tmp_path):
    out = tmp_path / "serving.csv"
    tasks = _tasks()
    rows = run_sweep(tasks, out, run=run_serving_task, columns=serving_row_columns())
    assert [r["task_id"] for r in rows] == [t.task_id for t in tasks]
    for row in rows:
        assert set(row) == set(serving_row_columns())
    h100 = search_deployments(load_model("llama3-8b"), load_system("dgx-h100"), 2, 512, 128,
                              targets=Targets(tpot_s=0.010), top=1)
    assert rows[0]["best_deployment"] == h100.best[0].deployment.label()
    assert rows[0]["best_output_tokens_per_s_per_gpu"] == h100.best[0].output_tokens_per_s_per_gpu
    assert rows[1]["best_deployment"] == "-" and math.isnan(rows[1]["best_tpot_s"])  # 0.5 ms

    def never(task):
        raise AssertionError(f"{task.task_id} ran again")

    again = run_sweep(tasks, out, run=never, columns=serving_row_columns())
    assert len(again) == len(rows)
    for a, b in zip(again, rows, strict=True):
        assert a["task_id"] == b["task_id"] and a["best_deployment"] == b["best_deployment"]
        assert a["best_ttft_s"] == pytest.approx(b["best_ttft_s"], rel=1e-12, nan_ok=True)


def test_dask_engine_equals_local():
    pytest.importorskip("dask.distributed")
    tasks = _tasks()[:2]
    local = run_sweep(tasks, run=run_serving_task, columns=serving_row_columns())
    dask = run_sweep(tasks, engine="dask", run=run_serving_task, columns=serving_row_columns())
    assert all(_same(a, b) for a, b in zip(local, dask, strict=True))


def test_cli_sweeps_targets_and_refuses_bad_input():
    result = CliRunner().invoke(app, shlex.split(
        "sweep --serving -m llama3-8b --gpus 2 --systems dgx-h100 --input-len 512 "
        "--output-len 128 --tpot-ms 20,10 --serving-engine trtllm --json"))
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)["rows"]
    assert [r["target_tpot_s"] for r in rows] == [0.020, 0.010]
    assert all(r["engine"] == "tensorrt-llm" and r["best_tpot_s"] <= r["target_tpot_s"]
               for r in rows)
    assert rows[0]["best_output_tokens_per_s_per_gpu"] >= rows[1]["best_output_tokens_per_s_per_gpu"]
    for args, field in (("--tpot-ms abc", "tpot_ms"), ("--tpot-ms -3", "tpot_ms"),
                        ("--serving-engine tgi", "serving_engine"), ("--plot plots", "plot"),
                        ("--gpus 99999", "gpus")):
        bad = CliRunner().invoke(app, shlex.split(
            f"sweep --serving -m llama3-8b --gpus 2 {args}"))
        lines = bad.output.strip().splitlines()
        assert bad.exit_code == 2 and len(lines) == 1 and field in lines[0], bad.output
