"""Fit the two inference-memory allowances on FasterTransformer's measured GPU memory.

Reads ../shared/ground_truth/inference.csv (metric gpu_memory_usage), forecasts weights and KV
cache exactly, and fits ``inference_workspace_tokens_factor`` (16-bit hidden vectors per live
token) and ``inference_runtime_bytes`` by least squares on relative error over all rows.
Prints per-row errors; paste the two numbers into calibration/memory_overheads.yaml.

    python tools/fit_memory_overheads.py [path/to/inference.csv]
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from perfcast.calibration.memory_overheads import load_memory_overheads
from perfcast.memory.inference import estimate_inference_memory
from perfcast.validate.ft_memory import ft_memory_rows


def main(path: Path) -> None:
    rows = ft_memory_rows(path)
    zero = load_memory_overheads().model_copy(
        update={"inference_workspace_tokens_factor": 0.0, "inference_runtime_bytes": 0.0}
    )
    fixed, token_h2, measured = [], [], []
    for row in rows:
        mem = estimate_inference_memory(row.model, 80e9, row.tp, row.pp, row.batch_size,
                                        row.context_tokens, overheads=zero)
        fixed.append(mem.total_bytes)
        token_h2.append(row.batch_size * row.context_tokens * row.model.hidden_size * 2)
        measured.append(row.measured_bytes)
    fixed, token_h2, measured = map(np.asarray, (fixed, token_h2, measured))
    # relative least squares: minimize sum(((fixed + f*x + r) - y)/y)^2
    a = np.stack([token_h2 / measured, 1.0 / measured], axis=1)
    rhs = (measured - fixed) / measured
    (factor, runtime), *_ = np.linalg.lstsq(a, rhs, rcond=None)
    pred = fixed + factor * token_h2 + runtime
    err = (pred - measured) / measured
    for row, e in zip(rows, err, strict=True):
        print(f"row {row.row_id:>4} {row.model.name:<10} b={row.batch_size:<3} "
              f"ctx={row.context_tokens:<4} error {e:+.1%}")
    print(f"inference_workspace_tokens_factor: {factor:.2f}")
    print(f"inference_runtime_bytes: {runtime:.4g}")
    print(f"MAPE {np.mean(np.abs(err)):.2%}  worst {np.max(np.abs(err)):.2%}")


if __name__ == "__main__":
    default = Path(__file__).resolve().parents[2] / "shared/ground_truth/inference.csv"
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else default)
