"""Split closed-loop serving rows into implied prefill and decode rates, measured vs forecast.

Diagnostic (not part of the package): for a source's fixed-length closed-loop rows (TTFT and
TPOT at several concurrencies c, prompt L_in, answer L_out), per engine build:

* prefill seconds per prompt token, two ways. (a) From the lowest concurrency's TTFT: with
  fixed lengths a closed loop of c clients stays in lockstep (all start together, all end
  together), so c prompts arrive at once and the last one's first token waits for all c
  prefills: TTFT ~= c * L_in * p. (b) From the TPOT slope between the two highest
  concurrencies: each request's decode is interrupted by the prefills of the ~c requests that
  replace finished ones during its L_out steps, TPOT(c) ~= d(c) + c * L_in * p / L_out, so
  p ~= dTPOT / (dc * L_in / L_out) (an upper bound: the decode step d(c) also grows with c).
* the decode step at the lowest concurrency: d ~= TPOT - c * L_in * p / L_out.

The forecast's TTFT and TPOT (``perfcast validate`` path: ``parse_serving_row`` +
``predict_serving``) go through the same formulas, so the ratio measured/forecast of each
phase says which phase the forecast misses, independent of the scheduler simulation.

    python tools/serving_phase_gap.py --source "DeepSeek-R1 on 8xH200"
"""

from __future__ import annotations

import argparse
import csv
from collections import defaultdict
from pathlib import Path

from perfcast.validate.catalog_lookup import default_catalog
from perfcast.validate.csv_fields import RowError
from perfcast.validate.serving_compare import ServingReportCache, predict_serving
from perfcast.validate.serving_rows import parse_serving_row

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "ground_truth" / "inference.csv"


def _phases(ttft_ms: dict[int, float], tpot_ms: dict[int, float], l_in: float,
            l_out: float) -> tuple[float, float, float]:
    """(p from TTFT, p from the TPOT slope, decode step at the lowest c), ms per token / step."""
    cs = sorted(set(ttft_ms) & set(tpot_ms))
    low, hi1, hi2 = cs[0], cs[-2], cs[-1]
    p_ttft = ttft_ms[low] / (low * l_in)
    p_slope = (tpot_ms[hi2] - tpot_ms[hi1]) / ((hi2 - hi1) * l_in / l_out)
    decode = tpot_ms[low] - low * l_in * p_ttft / l_out
    return p_ttft, p_slope, decode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", required=True, help="substring of the rows' source column")
    parser.add_argument("--data", type=Path, default=DATA)
    args = parser.parse_args()
    catalog, cache = default_catalog(), ServingReportCache()
    measured: dict[tuple, dict[str, dict[int, float]]] = defaultdict(lambda: defaultdict(dict))
    forecast: dict[tuple, dict[str, dict[int, float]]] = defaultdict(lambda: defaultdict(dict))
    with args.data.open(newline="") as handle:
        for row in csv.DictReader(handle):
            if args.source not in row["source"] or row["metric"] not in ("ttft", "tpot"):
                continue
            if not row["batching"].startswith("continuous (fixed concurrency"):
                continue
            key = (row["gpu_type"], row["framework"], float(row["input_len"]),
                   float(row["output_len"]))
            c = int(row["batch_size_or_concurrency"])
            try:
                case = parse_serving_row(row, catalog, "diagnostic")
            except (RowError, ValueError):
                continue  # rows validate skips (disaggregated, unknown model, ...)
            try:
                predicted = predict_serving(case, cache)
            except ValueError:
                continue  # does not fit: no forecast to compare
            measured[key][row["metric"]][c] = case.measured
            forecast[key][row["metric"]][c] = predicted
    print("build | prefill ms/token from TTFT (measured / forecast) | from TPOT slope | "
          "decode step ms at lowest c")
    for key in sorted(measured):
        gpu, engine, l_in, l_out = key
        if len(set(measured[key]["ttft"]) & set(measured[key]["tpot"])) < 3:
            continue  # the slope needs two concurrencies above the lowest
        m = _phases(measured[key]["ttft"], measured[key]["tpot"], l_in, l_out)
        f = _phases(forecast[key]["ttft"], forecast[key]["tpot"], l_in, l_out)
        print(f"{gpu[:14]} {engine[:34]} | {m[0]:.3f} / {f[0]:.3f} ({m[0] / f[0]:.1f}x) | "
              f"{m[1]:.3f} / {f[1]:.3f} ({m[1] / f[1]:.1f}x) | "
              f"{m[2]:.1f} / {f[2]:.1f} ({m[2] / f[2]:.1f}x)")


if __name__ == "__main__":
    main()
