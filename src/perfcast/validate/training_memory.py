"""Measured peak memory of training rows (training.csv ``notes``) against the forecast peak.

Some sources publish the peak memory per GPU with the throughput (torchtitan "peak memory
82.4 GiB", torchao "peak memory 47.65 GB", "max memory 145.55 GiB", "Peak reserved memory
112.63 GiB"); training.csv keeps it in ``notes`` (or ``other_metric``). GiB = 2^30 B; GB is
read as 10^9 B (the sources' own unit words). ``memory_errors`` compares each with
``estimate_memory(...).peak_bytes``: error = (forecast - measured) / measured.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from perfcast.memory.estimate import estimate_memory
from perfcast.validate.csv_fields import cell_text
from perfcast.validate.training_rows import ParsedRow

GiB = 2**30
UNIT_BYTES = {"GiB": float(GiB), "GB": 1e9}
_MEASURED = re.compile(r"\bmemory\s+(?P<value>\d+(?:\.\d+)?)\s*(?P<unit>GiB|GB)\b", re.I)


@dataclass(frozen=True)
class MemoryComparison:
    """One row's forecast peak memory per GPU against its published peak."""

    row_id: str
    source_id: str
    predicted_bytes: float
    measured_bytes: float

    @property
    def error(self) -> float:
        """(predicted - measured) / measured."""
        return (self.predicted_bytes - self.measured_bytes) / self.measured_bytes


def measured_peak_bytes(row: Mapping[str, str | None]) -> float | None:
    """Published peak memory per GPU in bytes from ``notes``/``other_metric``; None if absent."""
    for column in ("other_metric", "notes"):
        match = _MEASURED.search(cell_text(row, column))
        if match is not None:
            unit = "GiB" if match["unit"].lower() == "gib" else "GB"
            return float(match["value"]) * UNIT_BYTES[unit]
    return None


def memory_comparisons(
    parsed: Iterable[ParsedRow], raw: Mapping[str, Mapping[str, str | None]]
) -> tuple[MemoryComparison, ...]:
    """Every parsed row with a published peak, forecast with ``estimate_memory``."""
    out = []
    for row in parsed:
        measured = measured_peak_bytes(raw[row.row_id])
        if measured is None:
            continue
        report = estimate_memory(row.model, row.system, row.strategy, row.workload)
        out.append(MemoryComparison(row.row_id, row.source_id, report.peak_bytes, measured))
    return tuple(out)


def memory_mape(comparisons: Iterable[MemoryComparison]) -> float:
    """Mean absolute relative error of the forecast peaks (nan when there are none)."""
    errors = [abs(c.error) for c in comparisons]
    return sum(errors) / len(errors) if errors else float("nan")
