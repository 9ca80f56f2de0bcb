"""Print the CPU and wall seconds of ``perfcast train`` as a whole process (target: 0.3 s) and
the slowest imports of one run (``python -X importtime``).

CPU seconds (user + system of the child) are the figure to compare on a shared machine; wall
seconds also count waiting for a core. The first run fills the parsed-YAML cache
(``perfcast.yaml_load``); the figures are of the later runs. Where PYTHONDONTWRITEBYTECODE is set
and no ``__pycache__`` exists (an editable install here), every run compiles perfcast's ~115
modules from source (~0.07 s); the script prints whether bytecode writing is on.
A regular install (``pip install .``, the README's first command) has pip compile the bytecode
at install time, so no run compiles: 2026-11-24 on this 2-core machine, 0.270 s CPU median with
``pip install .`` vs 0.320 s with an editable install under PYTHONDONTWRITEBYTECODE.

    python benchmarks/train_process_time.py [ARGS...]   (default: -m llama-3-8b -g 8 --json)
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time

DEFAULT_ARGS = ["-m", "llama-3-8b", "-g", "8", "--json"]


def _run(args: list[str], importtime: bool = False) -> tuple[float, float, str]:
    """(cpu_s, wall_s, stderr) of one ``perfcast train`` process."""
    before = os.times()
    start = time.perf_counter()
    flags = ["-X", "importtime"] if importtime else []
    done = subprocess.run([sys.executable, *flags, "-m", "perfcast.cli.main", "train", *args],
                          check=True, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = os.times()
    cpu = (after.children_user - before.children_user) + (
        after.children_system - before.children_system)
    return cpu, wall, done.stderr


def main(args: list[str], repeats: int = 7) -> None:
    _run(args)  # fills the YAML cache
    runs = [_run(args) for _ in range(repeats)]
    cpu, wall = [r[0] for r in runs], [r[1] for r in runs]
    print(f"bytecode_writing: {'off' if sys.flags.dont_write_bytecode else 'on'}")
    print(f"train_process_cpu_s_median: {statistics.median(cpu):.3f}  min: {min(cpu):.3f}")
    print(f"train_process_wall_s_median: {statistics.median(wall):.3f}  min: {min(wall):.3f}")
    rows = []
    for line in _run(args, importtime=True)[2].splitlines():
        if line.startswith("import time:") and "self [us]" not in line:
            own, cumulative, name = line[len("import time:"):].split("|")
            rows.append((int(own), int(cumulative), name.strip()))
    print(f"imports_self_s_total: {sum(r[0] for r in rows) / 1e6:.3f}")
    for own, cumulative, name in sorted(rows, reverse=True)[:10]:
        print(f"  {own / 1e3:6.1f} ms self  {cumulative / 1e3:7.1f} ms cumulative  {name}")


if __name__ == "__main__":
    main(sys.argv[1:] or DEFAULT_ARGS)
