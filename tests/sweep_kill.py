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


def _task_ids(path: Path) -> list[str]:
    from perfcast.search.sweep import read_rows

    return [row["task_id"] for row in read_rows(path)]


def _raw_csv_ids(path: Path) -> list[str]:
    if not path.exists():
        return []
    lines = path.read_text(encoding="utf-8").split("\n")[1:]
    return [line.split(",", 1)[0] for line in lines if line]


def kill_and_resume(out: Path, kills: int, seed: int, max_delay_s: float = 3.0) -> KillReport:
    """SIGKILL the sweep ``kills`` times at random delays (from 0.8 s: after the imports), then
    let it finish; compare what is on disk after each kill with what was there before."""
    rng = random.Random(seed)
    report, seen = KillReport(rows_seen=[]), set()
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    for _ in range(kills):
        proc = subprocess.Popen([sys.executable, "-m", "perfcast.cli.main", *SWEEP, "--out",
                                 str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                env=env)
        time.sleep(rng.uniform(0.8, max_delay_s))
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            report.kills += 1
        else:
            report.finished_before_kill += 1
        proc.wait()
        if out.suffix == ".csv":
            raw = _raw_csv_ids(out)
            complete = [i for i in raw if i]
            report.duplicated += len(complete) - len(set(complete)) if out.exists() else 0
        try:
            ids = _task_ids(out)
        except Exception:  # noqa: BLE001 - the point of the test
            report.unreadable += 1
            continue
        report.duplicated += len(ids) - len(set(ids))
        report.lost += len(seen - set(ids))
        seen |= set(ids)
        report.rows_seen.append(len(ids))
    done = subprocess.run([sys.executable, "-m", "perfcast.cli.main", *SWEEP, "--out", str(out)],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-500:]
    ids = _task_ids(out)
    report.duplicated += len(ids) - len(set(ids))
    report.lost += len(seen - set(ids))
    report.rows_seen.append(len(ids))
    return report
