"""Pipeline layout and multi-token-prediction depth a ground-truth row states in its notes.

Two facts of a Megatron-Core run that change where its layers sit and how much the last
pipeline stage computes, read the same way from every row:

- ``PP layout <LAYOUT>`` (Megatron-Core ``--pipeline-model-parallel-layout``, frameworks.md
  §1.2; symbols ``E t m L | ( ) * N``, ``perfcast.specs.pipeline_layout``) ->
  ``Strategy.pipeline_layout``, used when it parses and has one segment per pipeline chunk
  (pp·vpp); otherwise the row keeps the framework's split and the note says why.
- ``MTP N layer(s)`` / ``MTP depth N`` (``--mtp-num-layers``; DeepSeek-V3 report §2.2: one
  MTP module of a full Transformer block, its own projection and the shared output head) ->
  ``Strategy.mtp_num_layers``, at most the model's own ``num_nextn_predict_layers``. The MTP
  modules run on the last pipeline stage (``graph.stage.mtp_extra_ops``).

A row that states neither gets {} from both readers: nothing is assumed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from perfcast.specs.pipeline_layout import parse_pipeline_layout
from perfcast.validate.csv_fields import cell_text

_LAYOUT = re.compile(r"\bpp layout\s+([Etm L|()*,0-9]+?)(?=[,;.]?\s|[,;.]?$)", re.IGNORECASE)
_MTP = re.compile(r"\bmtp\s+(?:depth\s+)?(\d+)(?:\s+layers?)?\b", re.IGNORECASE)


def stated_pipeline_layout(row: Mapping[str, str | None], num_chunks: int,
                           notes: list[str]) -> dict[str, Any]:
    """``{"pipeline_layout": LAYOUT}`` where the notes state a layout with ``num_chunks``
    (pp·vpp) segments; {} (with a note when one was stated) otherwise."""
    found = _LAYOUT.search(cell_text(row, "notes"))
    if found is None or num_chunks <= 1:
        return {}
    layout = found.group(1).strip()
    try:
        segments = parse_pipeline_layout(layout)
    except ValueError as exc:
        notes.append(f"stated PP layout {layout!r} not used: {exc}")
        return {}
    if len(segments) != num_chunks:
        notes.append(f"stated PP layout {layout!r} not used: {len(segments)} segments for "
                     f"pp*vpp={num_chunks} chunks")
        return {}
    notes.append(f"pipeline layout {layout} (row notes)")
    return {"pipeline_layout": layout}


def stated_mtp_layers(row: Mapping[str, str | None], model_mtp_layers: int,
                      notes: list[str]) -> dict[str, Any]:
    """``{"mtp_num_layers": N}`` where the notes state an MTP depth the model has (N ≤ its
    ``num_nextn_predict_layers``); {} (with a note when the model has fewer) otherwise."""
    found = _MTP.search(cell_text(row, "notes"))
    if found is None:
        return {}
    depth = int(found.group(1))
    if depth > model_mtp_layers:
        notes.append(f"stated MTP depth {depth} not used: the model has "
                     f"{model_mtp_layers} MTP module(s)")
        return {}
    notes.append(f"MTP depth {depth} trained on the last pipeline stage (row notes)")
    return {"mtp_num_layers": depth}
