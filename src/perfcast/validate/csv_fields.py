"""Reading cells of a ground-truth CSV row (../shared/ground_truth/training.csv schema).

The CSV holds values exactly as published, so cells are text: ``"64"``, ``"41.25%"``,
``"1 (no TP)"``, ``"128K (paper)"``, ``"256 routed + 1 shared"``, ``"up to 147"``. Rules:

- an empty cell means "not stated" (``None``); the caller applies a documented default;
- a number may carry a parenthesised remark (``"1 (no TP)"`` -> 1, ``"24.6 (non-attention)"``
  -> 24.6) and thousands separators (``"1,024"``);
- anything else (``"128K"``, ``"2M"``, ``"up to 147"``, ``"3072 -> 15360"``) is not an exact
  value: ``cell_int``/``cell_float`` raise ``RowError`` naming the column, ``loose_int`` returns
  ``None`` (for architecture columns, where the catalog can fill the gap).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

_NUMBER = re.compile(r"^\s*([-+]?\d[\d,]*(?:\.\d+)?(?:[eE][-+]?\d+)?)\s*(%?)\s*(?:\(.*\))?\s*$")
_LEADING_ROUTED = re.compile(r"^\s*(\d+)\s+routed\b", re.IGNORECASE)


class RowError(ValueError):
    """A row cannot describe a run; the message is the skip reason (names column and value)."""


def cell_text(row: Mapping[str, str | None], column: str) -> str:
    """Stripped text of ``column`` ('' when missing or empty)."""
    value = row.get(column)
    return value.strip() if isinstance(value, str) else ""


def _number(text: str) -> tuple[float, bool] | None:
    """(value, is_percent) of a numeric cell with an optional remark, else None."""
    match = _NUMBER.match(text)
    if match is None:
        return None
    try:
        value = float(match.group(1).replace(",", ""))
    except ValueError:
        return None
    return value, match.group(2) == "%"


def cell_float(row: Mapping[str, str | None], column: str) -> float | None:
    """A number (percent signs kept as the number: ``"41.25%"`` -> 41.25); None when empty.

    Raises ``RowError`` for text that is not one exact number.
    """
    text = cell_text(row, column)
    if not text:
        return None
    parsed = _number(text)
    if parsed is None:
        raise RowError(f"{column}={text!r} is not a number")
    return parsed[0]


def cell_fraction(row: Mapping[str, str | None], column: str) -> float | None:
    """A ratio cell such as MFU: ``"41.25%"`` -> 0.4125, ``"0.41"`` -> 0.41; None when empty."""
    text = cell_text(row, column)
    if not text:
        return None
    parsed = _number(text)
    if parsed is None:
        raise RowError(f"{column}={text!r} is not a number or percentage")
    value, percent = parsed
    return value / 100.0 if percent or value > 1.0 else value


def cell_int(row: Mapping[str, str | None], column: str) -> int | None:
    """A whole number; None when empty. Raises ``RowError`` for anything else."""
    value = cell_float(row, column)
    if value is None:
        return None
    if value != int(value):
        raise RowError(f"{column}={cell_text(row, column)!r} is not a whole number")
    return int(value)


def positive_int(row: Mapping[str, str | None], column: str) -> int | None:
    """``cell_int`` that must also be > 0 when present."""
    value = cell_int(row, column)
    if value is not None and value <= 0:
        raise RowError(f"{column}={value} must be positive")
    return value


def loose_int(row: Mapping[str, str | None], column: str) -> int | None:
    """An exact whole number, or None for empty or inexact text (``"128K (paper)"``).

    ``"256 routed + 1 shared"`` gives 256 (the routed-expert count).
    """
    text = cell_text(row, column)
    if not text:
        return None
    routed = _LEADING_ROUTED.match(text)
    if routed is not None:
        return int(routed.group(1))
    parsed = _number(text)
    if parsed is None or parsed[1] or parsed[0] != int(parsed[0]) or parsed[0] <= 0:
        return None
    return int(parsed[0])


def shared_experts(row: Mapping[str, str | None], column: str = "moe_experts") -> int | None:
    """Shared-expert count from text like ``"256 routed + 1 shared"``; None when not stated."""
    match = re.search(r"\+\s*(\d+)\s+shared", cell_text(row, column), re.IGNORECASE)
    return int(match.group(1)) if match else None


def lower_text(row: Mapping[str, str | None], *columns: str) -> str:
    """Lower-cased text of several columns joined by ' | ' (for keyword rules)."""
    return " | ".join(cell_text(row, c).lower() for c in columns)
