"""Software settings of rows that form a cumulative optimization history.

Some sources publish one layout measured after each of a sequence of software optimizations,
each step keeping the ones before it (e.g. an "optimization-history table": Baseline, then
"Router fusion", then "CUDA Graphs", ...). Such a row says so in its ``notes``
(``Cumulative optimization step "NAME"``), and names only its own step. Read alone, a row
would lose every earlier step; so ``annotate_histories`` (run by ``parse_rows`` over the whole
file) records, for each such row, the steps taken up to it and the steps still to come among
the rows of the same table (same ``url`` and the ``table_ref`` text before "(row"), in file
order. ``history_settings`` then turns the step names into ``Strategy`` fields through
``STEP_SETTINGS``: a step taken sets the field's "on" value, a step still to come its "off"
value (that optimization was not yet in place). Steps whose setting the row's own columns
already state (dispatcher, recompute) and steps with no modelled mechanism are recorded in
the row's notes, never silently dropped. A row parsed alone (``parse_row``) reads its own
step only.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from perfcast.validate.csv_fields import cell_text

STEPS_TAKEN = "_history_steps_taken"
"""Synthetic column: the steps taken up to and including this row, ' | ' separated."""
STEPS_TO_COME = "_history_steps_to_come"
"""Synthetic column: the steps of later rows of the same table, ' | ' separated."""
SEPARATOR = " | "

_STEP = re.compile(r'cumulative optimization step\s*"([^"]+)"', re.IGNORECASE)


@dataclass(frozen=True)
class StepSetting:
    """One optimization step's ``Strategy`` field: ``on`` once taken, ``off`` before."""

    pattern: str
    """Regular expression matched (case-insensitive) against the step name."""
    field: str
    on: Any
    off: Any
    meaning: str


STEP_SETTINGS: tuple[StepSetting, ...] = (
    StepSetting(r"permute", "moe_permute_fusion", True, False,
                "fused MoE permute/unpermute (--moe-permute-fusion)"),
    StepSetting(r"router fusion", "moe_router_fusion", True, False,
                "fused router top-k and aux-loss scores (--moe-router-fusion)"),
    StepSetting(r"^cuda graphs?$", "cuda_graphs", "attention", "none",
                "CUDA graphs of the attention block (--cuda-graph-scope attn)"),
    StepSetting(r"fuse quantization to normali[sz]ation", "fp8_fused_casts", True, False,
                "FP8 quantization fused into the norm kernel"),
)
"""Step names with a modelled mechanism (frameworks.md §1.4-1.6)."""

STATED_IN_COLUMNS = (r"^baseline$", r"deepep", r"hybridep", r"recompute")
"""The baseline, and steps whose setting the row's own columns state (framework: dispatcher;
recompute)."""


def history_step(row: Mapping[str, str | None]) -> str | None:
    """The optimization step a row's notes name (``Cumulative optimization step "NAME"``)."""
    found = _STEP.search(cell_text(row, "notes"))
    return found.group(1).strip() if found else None


def _table_key(row: Mapping[str, str | None]) -> tuple[str, str]:
    table = cell_text(row, "table_ref").split("(row")[0].strip()
    return cell_text(row, "url"), table


def annotate_histories(rows: Iterable[Mapping[str, str | None]]) -> list[dict[str, str | None]]:
    """The rows, each cumulative-history row with ``STEPS_TAKEN`` and ``STEPS_TO_COME`` added
    (module docstring); other rows unchanged."""
    out = [dict(row) for row in rows]
    tables: dict[tuple[str, str], list[int]] = {}
    for index, row in enumerate(out):
        if history_step(row) is not None:
            tables.setdefault(_table_key(row), []).append(index)
    for members in tables.values():
        steps = [history_step(out[i]) or "" for i in members]
        for position, index in enumerate(members):
            out[index][STEPS_TAKEN] = SEPARATOR.join(steps[: position + 1])
            out[index][STEPS_TO_COME] = SEPARATOR.join(steps[position + 1:])
    return out


def _split(text: str) -> list[str]:
    return [part.strip() for part in text.split(SEPARATOR.strip()) if part.strip()]


def history_settings(row: Mapping[str, str | None], notes: list[str]) -> dict[str, Any]:
    """``Strategy`` fields of the steps taken and to come (module docstring); {} for a row that
    is not part of a cumulative history."""
    own = history_step(row)
    if own is None:
        return {}
    taken = _split(cell_text(row, STEPS_TAKEN)) or [own]
    to_come = _split(cell_text(row, STEPS_TO_COME))
    fields: dict[str, Any] = {}
    unmodelled: list[str] = []
    for steps, done in ((to_come, False), (taken, True)):
        for step in steps:
            setting = next((s for s in STEP_SETTINGS
                            if re.search(s.pattern, step, re.IGNORECASE)), None)
            if setting is not None:
                fields[setting.field] = setting.on if done else setting.off
            elif done and not any(re.search(p, step, re.IGNORECASE) for p in STATED_IN_COLUMNS):
                unmodelled.append(step)
    if fields:
        notes.append("optimization history (row): " + ", ".join(
            f"{name}={value}" for name, value in sorted(fields.items())))
    if unmodelled:
        notes.append("optimization steps with no modelled mechanism: " + "; ".join(unmodelled))
    return fields
