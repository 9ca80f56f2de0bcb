"""Do the published training configurations fit? Forecast peak memory against usable HBM.

Issue 16 ("every published configuration in the public set fits"): a row that ran was, by
construction, a configuration that fit on its GPUs. ``overflowing_rows`` forecasts the peak
memory (``perfcast.memory.estimate.estimate_memory``) of every parsed ground-truth row that
states its layout (any of tp, pp, dp, ep, dp_sharding in the CSV) and returns those whose
forecast exceeds the GPU's usable HBM (catalog ``hbm_usable_MiB``).

Rows that still overflow are listed, each with a mechanism and its evidence, in
``known_overflows.yaml`` beside this module (``load_known_overflows``); the test
``tests/test_published_fit.py`` fails on an overflowing row that is not listed, on a listed row
that now fits (the list only shrinks), and on a reason that the row's own cells contradict
(``reason_contradiction``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

import yaml

from perfcast.memory.estimate import estimate_memory
from perfcast.validate.csv_fields import cell_text
from perfcast.validate.training_rows import ParsedRow

KNOWN_OVERFLOWS_FILE = Path(__file__).with_name("known_overflows.yaml")
LAYOUT_COLUMNS = ("tp", "pp", "dp", "ep", "dp_sharding")
"""CSV columns of which at least one is stated for a row to count as stating its layout."""
MODEL_ERROR_MAX_OVERFLOW = 0.10
"""Largest overflow (peak / capacity - 1) that ``Mechanism.MODEL_ERROR`` may explain: below the
memory model's error on rows with measured peaks (tools/memory_fit.py; MAPE 48% on 37 rows)."""


class Mechanism(str, Enum):
    """Why a published configuration is forecast not to fit although it ran."""

    UNSTATED_SETTING = "unstated_setting"
    """The row omits a memory setting it ran with (recompute cell empty) and no cited
    framework default supplies one (the parsed strategy recomputes nothing)."""
    ACTIVATION_POLICY = "activation_policy"
    """The row checkpoints (stated, or its framework profile's sourced default), but the
    framework's policy keeps fewer activations than perfcast's model of that recompute value."""
    OVER_COUNTED_BUFFER = "over_counted_buffer"
    """A buffer the memory model charges that this run's stack does not hold at the peak."""
    MODEL_ERROR = "model_error"
    """Overflow within ``MODEL_ERROR_MAX_OVERFLOW``: inside the memory model's error."""


@dataclass(frozen=True)
class MemoryOverflow:
    """A published row whose forecast peak memory exceeds usable HBM."""

    row_id: str
    source_id: str
    model: str
    gpu: str
    peak_bytes: float
    capacity_bytes: float

    @property
    def overflow_fraction(self) -> float:
        """peak / capacity - 1 (> 0)."""
        return self.peak_bytes / self.capacity_bytes - 1.0


@dataclass(frozen=True)
class KnownOverflow:
    """A documented overflowing row: the mechanism, the reason and the evidence for it."""

    row_id: str
    mechanism: Mechanism
    reason: str
    evidence: str


def states_layout(row: Mapping[str, str | None]) -> bool:
    """True when the CSV row states any of ``LAYOUT_COLUMNS``."""
    return any(cell_text(row, name) for name in LAYOUT_COLUMNS)


def overflowing_rows(
    parsed: Iterable[ParsedRow], raw: Mapping[str, Mapping[str, str | None]]
) -> tuple[MemoryOverflow, ...]:
    """Rows of ``parsed`` (``raw`` maps row_id to the CSV row) that state their layout and
    whose forecast peak memory per GPU exceeds the GPU's usable HBM."""
    out = []
    for row in parsed:
        if not states_layout(raw[row.row_id]):
            continue
        report = estimate_memory(row.model, row.system, row.strategy, row.workload)
        if not report.fits:
            out.append(MemoryOverflow(row.row_id, row.source_id, row.model.name,
                                      row.system.gpu.name, report.peak_bytes,
                                      report.capacity_bytes))
    return tuple(out)


def load_known_overflows(path: Path = KNOWN_OVERFLOWS_FILE) -> dict[str, KnownOverflow]:
    """The documented list, keyed by row_id."""
    entries = yaml.safe_load(path.read_text())["rows"]
    known = {}
    for entry in entries:
        row_id = str(entry["row_id"])
        if row_id in known:
            raise ValueError(f"{path.name}: row_id {row_id} listed twice")
        known[row_id] = KnownOverflow(row_id, Mechanism(entry["mechanism"]),
                                      str(entry["reason"]).strip(),
                                      str(entry["evidence"]).strip())
    return known


def reason_contradiction(
    known: KnownOverflow, overflow: MemoryOverflow, row: Mapping[str, str | None],
    parsed: ParsedRow,
) -> str | None:
    """What in the row contradicts ``known.mechanism`` (None when the cells agree)."""
    recompute = cell_text(row, "recompute")
    applied = parsed.strategy.recompute
    if known.mechanism is Mechanism.UNSTATED_SETTING and (recompute or applied != "none"):
        return (f"row {known.row_id} has recompute={recompute or applied!r} "
                f"(stated or framework default)")
    if known.mechanism is Mechanism.ACTIVATION_POLICY and applied == "none":
        return f"row {known.row_id} runs no checkpointing (stated or framework default)"
    if known.mechanism is Mechanism.OVER_COUNTED_BUFFER and not (
            parsed.strategy.precision == "fp8" and parsed.strategy.sharding_stage >= 3):
        return f"row {known.row_id} is not an FP8 run with sharded weights"
    if (known.mechanism is Mechanism.MODEL_ERROR
            and overflow.overflow_fraction > MODEL_ERROR_MAX_OVERFLOW):
        return (f"row {known.row_id} overflows by {overflow.overflow_fraction:.1%} "
                f"> {MODEL_ERROR_MAX_OVERFLOW:.0%}")
    return None
