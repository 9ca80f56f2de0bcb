"""JSON rendering of any report with ``to_dict()``."""

from __future__ import annotations

import json
import math


def _clean(value):
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return None
        return value
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    if hasattr(value, "item"):  # numpy scalar
        return _clean(value.item())
    return value


def to_json(report_dict: dict) -> str:
    """Pretty JSON text of a report dictionary (numpy scalars and NaN made JSON-safe)."""
    return json.dumps(_clean(report_dict), indent=2)
