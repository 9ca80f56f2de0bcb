"""List published training configurations forecast not to fit, and the memory error.

    python tools/memory_fit.py [--csv PATH]

Prints every ground-truth row that states its layout and whose forecast peak memory per GPU
exceeds usable HBM (``perfcast.validate.memory_fit.overflowing_rows``), with the documented
mechanism from ``known_overflows.yaml`` or "UNDOCUMENTED", then the forecast against the
published peak memory of every row that has one and the memory MAPE
(``perfcast.validate.training_memory``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from perfcast.validate.csv_fields import cell_text
from perfcast.validate.memory_fit import load_known_overflows, overflowing_rows
from perfcast.validate.training_memory import GiB, memory_comparisons, memory_mape
from perfcast.validate.training_rows import parse_rows, read_rows

DEFAULT_CSV = Path(__file__).resolve().parents[2] / "shared" / "ground_truth" / "training.csv"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--csv", type=Path, default=DEFAULT_CSV)
    args = parser.parse_args()
    raw_rows = read_rows(args.csv)
    raw = {cell_text(row, "row_id"): row for row in raw_rows}
    parsed, _ = parse_rows(raw_rows)
    known = load_known_overflows()
    overflows = overflowing_rows(parsed, raw)
    print(f"{len(overflows)} of {len(parsed)} parsed rows forecast not to fit:")
    for item in overflows:
        entry = known.get(item.row_id)
        why = entry.mechanism.value if entry else "UNDOCUMENTED"
        print(f"  row {item.row_id:>4} {item.source_id:<18} {item.model:<24} {item.gpu:<16}"
              f" {item.peak_bytes / GiB:7.1f} / {item.capacity_bytes / GiB:6.1f} GiB  {why}")
    comparisons = memory_comparisons(parsed, raw)
    print(f"\npublished peak memory, {len(comparisons)} rows:")
    for c in comparisons:
        print(f"  row {c.row_id:>4} {c.source_id:<18} forecast {c.predicted_bytes / GiB:7.1f}"
              f"  measured {c.measured_bytes / GiB:7.1f} GiB  {c.error:+.1%}")
    print(f"memory MAPE {memory_mape(comparisons):.1%} over {len(comparisons)} rows")


if __name__ == "__main__":
    main()
