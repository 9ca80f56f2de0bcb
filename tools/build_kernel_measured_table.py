"""Build ``src/perfcast/calibration/kernel_measured.csv`` from the published points of
shared/reference/kernel_efficiency.csv (the ``measured`` backend's shipped table).

    python tools/build_kernel_measured_table.py [--csv PATH]

Every shaped GEMM row and every separately reported attention forward/backward row with a
catalog GPU becomes one table row, time = FLOPs (as the source counts them) / measured FLOP/s.
Rows the roofline fit excludes (superseded software, tutorial kernels) are left out too, and
so are fwd+bwd sums (one time for two kernels). Same parser as the fits
(``kernel_reference_rows``); GPU names map as in ``fit_kernel_analytical.CATALOG_GPU``.
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

from fit_kernel_analytical import CATALOG_GPU, DEFAULT_CSV
from kernel_reference_rows import read_observations

from perfcast.kernels.measured import KERNEL_MEASURED_PATH, KERNEL_TABLE_COLUMNS
from perfcast.op_counts import attention_flops, gemm_flops


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--csv", type=Path, default=DEFAULT_CSV)
    args = parser.parse_args()
    observations, _ = read_observations(args.csv)
    rows = []
    for o in observations:
        if not o.fit or o.hardware not in CATALOG_GPU or o.block == "attn-fwd+bwd":
            continue
        if CATALOG_GPU[o.hardware] == "h100-sxm" and o.hardware.startswith("NVIDIA GH200"):
            continue  # GH200 has its own HBM: not the catalog H100's table
        row = dict.fromkeys(KERNEL_TABLE_COLUMNS, "")
        row.update(gpu=CATALOG_GPU[o.hardware],
                   source=f"kernel_efficiency.csv line {o.line} ({o.implementation})")
        if o.gemm is not None:
            m, n, k, b = o.gemm
            row.update(kind="gemm", precision=o.block.removeprefix("gemm-"), m=m, n=n, k=k,
                       batch=b, time_s=f"{float(gemm_flops(m, n, k, b)) / o.measured:.6e}")
        elif o.attention is not None and o.block in ("attn-fwd", "attn-bwd", "attn-fwd-fp8"):
            a, backward = o.attention, o.block == "attn-bwd"
            flops = float(attention_flops(a.batch, a.num_heads, a.seq_q, a.seq_kv, a.head_dim,
                                          a.head_dim, a.causal, backward))
            row.update(kind="attention", precision="fp8" if o.block.endswith("fp8") else "bf16",
                       batch=a.batch, num_heads=a.num_heads, num_kv_heads=a.num_heads,
                       seq_q=a.seq_q, seq_kv=a.seq_kv, head_dim_qk=a.head_dim,
                       head_dim_v=a.head_dim, causal=int(a.causal), backward=int(backward),
                       time_s=f"{flops / o.measured:.6e}")
        else:
            continue
        rows.append(row)
    with KERNEL_MEASURED_PATH.open("w", newline="", encoding="utf-8") as f:
        f.write("# perfcast kernel table: published points of shared/reference/"
                "kernel_efficiency.csv\n# written by tools/build_kernel_measured_table.py\n")
        writer = csv.DictWriter(f, fieldnames=KERNEL_TABLE_COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {len(rows)} rows to {KERNEL_MEASURED_PATH}")


if __name__ == "__main__":
    main()
