"""Time GEMMs, SDPA forward/backward and memory-bound copies on the local GPU with CUDA
events (torch imported lazily), and write them as a kernel table (``kernels.measured``)."""

from __future__ import annotations

import csv
import datetime
import subprocess
from pathlib import Path
from typing import Any

from perfcast.kernels.measured import KERNEL_TABLE_COLUMNS
from perfcast.profile.grid import MEMORY_BYTES, attention_shapes, gemm_shapes

WARMUP, REPEATS = 5, 20
"""Warm-up and timed iterations per shape (mean of the timed ones)."""


def _time_s(torch: Any, fn) -> float:
    """Mean seconds of ``fn()`` over REPEATS, timed with CUDA events after WARMUP calls."""
    for _ in range(WARMUP):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(REPEATS):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / 1e3 / REPEATS


def _row(gpu: str, kind: str, time_s: float, **cells: Any) -> dict[str, Any]:
    row = dict.fromkeys(KERNEL_TABLE_COLUMNS, "")
    row.update(gpu=gpu, kind=kind, time_s=f"{time_s:.6e}", source="perfcast profile", **cells)
    return row


def measure_rows(gpu: str, quick: bool = False) -> list[dict[str, Any]]:
    """Every measured row for catalog GPU ``gpu`` (the local device)."""
    import torch
    import torch.nn.functional as F

    dev, dt = "cuda", torch.bfloat16
    rows = []
    for m, n, k in gemm_shapes(quick):
        a, b = torch.randn(m, k, device=dev, dtype=dt), torch.randn(k, n, device=dev, dtype=dt)
        rows.append(_row(gpu, "gemm", _time_s(torch, lambda a=a, b=b: a @ b), precision="bf16",
                         m=m, n=n, k=k, batch=1))
    for batch, heads, seq, d in attention_shapes(quick):
        for causal in (False, True):
            q, kk, v = (torch.randn(batch, heads, seq, d, device=dev, dtype=dt,
                                    requires_grad=True) for _ in range(3))
            out = F.scaled_dot_product_attention(q, kk, v, is_causal=causal)
            grad = torch.randn_like(out)
            fwd = _time_s(torch, lambda q=q, kk=kk, v=v, c=causal:
                          F.scaled_dot_product_attention(q, kk, v, is_causal=c))
            both = _time_s(torch, lambda q=q, kk=kk, v=v, c=causal, g=grad:
                           F.scaled_dot_product_attention(q, kk, v, is_causal=c).backward(g))
            for backward, t in ((False, fwd), (True, max(both - fwd, 1e-9))):
                rows.append(_row(gpu, "attention", t, precision="bf16", batch=batch,
                                 num_heads=heads, num_kv_heads=heads, seq_q=seq, seq_kv=seq,
                                 head_dim_qk=d, head_dim_v=d, causal=int(causal),
                                 backward=int(backward)))
    for size in MEMORY_BYTES:
        src = torch.empty(int(size // 2), device=dev, dtype=torch.uint8)
        dst = torch.empty_like(src)
        rows.append(_row(gpu, "memory", _time_s(torch, lambda s=src, d=dst: d.copy_(s)),
                         bytes_moved=float(2 * src.numel())))
    return rows


def _driver() -> str:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10, check=False)
        return out.stdout.strip().splitlines()[0] if out.stdout.strip() else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def write_table(path: Path, device_name: str, gpu: str, rows: list[dict[str, Any]]) -> None:
    """Write ``rows`` as a kernel table with GPU name, driver, torch version and date."""
    import torch

    with path.open("w", newline="", encoding="utf-8") as f:
        f.write(f"# gpu_name: {device_name}\n# catalog_gpu: {gpu}\n# driver: {_driver()}\n"
                f"# torch: {torch.__version__}\n# date: {datetime.date.today().isoformat()}\n")
        writer = csv.DictWriter(f, fieldnames=KERNEL_TABLE_COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
