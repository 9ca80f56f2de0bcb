"""A sweep killed with SIGKILL at random points (CSV and Parquet) loses no complete row,
duplicates none, and its file stays readable; the finished sweep holds every task once."""

from __future__ import annotations

import pytest

from perfcast.errors import InputError
from perfcast.search import sweep as sweep_mod
from perfcast.search.sweep import read_rows, run_sweep, sweep_tasks
from sweep_kill import kill_and_resume

TASKS = 20


def test_sweep_tasks_are_twenty():
    tasks = sweep_tasks("llama-3.2-1b", ["dgx-h100", "dgx-a100"], [1, 2, 4, 8, 16], 32, 2048,
                        vary={"peak_flops": [0.5]})
    assert len(tasks) == TASKS


@pytest.mark.parametrize("suffix,seed", [(".csv", 1), (".parquet", 2)])
def test_killed_sweep_loses_and_duplicates_nothing(tmp_path, suffix, seed):
    report = kill_and_resume(tmp_path / f"sweep{suffix}", kills=5, seed=seed, max_delay_s=2.5)
    assert report.kills == 5
    assert report.unreadable == 0
    assert report.lost == 0
    assert report.duplicated == 0
    assert report.incomplete_finishes == 0
    assert report.complete_rounds >= 1
    assert report.rows_seen[-1] == TASKS


def _small_tasks():
    # 1 and 2 GPUs: two distinct tasks whose searches take ~0.3 s and ~2 s (8 and 16 GPUs took
    # ~16 s each); the tests below check the file handling, which does not depend on the size.
    return sweep_tasks("llama-3.2-1b", ["dgx-h100"], [1, 2], 32, 2048)


def test_cut_off_csv_row_is_recomputed(tmp_path):
    out = tmp_path / "sweep.csv"
    tasks = _small_tasks()
    first = run_sweep(tasks[:1], out)
    text = out.read_text()
    with open(out, "a") as handle:  # the second row, cut off mid-write
        handle.write(tasks[1].task_id + ",llama-3.2-1b,dgx-h1")
    rows = run_sweep(tasks, out)
    assert [r["task_id"] for r in rows] == [t.task_id for t in tasks]
    assert rows[0]["tokens_per_s_per_gpu"] == pytest.approx(first[0]["tokens_per_s_per_gpu"])
    assert rows[1]["tokens_per_s_per_gpu"] > 0
    assert out.read_text().startswith(text)  # the finished row was not rewritten
    assert len(out.read_text().splitlines()) == 3


def test_corrupt_parquet_is_not_fatal(tmp_path):
    out = tmp_path / "sweep.parquet"
    out.write_bytes(b"PAR1 cut off")
    rows = run_sweep(_small_tasks(), out)
    assert len(read_rows(out)) == len(rows) == 2
    assert not out.with_name("sweep.parquet.parts").exists()


def test_duplicate_tasks_run_once(tmp_path, monkeypatch):
    calls = []
    real = sweep_mod.run_task
    monkeypatch.setattr(sweep_mod, "run_task", lambda t: calls.append(t.task_id) or real(t))
    tasks = _small_tasks()
    rows = run_sweep([tasks[0], tasks[0], tasks[1]], tmp_path / "sweep.csv")
    assert len(calls) == len(rows) == 2


def test_csv_of_another_layout_is_refused(tmp_path):
    out = tmp_path / "sweep.csv"
    out.write_text("a,b\n1,2\n")
    with pytest.raises(InputError, match="different sweep layout"):
        run_sweep(_small_tasks(), out)


def test_dask_without_live_workers_gives_up_with_one_line(monkeypatch):
    class NoWorkers:
        def scheduler_info(self, n_workers=-1):
            return {"workers": {}}

    def never(futures, timeout, return_when):
        raise TimeoutError

    monkeypatch.setattr(sweep_mod, "DASK_NO_WORKER_TIMEOUT_S", 0.05)
    with pytest.raises(InputError, match="no live Dask worker for 0.05 s; 2 tasks not run"):
        sweep_mod._collect(NoWorkers(), ["f1", "f2"], lambda row: None, never, poll_s=0.01)


def test_dask_unreachable_scheduler_is_one_line(monkeypatch):
    pytest.importorskip("dask.distributed")
    monkeypatch.setattr(sweep_mod, "DASK_CONNECT_TIMEOUT_S", 1.0)
    with pytest.raises(InputError, match="no Dask scheduler answered within 1 s"):
        run_sweep(_small_tasks()[:1], engine="dask", scheduler="tcp://127.0.0.1:1")
