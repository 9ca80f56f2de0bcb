"""Fit the device time per kernel boundary of a replayed graph (``calibration/graph_replay.yaml``).

One value per GPU vendor (mechanism: ``perfcast.calibration.graph_replay``). Every row of
inference.csv is forecast once per grid value (the same value for every vendor: a row depends
only on its own GPU's vendor, so one pass serves both fits). Per vendor the value minimises the
mean |log(predicted / measured)| of that vendor's decode-latency rows (TPOT, ITL, decode latency
per token, per-user decode rate; static, batch-1 and concurrency rows alike, those the gap
reaches: rows simulated through an engine profile, ``estimate.serving``). The same choice is
repeated with each source left out, and the left-out source's rows take the value chosen
without them: that is the leave-one-source-out figure printed at the end (MAPE of the
concurrency rows per metric and of the static/batch-1 time rows, the latter with the shipped
static calibration, i.e. in-sample for it).

    python tools/fit_graph_kernel_gap.py [--data path/to/inference.csv] [--write]
"""

from __future__ import annotations

import argparse
import csv
import math
from collections import defaultdict
from datetime import date
from pathlib import Path

import perfcast.estimate.serving as serving_module
from perfcast.calibration.graph_replay import (
    GRAPH_REPLAY_PATH,
    GraphReplayCalibration,
    VendorKernelGap,
)
from perfcast.validate.catalog_lookup import default_catalog
from perfcast.validate.inference_compare import validate_inference
from perfcast.validate.vocabulary import VocabularyError

GRID_US = (0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 5.0, 6.0)
"""Candidate gaps, microseconds (the 2 µs launch floor every kernel already pays is beside)."""
DECODE_METRICS = ("tpot", "itl", "decode_latency_per_token", "decode_tokens_per_s_per_user")
GROUPS = {"ttft": "ttft", "tpot": "tpot", "itl": "tpot", "output_throughput_per_gpu": "throughput",
          "output_throughput_total": "throughput", "request_throughput": "throughput"}
VENDORS = ("nvidia", "amd")


def _calibration(gap_s: float) -> GraphReplayCalibration:
    """Every vendor at ``gap_s`` (one trial of the grid)."""
    entry = VendorKernelGap(kernel_gap_s=gap_s, fit_rows=0, source="grid trial")
    return GraphReplayCalibration(fit="grid trial", vendors={"nvidia": entry, "amd": entry})


def _row_vendors(path: Path) -> dict[str, str]:
    """Vendor of each row's GPU (rows whose GPU is not in the catalog are left out)."""
    catalog = default_catalog()
    out = {}
    with path.open(newline="", encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            try:
                system = catalog.system(row["gpu_type"])
            except VocabularyError:  # unknown GPU: validate skips the row too
                continue
            if system is not None:
                out[row["row_id"]] = system.gpu.vendor
    return out


def _errors(path: Path, gap_s: float) -> dict[str, tuple[str, str, float]]:
    """row_id -> (source_id, metric, error) with every vendor's gap set to ``gap_s``."""
    trial = _calibration(gap_s)
    original = serving_module.load_graph_replay
    serving_module.load_graph_replay = lambda: trial  # type: ignore[assignment]
    try:
        report = validate_inference(path)
    finally:
        serving_module.load_graph_replay = original
    return {r.row_id: (r.source_id, r.metric, r.error) for r in report.rows}


def _choose(table: dict[float, dict], vendors: dict[str, str], vendor: str,
            left_out: str | None) -> tuple[float, int]:
    """Grid value minimising the vendor's mean |log error| on decode rows (without a source)."""
    low, high = table[min(table)], table[max(table)]
    moved = {rid for rid in low if low[rid][2] != high[rid][2]}  # rows the gap reaches

    def loss(gap: float) -> tuple[float, int]:
        logs = [abs(math.log1p(e)) for rid, (src, metric, e) in table[gap].items()
                if metric in DECODE_METRICS and vendors.get(rid) == vendor and src != left_out
                and rid in moved]
        return (sum(logs) / len(logs), len(logs)) if logs else (0.0, 0)
    best = min(table, key=lambda g: (loss(g)[0], g))
    return best, loss(best)[1]


def _mape(errors: dict[str, tuple[str, str, float]], concurrency: set[str]) -> dict[str, str]:
    groups: dict[str, list[float]] = defaultdict(list)
    for rid, (_, metric, e) in errors.items():
        if rid in concurrency and metric in GROUPS:
            groups[GROUPS[metric]].append(abs(e))
        elif rid not in concurrency and metric != "gpu_memory_usage":
            groups["static/batch-1"].append(abs(e))
    return {k: f"{100 * sum(v) / len(v):.2f}% ({len(v)} rows)" for k, v in sorted(groups.items())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path,
                        default=Path(__file__).resolve().parents[2] / "shared/ground_truth/inference.csv")
    parser.add_argument("--write", action="store_true", help=f"write {GRAPH_REPLAY_PATH.name}")
    args = parser.parse_args()
    vendors = _row_vendors(args.data)
    with args.data.open(newline="", encoding="utf-8") as handle:
        concurrency = {r["row_id"] for r in csv.DictReader(handle)
                       if r["batching"].strip().lower().startswith(("continuous", "offline"))}
    table = {g / 1e6: _errors(args.data, g / 1e6) for g in GRID_US}
    sources = sorted({src for src, _, _ in table[0.0].values()})
    chosen = {v: _choose(table, vendors, v, None) for v in VENDORS}
    loso: dict[str, dict[str, float]] = {v: {} for v in VENDORS}
    cv: dict[str, tuple[str, str, float]] = {}
    for source in sources:
        picks = {v: _choose(table, vendors, v, source)[0] for v in VENDORS}
        for v in VENDORS:
            loso[v][source] = picks[v]
        for rid, entry in table[0.0].items():
            if entry[0] == source:
                cv[rid] = table[picks.get(vendors.get(rid, ""), 0.0)][rid]
    print("before (no gap):", _mape(table[0.0], concurrency))
    print("leave-one-source-out:", _mape(cv, concurrency))
    for v in VENDORS:
        print(f"{v}: {chosen[v][0] * 1e6:.1f} us on {chosen[v][1]} decode rows; left-out choices "
              + ", ".join(f"{s}={g * 1e6:.1f}" for s, g in loso[v].items()))
    if not args.write:
        return
    grid = ", ".join(f"{g:g}" for g in GRID_US)
    fit = (f"tools/fit_graph_kernel_gap.py on {args.data.name} ({date.today().isoformat()}): per "
           f"vendor the value of the grid [{grid}] us minimising the mean |log(pred/meas)| of the "
           "vendor's decode-latency rows (TPOT, ITL, decode latency per token, per-user decode "
           "rate; static, batch-1 and concurrency rows), every other constant as shipped")
    entries = {}
    for v in VENDORS:
        values = sorted(set(loso[v].values()))
        entries[v] = VendorKernelGap(
            kernel_gap_s=chosen[v][0], fit_rows=chosen[v][1],
            loso_values_s=tuple(values),
            source=f"fitted on {chosen[v][1]} {v} decode-latency rows; with each source left out "
                   f"the choice is {', '.join(f'{x * 1e6:g}' for x in values)} us")
    write_yaml(GraphReplayCalibration(fit=fit, vendors=entries))


def write_yaml(calibration: GraphReplayCalibration) -> None:
    """Write the shipped file (header comment + the typed content)."""
    import yaml

    header = ("# Device time per dependent-kernel boundary in a replayed CUDA/HIP graph (graphed "
              "decode steps).\n# Loaded by perfcast/calibration/graph_replay.py (mechanism and "
              "citation in its docstring);\n# used by perfcast/estimate/inference_phases.py. "
              "Written by tools/fit_graph_kernel_gap.py --write.\n")
    body = yaml.safe_dump(calibration.model_dump(mode="json"), sort_keys=False, width=100)
    GRAPH_REPLAY_PATH.write_text(header + body, encoding="utf-8")
    print(f"wrote {GRAPH_REPLAY_PATH}")


if __name__ == "__main__":
    main()
