"""Seconds to simulate one pipeline step, per schedule, on the largest shapes the estimator meets.

Run: PYTHONPATH=src python benchmarks/schedule_simulate_time.py
"""

from __future__ import annotations

import time

from perfcast.schedule.simulate import simulate_pipeline, simulated_step_time_s
from perfcast.schedule.timeline import PassTimes

CASES = [("1f1b", 64, 512, 1), ("interleaved", 35, 280, 3), ("interleaved", 16, 256, 4),
         ("zb-h1", 16, 256, 1), ("zb-v", 16, 256, 1), ("dualpipe", 16, 256, 1)]


def main() -> None:
    for schedule, p, m, v in CASES:
        times = [PassTimes(1.0, 1.2, 0.8)] * (p - 1) + [PassTimes(1.3, 1.6, 0.9)]
        t0 = time.perf_counter()
        simulated_step_time_s(schedule, times, m, v)
        step_only = time.perf_counter() - t0
        t0 = time.perf_counter()
        timeline = simulate_pipeline(schedule, times, m, v)
        full = time.perf_counter() - t0
        passes = 3 * m * p * (v if schedule == "interleaved" else 2 if schedule == "zb-v" else 1)
        print(f"{schedule:12s} p={p:3d} m={m:4d} v={v}  passes {passes:7d}  step only "
              f"{step_only * 1e3:7.1f} ms  timeline {full * 1e3:7.1f} ms  "
              f"bubble {timeline.bubble_fraction:.3f}")


if __name__ == "__main__":
    main()
