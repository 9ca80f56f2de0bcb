"""The shipped schema of measured-data CSVs (``csv_schema.yaml``) and the check of a file's
header against it: ``perfcast validate`` refuses a file that is empty or lacks a required
column (exit 2, naming the missing columns) instead of reporting zero rows."""

from __future__ import annotations

import csv
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Literal

from perfcast.errors import InputError

SCHEMA_PATH = Path(__file__).with_name("csv_schema.yaml")
Kind = Literal["training", "inference"]


@dataclass(frozen=True)
class CsvSchema:
    kind: Kind
    required: tuple[str, ...]
    one_of: tuple[str, ...]
    optional: tuple[str, ...]

    def missing(self, header: list[str]) -> list[str]:
        """Required columns absent from ``header`` (plus 'one of ...' when none of
        ``one_of`` is there)."""
        present = set(header)
        out = [c for c in self.required if c not in present]
        if self.one_of and not present & set(self.one_of):
            out.append(f"one of {'/'.join(self.one_of)}")
        return out


@cache
def load_schemas() -> dict[str, CsvSchema]:
    import yaml

    data = yaml.safe_load(SCHEMA_PATH.read_text(encoding="utf-8"))
    return {kind: CsvSchema(kind, tuple(body["required"]), tuple(body.get("one_of") or ()),
                            tuple(body.get("optional") or ()))
            for kind, body in data.items()}


def read_header(path: Path) -> list[str]:
    """The header row of ``path``; ``InputError`` if the file is empty or not text CSV."""
    try:
        with Path(path).open(newline="", encoding="utf-8") as handle:
            header = next(csv.reader(handle), [])
            has_row = next(csv.reader(handle), None) is not None
    except UnicodeDecodeError:
        raise InputError("data", str(path), "is not a UTF-8 CSV file") from None
    except csv.Error as exc:
        raise InputError("data", str(path), f"is not a CSV file ({exc})") from None
    header = [h.strip() for h in header]
    if not any(header):
        raise InputError("data", str(path), "is empty (expected a CSV header; schema: "
                         "perfcast/validate/csv_schema.yaml)")
    if not has_row:
        raise InputError("data", str(path), "has a header but no rows")
    return header


def check_csv_schema(path: Path) -> Kind:
    """Which schema ``path`` follows; ``InputError`` naming the missing columns if neither."""
    header = read_header(path)
    schemas = load_schemas()
    if not schemas["inference"].missing(header):
        return "inference"
    missing = schemas["training"].missing(header)
    if missing:
        raise InputError("data", str(path), f"lacks training.csv columns {missing} (or the "
                         f"inference.csv columns {list(schemas['inference'].required)}); schema: "
                         "perfcast/validate/csv_schema.yaml")
    return "training"
