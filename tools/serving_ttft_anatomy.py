"""TTFT anatomy of measured serving rows: measured median / mean / p99 beside the simulated
ones, and what the measurements imply (issue 17, InferenceX B200/B300 TTFT).

For every TTFT row of the chosen source(s) that ``perfcast validate`` forecasts, the script
simulates the row's run (``estimate_serving`` with the shipped calibration, in sample) and
prints:

* measured median, mean and p99 TTFT (the notes state the other two statistics:
  "median TTFT (mean X ms, p99 Y ms)") and the simulated ones;
* ``excess_steps`` = (measured − simulated median TTFT) / measured median TPOT: how many decode
  steps of the same run the measured first token waits beyond the simulation;
* ``first_wave_s`` = (mean − (1 − f)·median) / f with f = concurrency / prompts: the mean TTFT
  the first c requests (sent together at t = 0 by the closed-loop client) must have if every
  later request sat at the median. An estimate: it says whether the mean is a first-wave
  (start-up) effect or a steady-state one;
* the run's measured median TPOT (the row of the same ``table`` cell with metric ``tpot``).

``--override KEY=VALUE`` (repeatable) replaces an engine setting (``EngineConfig`` field,
e.g. ``scheduler_steps=30``) on the selected rows, to test a hypothesis: a what-if, not a
forecast (only settings a row's notes state belong in a forecast). The last line gives the
MAPE of the median TTFT over the rows shown. Exploration script, not part of the package.

    python tools/serving_ttft_anatomy.py [--source semianalysis-inferencex] [--gpu B200]
        [--engine sglang] [--min-concurrency 16] [--override scheduler_steps=30]
"""

from __future__ import annotations

import argparse
import csv
import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared" / "ground_truth" / "inference.csv"
DEFAULT_SOURCE = "semianalysis-inferencex"

_STATED = re.compile(r"median\s+TTFT\s*\(mean\s+([\d.]+)\s*ms,\s*p99\s+([\d.]+)\s*ms\)", re.I)
_PROMPTS = re.compile(r"num_prompts\s*=\s*(\d+)\s*\*\s*conc", re.I)


@dataclass(frozen=True)
class StatedTtft:
    """The TTFT statistics a row states, seconds."""

    median_s: float
    mean_s: float
    p99_s: float


def stated_ttft(value_ms: float, notes: str) -> StatedTtft | None:
    """Median (the row's value), mean and p99 TTFT from a note "median TTFT (mean X ms, p99 Y
    ms)"; None when the notes do not state them."""
    match = _STATED.search(notes)
    if match is None:
        return None
    return StatedTtft(value_ms / 1e3, float(match.group(1)) / 1e3, float(match.group(2)) / 1e3)


def prompts_per_client(notes: str) -> int:
    """Prompts sent per unit of concurrency ("num_prompts=10*conc"; 10 when not stated, the
    validate default of ``serving_rows``)."""
    match = _PROMPTS.search(notes)
    return int(match.group(1)) if match else 10


def excess_steps(measured_s: float, simulated_s: float, tpot_s: float) -> float:
    """Decode steps (of the measured TPOT) the measured TTFT waits beyond the simulated one."""
    return (measured_s - simulated_s) / tpot_s


def first_wave_mean_s(stated: StatedTtft, prompts_per_client: int) -> float:
    """Mean TTFT of the first wave (c of the c·k prompts, f = 1/k) if the other requests sat at
    the median: mean = f·wave + (1 − f)·median."""
    f = 1.0 / prompts_per_client
    return (stated.mean_s - (1.0 - f) * stated.median_s) / f


def parse_override(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` with VALUE read as int, float, true/false/none or text."""
    key, sep, raw = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"override {text!r}: expected KEY=VALUE")
    lowered = raw.strip().lower()
    value: Any
    if lowered in ("true", "false"):
        value = lowered == "true"
    elif lowered == "none":
        value = None
    else:
        try:
            value = int(raw)
        except ValueError:
            try:
                value = float(raw)
            except ValueError:
                value = raw
    return key.strip(), value


@dataclass(frozen=True)
class AnatomyRow:
    """One TTFT row: its configuration, measured and simulated statistics (seconds)."""

    row_id: str
    label: str
    concurrency: int
    measured: StatedTtft | None
    measured_median_s: float
    simulated: StatedTtft
    tpot_s: float | None
    """Measured median TPOT of the same run, None when not recorded."""
    prompts_per_client: int

    @property
    def error(self) -> float:
        return self.simulated.median_s / self.measured_median_s - 1.0


def _label(case: Any) -> str:
    opts = case.options
    dp = " adp" if opts.get("attention_dp") else ""
    return (f"{case.system.gpu.name[:9]:9} {case.engine[:6]:6} {opts.get('precision', '')[:4]:4} "
            f"tp{case.strategy.tp}ep{case.strategy.ep}{dp:4} "
            f"{case.workload.input_len}/{case.workload.output_len}")


def anatomy_rows(data: Path, sources: Sequence[str], gpu: str | None, engine: str | None,
                 min_concurrency: int, overrides: dict[str, Any]) -> list[AnatomyRow]:
    """Simulate the selected TTFT rows (with ``overrides`` on their engine settings)."""
    from perfcast.estimate.serving import estimate_serving
    from perfcast.validate.fit_inference import load_inference_cases
    from perfcast.validate.serving_rows import ServingCase

    with data.open(newline="") as f:
        raw = list(csv.DictReader(f))
    by_id = {r["row_id"]: r for r in raw}
    tpot_ms = {r["table"]: float(r["value"]) for r in raw if r["metric"] == "tpot"}
    out = []
    for case in load_inference_cases([data]).cases:
        if not isinstance(case, ServingCase) or case.metric != "ttft":
            continue
        if sources and not any(case.source_id.startswith(s) for s in sources):
            continue
        conc = case.workload.concurrency or 1
        if gpu and gpu.lower() not in case.system.gpu.name.lower():
            continue
        if (engine and engine != case.engine) or conc < min_concurrency:
            continue
        options = dict(case.options)
        if overrides:
            options["engine_overrides"] = {**(options.get("engine_overrides") or {}),
                                           **overrides}
        report = estimate_serving(case.model, case.system, case.strategy, case.workload,
                                  **options)
        if not report.fits:  # validate skips it too ("does not fit in the engine's memory")
            continue
        cells = by_id[case.row_id]
        tpot = tpot_ms.get(cells["table"])
        out.append(AnatomyRow(
            row_id=case.row_id, label=_label(case), concurrency=conc,
            measured=stated_ttft(float(cells["value"]), cells["notes"]),
            measured_median_s=case.measured / 1e3,
            simulated=StatedTtft(report.ttft.median_s, report.ttft.mean_s, report.ttft.p99_s),
            tpot_s=None if tpot is None else tpot / 1e3,
            prompts_per_client=prompts_per_client(cells["notes"])))
    return out


def _ms(x: float | None) -> str:
    return "      -" if x is None else f"{x * 1e3:7.0f}"


def render(rows: Sequence[AnatomyRow]) -> str:
    head = (f"{'row':>4} {'configuration':44} {'conc':>5} | measured TTFT ms: median   mean"
            "    p99 | simulated: median   mean    p99 |  err  | TPOT ms excess_steps "
            "first_wave_s")
    lines = [head]
    for r in rows:
        m = r.measured
        steps = "      -" if r.tpot_s is None else (
            f"{excess_steps(r.measured_median_s, r.simulated.median_s, r.tpot_s):7.1f}")
        wave = "     -" if m is None else f"{first_wave_mean_s(m, r.prompts_per_client):6.2f}"
        tpot = "    -" if r.tpot_s is None else f"{r.tpot_s * 1e3:5.1f}"
        lines.append(
            f"{r.row_id:>4} {r.label:44} {r.concurrency:5d} |                  "
            f"{_ms(r.measured_median_s)}{_ms(m.mean_s if m else None)}"
            f"{_ms(m.p99_s if m else None)} |           {_ms(r.simulated.median_s)}"
            f"{_ms(r.simulated.mean_s)}{_ms(r.simulated.p99_s)} | {r.error:+5.0%} | {tpot}   "
            f"{steps}       {wave}")
    if rows:
        mape = statistics.mean(abs(r.error) for r in rows)
        signed = statistics.mean(r.error for r in rows)
        lines.append(f"{len(rows)} rows: median-TTFT MAPE {mape:.1%}, signed mean {signed:+.1%}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--source", default=DEFAULT_SOURCE,
                        help="comma-separated source_id prefixes ('' = every source)")
    parser.add_argument("--gpu", default=None, help="text the catalog GPU name contains")
    parser.add_argument("--engine", default=None, help="engine profile (sglang, vllm, ...)")
    parser.add_argument("--min-concurrency", type=int, default=1)
    parser.add_argument("--override", action="append", type=parse_override, default=[],
                        help="engine setting KEY=VALUE applied to the selected rows (what-if)")
    args = parser.parse_args(argv)
    sources = [s.strip() for s in args.source.split(",") if s.strip()]
    rows = anatomy_rows(args.data, sources, args.gpu, args.engine, args.min_concurrency,
                        dict(args.override))
    print(render(rows))


if __name__ == "__main__":
    main()
