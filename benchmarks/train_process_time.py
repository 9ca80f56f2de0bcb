"""Print the CPU and wall seconds of ``perfcast train`` as a whole process (target: 0.3 s) and
the slowest imports of one run (``python -X importtime``).

CPU seconds (user + system of the child, from ``os.wait4``: microseconds, where ``os.times``
counts 10 ms ticks) are the figure to compare on a shared machine; wall seconds also count
waiting for a core. Two modes, each ``--repeats`` runs (default 20) after one warm-up run that
fills the parsed-YAML cache (``perfcast.yaml_load``):

- ``bytecode_cached``: the children write and read bytecode under a temporary
  ``PYTHONPYCACHEPREFIX`` (the warm-up run fills it), as a regular install does (``pip install .``
  compiles every module at install time). ``train_process_s_median`` is this mode's CPU median.
- ``environment``: the children inherit this environment as it is. Where
  PYTHONDONTWRITEBYTECODE is set and perfcast is an editable install without ``__pycache__``,
  every run compiles perfcast's ~117 modules (688 kB) from source (~0.06 s).

    python benchmarks/train_process_time.py [--repeats N] [ARGS...]
    (default ARGS: -m llama-3-8b -g 8 --json)
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

DEFAULT_ARGS = ["-m", "llama-3-8b", "-g", "8", "--json"]


def _run(args: list[str], env: dict[str, str], importtime: bool = False) -> tuple[float, float, str]:
    """(cpu_s, wall_s, stderr) of one ``perfcast train`` process."""
    flags = ["-X", "importtime"] if importtime else []
    start = time.perf_counter()
    child = subprocess.Popen([sys.executable, *flags, "-m", "perfcast.cli.main", "train", *args],
                             env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert child.stderr is not None
    stderr = child.stderr.read()
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise SystemExit(f"perfcast train {' '.join(args)} failed: {stderr.strip()}")
    return usage.ru_utime + usage.ru_stime, wall, stderr


def _measure(label: str, args: list[str], env: dict[str, str], repeats: int) -> float:
    _run(args, env)  # fills the YAML cache (and the bytecode cache where one is written)
    runs = [_run(args, env) for _ in range(repeats)]
    cpu, wall = [r[0] for r in runs], [r[1] for r in runs]
    print(f"{label}: train_process_cpu_s_median: {statistics.median(cpu):.3f}  "
          f"min: {min(cpu):.3f}  wall_s_median: {statistics.median(wall):.3f}  ({repeats} runs)")
    return statistics.median(cpu)


def _slowest_imports(args: list[str], env: dict[str, str], count: int = 10) -> None:
    rows = []
    for line in _run(args, env, importtime=True)[2].splitlines():
        if line.startswith("import time:") and "self [us]" not in line:
            own, cumulative, name = line[len("import time:"):].split("|")
            rows.append((int(own), int(cumulative), name.strip()))
    print(f"imports_self_s_total: {sum(r[0] for r in rows) / 1e6:.3f}")
    for own, cumulative, name in sorted(rows, reverse=True)[:count]:
        print(f"  {own / 1e3:6.1f} ms self  {cumulative / 1e3:7.1f} ms cumulative  {name}")


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    known, rest = parser.parse_known_args(argv)
    args = rest or DEFAULT_ARGS
    inherited = dict(os.environ)
    print(f"environment bytecode writing: "
          f"{'off' if inherited.get('PYTHONDONTWRITEBYTECODE') else 'on'}")
    with tempfile.TemporaryDirectory(prefix="perfcast-pycache-") as prefix:
        cached = {k: v for k, v in inherited.items() if k != "PYTHONDONTWRITEBYTECODE"}
        cached["PYTHONPYCACHEPREFIX"] = prefix
        median = _measure("bytecode_cached", args, cached, known.repeats)
        _measure("environment", args, inherited, known.repeats)
        print(f"train_process_s_median: {median:.3f}")
        _slowest_imports(args, cached)


if __name__ == "__main__":
    main(sys.argv[1:])
