"""Kill a ``perfcast sweep --out`` subprocess with SIGKILL at random moments, resume it, and
check that nothing complete is lost or duplicated and the file is always readable (shared by
tests/test_sweep_kill.py, ~10 kills, and benchmarks/sweep_kill.py, >= 30 per format)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

SWEEP = ["sweep", "-m", "llama-3.2-1b", "--gpus", "1,2,4,8,16", "--systems",
         "dgx-h100,dgx-a100", "--gbs", "32", "--seq-length", "2048", "--max-cp", "1",
         "--vary", "peak_flops=0.5", "--json"]
"""20 small tasks (~0.3 s each)."""
TASKS = 20


@dataclass
class KillReport:
    kills: int = 0
    finished_before_kill: int = 0
    """Runs that ended on their own before the kill landed."""
    lost: int = 0
    """Complete rows seen after one kill and missing after a later one."""
    duplicated: int = 0
    unreadable: int = 0
    rows_seen: list[int] | None = None
    complete_rounds: int = 0
    """Runs that ended on their own with every task in the file once."""
    incomplete_finishes: int = 0
    """Runs that ended on their own without every task (must stay 0)."""


def _task_ids(path: Path) -> list[str]:
    from perfcast.search.sweep import read_rows

    return [row["task_id"] for row in read_rows(path)]


def _raw_csv_ids(path: Path) -> list[str]:
    if not path.exists():
        return []
    lines = path.read_text(encoding="utf-8").split("\n")[1:]
    return [line.split(",", 1)[0] for line in lines if line]


def _reset(out: Path) -> None:
    import shutil

    out.unlink(missing_ok=True)
    shutil.rmtree(out.with_name(out.name + ".parts"), ignore_errors=True)


def kill_and_resume(out: Path, kills: int, seed: int, max_delay_s: float = 3.0) -> KillReport:
    """SIGKILL the sweep at random delays (from 0.8 s: after the imports) until ``kills`` kills
    landed; after each run compare what is on disk with what was there before. A run that ends
    on its own must hold every task once; the file then starts over (a new round)."""
    rng = random.Random(seed)
    report, seen = KillReport(rows_seen=[]), set()
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    command = [sys.executable, "-m", "perfcast.cli.main", *SWEEP, "--out", str(out)]
    for _ in range(4 * kills):
        if report.kills >= kills:
            break
        proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                env=env)
        time.sleep(rng.uniform(0.8, max_delay_s))
        killed = proc.poll() is None
        if killed:
            proc.send_signal(signal.SIGKILL)
            report.kills += 1
        proc.wait()
        if out.suffix == ".csv":
            complete = [i for i in _raw_csv_ids(out) if i]
            report.duplicated += len(complete) - len(set(complete))
        try:
            ids = _task_ids(out)
        except Exception:  # noqa: BLE001 - the point of the test
            report.unreadable += 1
            continue
        report.duplicated += len(ids) - len(set(ids))
        report.lost += len(seen - set(ids))
        seen |= set(ids)
        report.rows_seen.append(len(ids))
        if not killed:
            report.finished_before_kill += 1
            assert proc.returncode == 0, proc.stderr.read()[-500:] if proc.stderr else ""
            report.complete_rounds += 1 if len(set(ids)) == TASKS else 0
            report.incomplete_finishes += 0 if len(set(ids)) == TASKS else 1
            _reset(out)
            seen = set()
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-500:]
    ids = _task_ids(out)
    report.duplicated += len(ids) - len(set(ids))
    report.lost += len(seen - set(ids))
    report.rows_seen.append(len(ids))
    report.complete_rounds += 1 if len(set(ids)) == TASKS else 0
    report.incomplete_finishes += 0 if len(set(ids)) == TASKS else 1
    return report
