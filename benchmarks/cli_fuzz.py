"""Fuzz the ``perfcast`` CLI with thousands of random invocations (issue 22: >= 5,000).

    python benchmarks/cli_fuzz.py --count 5000 [--seed 0] [--limit-s 10] [--jobs 2] [--slowest 20]
                                  [--clock wall|cpu]

Every invocation runs in-process under a SIGALRM time limit and is judged by the contract in
tests/cli_fuzz.py (exit 0/2, no traceback, one-line errors, no NaN/inf/negative JSON numbers).
Prints counts by exit code and by problem signature, the argv of each problem, the distribution
of wall times (p50/p90/p99/max) and the slowest invocations; exits 1 if any invocation broke
the contract.
"""

from __future__ import annotations

import argparse
import collections
import multiprocessing
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))


def _run_share(job: tuple[int, int, float, str]) -> list[tuple]:
    seed, count, limit_s, clock = job
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hseed

    from cli_fuzz import command_lines, invoke

    outcomes = []

    @hseed(seed)
    @settings(max_examples=count, database=None, phases=[Phase.generate], deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(command_lines())
    def run(argv):
        o = invoke(argv, limit_s, clock=clock)
        outcomes.append((o.argv, o.exit_code, round(o.elapsed_s, 3), o.problem))

    run()
    return outcomes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--limit-s", type=float, default=10.0)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                        help="bound wall time (the issue-22 figure, on an idle machine) or this "
                             "process's CPU time (a machine shared with other work)")
    parser.add_argument("--slowest", type=int, default=10,
                        help="print this many slowest invocations")
    options = parser.parse_args()
    share = -(-options.count // options.jobs)
    jobs = [(options.seed + i, share, options.limit_s, options.clock) for i in range(options.jobs)]
    start = time.perf_counter()
    if options.jobs == 1:
        results = [_run_share(jobs[0])]
    else:
        with multiprocessing.get_context("fork").Pool(options.jobs) as pool:
            results = pool.map(_run_share, jobs)
    outcomes = [o for r in results for o in r]
    wall = time.perf_counter() - start
    codes = collections.Counter(o[1] for o in outcomes)
    problems = collections.Counter(o[3].split(":")[0] if o[3].startswith("traceback") else o[3]
                                   for o in outcomes if o[3])
    commands = collections.Counter(o[0][0] if o[0] else "" for o in outcomes)
    slowest = max(outcomes, key=lambda o: o[2])
    print(f"invocations: {len(outcomes)} in {wall:.0f} s (jobs {options.jobs}, seed {options.seed})")
    print("by command:", dict(sorted(commands.items())))
    print("by exit code:", {str(k): v for k, v in sorted(codes.items(), key=str)})
    print(f"slowest: {slowest[2]:.2f} s  {' '.join(slowest[0])}")
    times = sorted(o[2] for o in outcomes)
    print("wall s: p50 {:.2f}  p90 {:.2f}  p99 {:.2f}  max {:.2f}".format(
        *(times[min(len(times) - 1, int(q * len(times)))] for q in (0.5, 0.9, 0.99)), times[-1]))
    for o in sorted(outcomes, key=lambda o: -o[2])[:options.slowest]:
        print(f"  {o[2]:6.2f} s  exit {o[1]}  perfcast {' '.join(o[0])}")
    print(f"over {options.limit_s:g} s ({options.clock}): {sum(1 for o in outcomes if o[1] is None)}")
    print(f"contract broken: {sum(problems.values())}")
    for signature, n in problems.most_common():
        example = next(o for o in outcomes if o[3] and (o[3].startswith(signature)))
        print(f"  {n:5d}  {example[3][:160]}\n         perfcast {' '.join(example[0])}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
