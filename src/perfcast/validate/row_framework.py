"""Defaults for what a ground-truth row leaves unstated, from its framework's profile.

The row's ``framework`` column (and the release in it or in ``version_or_date``) selects a
profile in ``catalog/data/frameworks/training`` through the same resolution and the same pure
``apply_framework_profile`` as ``perfcast train --framework``; the row's stated columns are the
explicit fields and always win. Each default used becomes a note ("framework default: ...").

A column that joins frameworks with ``+`` ("Megatron-LM + DeepSpeed ZeRO-3": DeepSpeed's
runtime wrapping Megatron-LM's model code) takes the first one's defaults, then fills what it
left unset from each further one (here DeepSpeed's ZeRO-3 prefetch and live-parameter limits).

A row whose framework matches no profile (metaseq, HAI-LLM, JAX) gets only ``ROW_FALLBACKS``:
Transformer Engine's own FP8 default (delayed scaling, ``te.common.recipe.DelayedScaling``) and
weights cast in every forward (no framework known to cache them); everything else is the
``Strategy`` default.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from perfcast.catalog.framework_defaults import RunFacts, apply_framework_profile
from perfcast.catalog.frameworks import ResolvedFramework, framework_of_text
from perfcast.validate.csv_fields import cell_text

ROW_FALLBACKS: dict[str, Any] = {"fp8_recipe": "delayed", "fp8_weight_cache": False}
"""FP8 fields of an FP8 row whose framework has no FP8 default (see the module docstring)."""


def row_framework(row: Mapping[str, str | None]) -> ResolvedFramework | None:
    """The profile (and release) the row's framework column names; None if none matches."""
    return framework_of_text(cell_text(row, "framework"), cell_text(row, "version_or_date"))


def added_frameworks(row: Mapping[str, str | None]) -> list[ResolvedFramework]:
    """Profiles named after a top-level ``+`` (not inside parentheses) in a framework column
    whose first framework has a profile (module docstring), in order."""
    if row_framework(row) is None:
        return []
    parts = re.sub(r"\([^)]*\)", " ", cell_text(row, "framework")).split("+")[1:]
    found = (framework_of_text(part.strip(), cell_text(row, "version_or_date")) for part in parts)
    return [framework for framework in found if framework is not None]


def framework_fields(
    row: Mapping[str, str | None], explicit: Mapping[str, Any], facts: RunFacts,
    notes: list[str],
) -> dict[str, Any]:
    """Strategy fields the row's framework profile (then ``ROW_FALLBACKS``) adds to
    ``explicit`` (the fields the row states); notes record every default used."""
    first = row_framework(row)
    fields: dict[str, Any] = {}
    for framework in ([first] if first else []) + added_frameworks(row):
        applied = apply_framework_profile(framework, {**explicit, **fields}, facts)
        fields.update({k: v for k, v in applied.fields.items() if k not in fields})
        notes.extend(f"framework default: {a.sentence}" for a in applied.assumptions)
    if facts.precision == "fp8":
        for name, value in ROW_FALLBACKS.items():
            if name not in explicit and name not in fields:
                fields[name] = value
                notes.append(f"{name} not stated and no framework default: {value}")
    return fields
