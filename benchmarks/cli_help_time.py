"""Print how long ``perfcast --help`` takes (target: under 0.5 s) and which heavy modules load.

    python benchmarks/cli_help_time.py
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

HEAVY = ("matplotlib", "pandas", "dask", "torch")


def main(repeats: int = 5) -> None:
    timings = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "perfcast.cli.main", "--help"], check=True,
                       capture_output=True)
        timings.append(time.perf_counter() - start)
    probe = ("import sys, perfcast.cli.main as m\n"
             f"print([h for h in {HEAVY!r} if h in sys.modules])")
    loaded = subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True,
                            text=True).stdout.strip()
    print(f"perfcast_help_s_median: {statistics.median(timings):.3f}")
    print(f"perfcast_help_s_min: {min(timings):.3f}")
    print(f"heavy_modules_loaded: {loaded}")


if __name__ == "__main__":
    main()
