"""Fit the per-generation end-to-end overhead of training on the public measurements.

One shared parameter per GPU generation, ``compute_overhead_fraction`` f: kernels on the
step's critical path take (1 + f) × the kernel model's time. It stands for what the kernel
model does not see — kernel gaps and host overhead, sustained clocks below the best-shape GEMM
microbenchmarks the kernel calibration comes from, and communication kernels slowing compute.
The step is linear in f: step(f) = step(0) · (1 + f·r) with r from one estimate at f = 0 and
one at f = 1 per row, so the least-absolute-log-error fit is a 1-D search over f per generation.

Rows: quality A and B, dense, of ../shared/ground_truth/training.csv — all of them, no row,
model or source singled out. Prints per-generation counts, the fitted f, and the error before
and after; writes src/perfcast/calibration/training_overheads.yaml with --write.

    python tools/fit_training_overheads.py [--write] [--kernel-backend=NAME] [path/to/training.csv]
"""

from __future__ import annotations

import math
import statistics
import sys
from collections import defaultdict
from functools import partial
from pathlib import Path

import numpy as np
import yaml

from perfcast.calibration.training_overheads import TrainingOverhead, TrainingOverheads
from perfcast.estimate.training import estimate_training
from perfcast.validate.compare import validate_training

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "src/perfcast/calibration/training_overheads.yaml"
HEADER = """\
# End-to-end training overhead per GPU generation: kernels on the critical path take (1 + f) x
# the kernel model's time (kernel gaps, host overhead, sustained clocks below best-shape GEMM
# microbenchmarks, communication kernels slowing compute). Written by
# tools/fit_training_overheads.py on {date} from the quality A/B dense rows of
# shared/ground_truth/training.csv (least-absolute-log-error fit per generation).
"""


def _overheads(fraction: float) -> TrainingOverheads:
    return TrainingOverheads(generations={"default": TrainingOverhead(
        step_overhead_s=0.0, compute_overhead_fraction=fraction, source="fit probe")})


def _fit(log_ratio: np.ndarray, r: np.ndarray) -> float:
    """f ≥ 0 minimising Σ|log(pred₀/meas) − log(1 + f·r)| (grid, then the best point)."""
    grid = np.linspace(0.0, 4.0, 8001)
    loss = np.abs(log_ratio[None, :] - np.log1p(grid[:, None] * r[None, :])).sum(axis=1)
    return float(grid[int(np.argmin(loss))])


def main(path: Path, write: bool, kernel_backend: str = "roofline") -> None:
    runs = [validate_training(path, partial(estimate_training, overheads=_overheads(f),
                                            kernel_backend=kernel_backend),
                              qualities=("A", "B"), arch_types=("dense",)) for f in (0.0, 1.0)]
    from perfcast.catalog.gpus import load_gpu

    by_gen: dict[str, list[tuple[float, float]]] = defaultdict(list)
    one = {row.row_id: row for row in runs[1].rows}
    for row in runs[0].rows:
        r = row.predicted / one[row.row_id].predicted - 1.0
        by_gen[load_gpu(row.gpu).generation].append((math.log(row.predicted / row.measured), r))
    entries = {"default": {"step_overhead_s": 0.0, "compute_overhead_fraction": 0.0,
                           "source": "no training measurements for this generation"}}
    all_before, all_after = [], []
    for gen, pairs in sorted(by_gen.items()):
        logs, rs = np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs])
        fraction = _fit(logs, rs)
        after = np.abs(np.exp(logs) / (1 + fraction * rs) - 1)
        before = np.abs(np.exp(logs) - 1)
        all_before += before.tolist()
        all_after += after.tolist()
        print(f"{gen:<16} rows {len(logs):>4}  f = {fraction:.3f}  MAPE before "
              f"{before.mean():.1%} after {after.mean():.1%}")
        entries[gen] = {
            "step_overhead_s": 0.0,
            "compute_overhead_fraction": round(fraction, 4),
            "source": f"fitted on {len(logs)} quality A/B dense rows; MAPE after fit "
                      f"{after.mean():.1%}",
        }
    print(f"overall MAPE before {statistics.mean(all_before):.1%} after "
          f"{statistics.mean(all_after):.1%} over {len(all_after)} rows")
    if write:
        import datetime

        text = HEADER.format(date=datetime.date.today().isoformat())
        OUT.write_text(text + yaml.safe_dump(entries, sort_keys=True, width=100))
        print(f"wrote {OUT}")


if __name__ == "__main__":
    backend = "roofline"
    args = []
    for a in sys.argv[1:]:
        if a.startswith("--kernel-backend="):
            backend = a.split("=", 1)[1]
        elif a != "--write":
            args.append(a)
    default = ROOT.parent / "shared/ground_truth/training.csv"
    main(Path(args[0]) if args else default, "--write" in sys.argv, backend)
