"""Cross-validated training errors grouped by measured-row columns (GPU, recipe, model, ...).

Reads the JSON of ``perfcast validate --data FILE --cross-validate source --json`` and the same
CSV, and prints, per group of the chosen CSV columns, the number of held-out rows, the mean
signed error (predicted/measured - 1: positive = forecast too fast) and the mean absolute
error; ``--rows`` also lists each row. Exploration/report script, not part of the package
(issue 21: which rows of a source are too fast, and what they share).

    perfcast validate --data ../shared/ground_truth/training.csv --cross-validate source \\
        --json > cv.json
    python tools/cv_breakdown.py cv.json [--data training.csv] [--source torchao_float8,...]
        [--gpu MI300X] [--by gpu_type,precision,model,seq_len] [--rows]

``--source`` keeps rows of those sources, ``--gpu`` rows whose gpu_type contains the text (a
row matching either is kept; neither given = every row).
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared" / "ground_truth" / "training.csv"
DEFAULT_BY = "source_id,gpu_type,precision,model,seq_len"


@dataclass(frozen=True)
class HeldOutRow:
    """One cross-validated row with the CSV cells it is grouped by."""

    row_id: str
    error: float
    """predicted/measured - 1 with the row's source left out of the fit."""
    cells: dict[str, str]


def held_out_rows(cv_json: Path, data: Path) -> list[HeldOutRow]:
    """The ``cv_rows`` of ``cv_json`` joined with their CSV rows by ``row_id``."""
    with data.open(newline="") as f:
        by_id = {r["row_id"]: r for r in csv.DictReader(f)}
    cv_rows = json.loads(cv_json.read_text())["cv_rows"]
    return [HeldOutRow(c["row_id"], float(c["error"]), by_id[c["row_id"]]) for c in cv_rows]


def keep(row: HeldOutRow, sources: set[str], gpu_text: str | None) -> bool:
    """True for a row of one of ``sources`` or whose gpu_type contains ``gpu_text``."""
    if not sources and gpu_text is None:
        return True
    return row.cells["source_id"] in sources or (
        gpu_text is not None and gpu_text.lower() in row.cells["gpu_type"].lower())


def grouped(rows: list[HeldOutRow], columns: list[str]) -> dict[tuple[str, ...], list[float]]:
    """Errors per distinct tuple of ``columns`` cells, in first-seen order."""
    groups: dict[tuple[str, ...], list[float]] = {}
    for row in rows:
        groups.setdefault(tuple(row.cells[c] for c in columns), []).append(row.error)
    return groups


def _cell(text: str, width: int = 28) -> str:
    return (text if len(text) <= width else text[:width - 1] + "~").ljust(width)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cv_json", type=Path)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--source", default="", help="comma-separated source_id values")
    parser.add_argument("--gpu", default=None, help="text the gpu_type cell contains")
    parser.add_argument("--by", default=DEFAULT_BY, help="comma-separated CSV columns")
    parser.add_argument("--rows", action="store_true", help="also list every row")
    args = parser.parse_args()
    columns = [c.strip() for c in args.by.split(",") if c.strip()]
    sources = {s.strip() for s in args.source.split(",") if s.strip()}
    rows = [r for r in held_out_rows(args.cv_json, args.data) if keep(r, sources, args.gpu)]
    print("".join(_cell(c) for c in columns) + "   n   mean err   MAPE")
    for key, errors in sorted(grouped(rows, columns).items()):
        mean = statistics.mean(errors)
        mape = statistics.mean(abs(e) for e in errors)
        print("".join(_cell(k) for k in key) + f"{len(errors):4d} {mean:+9.1%} {mape:6.1%}")
    if args.rows:
        for row in sorted(rows, key=lambda r: [r.cells[c] for c in columns]):
            print(f"  row {row.row_id:>4}: {row.error:+.1%}  "
                  + " | ".join(row.cells[c] for c in columns))
    if rows:
        print(f"all {len(rows)} rows: MAPE {statistics.mean(abs(r.error) for r in rows):.1%}")


if __name__ == "__main__":
    main()
