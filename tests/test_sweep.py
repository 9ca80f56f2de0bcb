"""perfcast sweep: engines agree, resume skips finished tasks, Dask is optional."""

from __future__ import annotations

import json
import sys

import pytest
from typer.testing import CliRunner

from perfcast.cli.main import app
from perfcast.search import sweep as sweep_mod
from perfcast.search.space import SearchConstraints
from perfcast.search.sweep import run_sweep, scaled_system, sweep_tasks

SMALL = SearchConstraints(max_cp=1, max_vpp=1, max_micro_batch_size=2, fp8=False,
                          recompute=("none", "selective"))


def _tasks():
    # 2 and 4 GPUs (searches of a few seconds; 8 and 16 took ~4x longer): what the tests below
    # check (task ids, engines giving equal rows, resume) does not depend on the GPU count.
    return sweep_tasks("llama-3.2-1b", ["dgx-h100", "dgx-a100"], [2, 4], 32, 2048, "strong",
                       {"hbm_bandwidth": [0.5, 1.0]}, SMALL)


def test_tasks_cover_systems_gpus_and_factors():
    tasks = _tasks()
    assert len(tasks) == 2 * 2 * 2  # systems x GPU counts x (base, 0.5)
    assert len({t.task_id for t in tasks}) == len(tasks)
    weak = sweep_tasks("llama-3.2-1b", ["dgx-h100"], [8, 32], 16, 2048, "weak")
    assert [t.global_batch_size for t in weak] == [16, 64]


def test_scaled_system_scales_one_parameter():
    from perfcast.catalog.systems import load_system

    system = load_system("dgx-h100")
    faster = scaled_system(system, "peak_flops", 2.0)
    assert faster.gpu.peak_bf16_flops == 2 * system.gpu.peak_bf16_flops
    assert faster.gpu.hbm_bandwidth_Bps == system.gpu.hbm_bandwidth_Bps
    assert scaled_system(system, "scale_out_bandwidth", 0.5).scale_out_bandwidth_Bps == (
        0.5 * system.scale_out_bandwidth_Bps)


def test_dask_engine_equals_local(tmp_path):
    pytest.importorskip("dask.distributed")
    tasks = _tasks()[:3]
    local = run_sweep(tasks, engine="local")
    dask = run_sweep(tasks, engine="dask")  # in-process LocalCluster (threads)
    assert dask == local


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_resume_skips_finished_tasks(tmp_path, monkeypatch, suffix):
    if suffix == ".parquet":
        pytest.importorskip("pyarrow")
    out = tmp_path / f"sweep{suffix}"
    tasks = _tasks()[:3]
    first = run_sweep(tasks[:2], out)
    calls = []
    real = sweep_mod.run_task
    monkeypatch.setattr(sweep_mod, "run_task", lambda t: calls.append(t.task_id) or real(t))
    rows = run_sweep(tasks, out)
    assert calls == [tasks[2].task_id]
    assert [r["task_id"] for r in rows] == [t.task_id for t in tasks]
    assert rows[0]["tokens_per_s_per_gpu"] == pytest.approx(first[0]["tokens_per_s_per_gpu"])


def test_sweep_without_dask_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "dask.distributed", None)
    result = CliRunner().invoke(app, ["sweep", "--model", "llama-3.2-1b", "--gpus", "8",
                                      "--engine", "dask", "--json"])
    assert result.exit_code == 2
    assert "pip install 'perfcast[dask]'" in result.output


def test_sweep_cli_json_and_plots(tmp_path):
    pytest.importorskip("matplotlib")
    result = CliRunner().invoke(app, [
        "sweep", "--model", "llama-3.2-1b", "--gpus", "2,4", "--systems", "dgx-h100",
        "--global-batch-size", "32", "--seq-length", "2048", "--max-cp", "1",
        "--vary", "peak_flops=0.5,2", "--out", str(tmp_path / "s.csv"),
        "--plot", str(tmp_path / "plots"), "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert len(out["rows"]) == 2 * 3
    assert {p.rsplit("/", 1)[1] for p in out["plots"]} == {
        "throughput_vs_gpus.png", "time_breakdown.png", "sensitivity.png"}
    assert (tmp_path / "s.csv").exists()


def test_sweep_kernel_backend_reaches_the_search():
    """Each task searches with its kernel backend: the row equals a direct search with it, the
    backend is in the row and the task id (so a resumed file never mixes backends)."""
    from perfcast.catalog.models import load_model
    from perfcast.catalog.systems import load_system
    from perfcast.search.run import search_strategies
    from perfcast.specs.workload import Workload

    tasks = {name: sweep_tasks("llama-3.2-1b", ["dgx-h100"], [8], 32, 2048,
                               constraints=SMALL, kernel_backend=name)[0]
             for name in ("roofline", "analytical")}
    assert tasks["roofline"].task_id != tasks["analytical"].task_id
    for name, task in tasks.items():
        row = sweep_mod.run_task(task)
        direct = search_strategies(load_model("llama-3.2-1b"), load_system("dgx-h100", num_gpus=8),
                                   Workload(seq_length=2048, global_batch_size=32), 8, SMALL,
                                   top=1, kernel_backend=name).best[0]
        assert row["kernel_backend"] == name
        assert row["tokens_per_s_per_gpu"] == pytest.approx(direct.to_dict()["tokens_per_s_per_gpu"])
    rows = [sweep_mod.run_task(t) for t in tasks.values()]
    assert rows[0]["tokens_per_s_per_gpu"] != rows[1]["tokens_per_s_per_gpu"]


def test_sweep_cli_kernel_backend():
    result = CliRunner().invoke(app, [
        "sweep", "--model", "llama-3.2-1b", "--gpus", "8", "--global-batch-size", "32",
        "--seq-length", "2048", "--max-cp", "1", "--kernel-backend", "roofline", "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)["rows"]
    assert [r["kernel_backend"] for r in rows] == ["roofline"]


@pytest.mark.parametrize("args", [["--gpus", "8,x"], ["--gpus", "8", "--vary", "warp=2"],
                                  ["--gpus", "8", "--out", "x.txt"]])
def test_sweep_bad_input_exits_2(args):
    result = CliRunner().invoke(app, ["sweep", "--model", "llama-3.2-1b", *args, "--json"])
    assert result.exit_code == 2
    assert "error:" in result.output
