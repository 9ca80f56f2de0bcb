"""Kill ``perfcast sweep --out`` with SIGKILL at random points, many times (issue 22: >= 30
kills, CSV and Parquet), and report what was lost, duplicated or unreadable.

    python benchmarks/sweep_kill.py --kills 30 [--seed 0] [--max-delay-s 3]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))


def main() -> int:
    from sweep_kill import kill_and_resume

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=30)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-delay-s", type=float, default=3.0)
    options = parser.parse_args()
    bad = 0
    for suffix in (".csv", ".parquet"):
        with tempfile.TemporaryDirectory() as folder:
            start = time.perf_counter()
            r = kill_and_resume(Path(folder) / f"sweep{suffix}", options.kills, options.seed,
                                options.max_delay_s)
            print(f"{suffix}: {r.kills} kills ({r.finished_before_kill} runs ended first) in "
                  f"{time.perf_counter() - start:.0f} s; lost {r.lost}, duplicated "
                  f"{r.duplicated}, unreadable {r.unreadable}; complete rounds {r.complete_rounds}, "
                  f"incomplete finishes {r.incomplete_finishes}; rows after each run "
                  f"{r.rows_seen}")
            bad += r.lost + r.duplicated + r.unreadable + r.incomplete_finishes
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
