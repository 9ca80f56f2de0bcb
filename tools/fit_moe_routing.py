"""Fit the dropless-routing load imbalance (``calibration/moe_routing.yaml``) on the
forced-balance / real-routing pairs of ../shared/ground_truth/training.csv
(``perfcast.validate.fit_moe_routing``); prints each pair and, with --write, rewrites the file.
Run before ``tools/fit_calibration.py`` (the overhead fit forecasts with this value).

    python tools/fit_moe_routing.py [--write]
"""

from __future__ import annotations

import sys
from datetime import date
from pathlib import Path

import yaml

from perfcast.estimate.training import estimate_training
from perfcast.validate.fit_moe_routing import find_pairs, fit_dropless_imbalance, forecast_ratio
from perfcast.validate.training_rows import parse_rows, read_rows

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared/ground_truth/training.csv"
OUT = ROOT / "src/perfcast/calibration/moe_routing.yaml"
HEADER = ("# Routing facts of MoE training that no input states. Written by tools/fit_moe_routing.py\n"
          "# (perfcast/validate/fit_moe_routing.py); loaded by perfcast/calibration/moe_routing.py,\n"
          "# used by perfcast/graph/stage.py (moe_load_imbalance).\n")


def main(write: bool) -> None:
    parsed, _ = parse_rows(read_rows(DATA))
    pairs = find_pairs(parsed)
    value = round(fit_dropless_imbalance(pairs), 3)
    lines = []
    for p in pairs:
        fitted = forecast_ratio(p, value, estimate_training)
        lines.append(f"{p.label}: measured {p.measured_ratio:.3f}, forecast {fitted:.3f}")
        print(lines[-1])
    print(f"dropless_load_imbalance = {value}")
    if not write:
        return
    source = (
        f"Fitted {date.today().isoformat()} (tools/fit_moe_routing.py) on the {len(pairs)} quality "
        "A/B pairs of shared/ground_truth/training.csv that measure one run with forced load "
        "balancing (--moe-router-force-load-balancing, random logits) and with its learned "
        "dropless router: the busiest EP rank's routed tokens over the mean that makes the "
        "forecast real/forced throughput ratio match the measured one (least squares in log). "
        "Pairs, measured vs forecast ratio: " + "; ".join(lines) + ". One source (the "
        "Megatron-Core MoE team's ModelZoo, Qwen3-235B-A22B, 128 experts top-8, EP 8, H100); "
        "the C-quality Mixtral 8x22B pair of the same source (rows 580/579, 'around' values "
        "from script comments) measures 0.957 and is not fitted.")
    data = {"reference": "shared/ground_truth/training.csv (forced-balance / dropless pairs)",
            "dropless_load_imbalance": {"value": value, "source": source,
                                        "pairs": [p.label for p in pairs]}}
    OUT.write_text(HEADER + yaml.safe_dump(data, sort_keys=False, width=100), encoding="utf-8")


if __name__ == "__main__":
    main("--write" in sys.argv)
