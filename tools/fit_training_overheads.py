"""Fit the per-generation end-to-end overhead of training on the public measurements.

One shared parameter per GPU generation, ``compute_overhead_fraction`` f: the step takes
(1 + f) × the operator model's time. It stands for what the kernel and collective models do
not see — kernel gaps and host overhead, sustained clocks below the best-shape GEMM
microbenchmarks the kernel calibration comes from, and communication kernels slowing compute.
Predictions scale as 1/(1 + f), so the least-absolute-log-error fit is closed form:
log(1 + f) = median over the generation's rows of log(predicted_with_f=0 / measured).

Rows: quality A and B, dense, of ../shared/ground_truth/training.csv — all of them, no row,
model or source singled out. Prints per-generation counts, the fitted f, and the error before
and after; writes src/perfcast/calibration/training_overheads.yaml with --write.

    python tools/fit_training_overheads.py [--write] [path/to/training.csv]
"""

from __future__ import annotations

import math
import statistics
import sys
from collections import defaultdict
from functools import partial
from pathlib import Path

import yaml

from perfcast.calibration.training_overheads import TrainingOverhead, TrainingOverheads
from perfcast.estimate.training import estimate_training
from perfcast.validate.compare import validate_training

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "src/perfcast/calibration/training_overheads.yaml"
HEADER = """\
# End-to-end training overhead per GPU generation: the step takes (1 + f) x the operator
# model's time (kernel gaps, host overhead, sustained clocks below best-shape GEMM
# microbenchmarks, communication kernels slowing compute). Written by
# tools/fit_training_overheads.py on {date} from the quality A/B dense rows of
# shared/ground_truth/training.csv (closed-form least-absolute-log-error fit per generation).
"""


def main(path: Path, write: bool) -> None:
    zero = TrainingOverheads(generations={"default": TrainingOverhead(
        step_overhead_s=0.0, compute_overhead_fraction=0.0, source="fit baseline")})
    report = validate_training(path, partial(estimate_training, overheads=zero),
                               qualities=("A", "B"), arch_types=("dense",))
    from perfcast.catalog.gpus import load_gpu

    by_gen: dict[str, list[float]] = defaultdict(list)
    for row in report.rows:
        by_gen[load_gpu(row.gpu).generation].append(math.log(row.predicted / row.measured))
    entries = {"default": {"step_overhead_s": 0.0, "compute_overhead_fraction": 0.0,
                           "source": "no training measurements for this generation"}}
    all_before, all_after = [], []
    for gen, logs in sorted(by_gen.items()):
        shift = statistics.median(logs)
        fraction = max(0.0, math.exp(shift) - 1.0)
        after = [abs(math.exp(x) / (1 + fraction) - 1) for x in logs]
        before = [abs(math.exp(x) - 1) for x in logs]
        all_before += before
        all_after += after
        print(f"{gen:<16} rows {len(logs):>4}  f = {fraction:.3f}  MAPE before "
              f"{statistics.mean(before):.1%} after {statistics.mean(after):.1%}")
        entries[gen] = {
            "step_overhead_s": 0.0,
            "compute_overhead_fraction": round(fraction, 4),
            "source": f"fitted on {len(logs)} quality A/B dense rows; MAPE after fit "
                      f"{statistics.mean(after):.1%}",
        }
    print(f"overall MAPE before {statistics.mean(all_before):.1%} after "
          f"{statistics.mean(all_after):.1%} over {len(all_after)} rows")
    if write:
        import datetime

        text = HEADER.format(date=datetime.date.today().isoformat())
        OUT.write_text(text + yaml.safe_dump(entries, sort_keys=True, width=100))
        print(f"wrote {OUT}")


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--write"]
    default = ROOT.parent / "shared/ground_truth/training.csv"
    main(Path(args[0]) if args else default, "--write" in sys.argv)
