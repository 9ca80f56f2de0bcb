"""Reading catalog and user files (JSON/YAML) and building typed specs from them.

Every failure becomes one ``InputError`` that names the field (or the file) and the value:
unreadable or malformed files, a document that is not a mapping, and pydantic validation errors
(the first offending field is named).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from perfcast.errors import InputError
from perfcast.yaml_load import MalformedYaml, safe_load

SpecT = TypeVar("SpecT", bound=BaseModel)

DATA_DIR = Path(__file__).parent / "data"
"""Shipped catalog data: models/*.json, gpus.yaml, systems.yaml, models.yaml."""

DATA_SUFFIXES = (".json", ".yaml", ".yml")


def read_mapping(path: Path) -> dict[str, Any]:
    """Parse a JSON or YAML file whose top level is a mapping."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError("path", str(path), f"cannot read file: {exc.strerror or exc}") from exc
    except UnicodeDecodeError:
        raise InputError("path", str(path), "is not UTF-8 text (expected JSON or YAML)") from None
    try:
        if path.suffix.lower() == ".json":
            data = json.loads(text)
        else:
            data = safe_load(text)
    except (json.JSONDecodeError, MalformedYaml) as exc:
        first_line = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise InputError("path", str(path), f"malformed {path.suffix[1:]}: {first_line}") from exc
    if not isinstance(data, dict):
        raise InputError(
            "path", str(path), f"expected a mapping at the top level, got {type(data).__name__}"
        )
    return data


def build_spec(cls: type[SpecT], fields: dict[str, Any], where: str) -> SpecT:
    """``cls(**fields)``; a validation error becomes ``InputError`` naming the first bad field."""
    try:
        return cls(**fields)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err.get("loc", ())) or cls.__name__
        msg = str(err.get("msg", "invalid value")).removeprefix("Value error, ")
        value = err.get("input")
        if isinstance(value, dict):
            value = fields.get(loc, None) if loc in fields else "<mapping>"
        raise InputError(loc, value, f"{msg} ({cls.__name__} from {where})") from exc


def strip_private(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` without keys starting with ``_`` (``_source``, ``_notes``, ``_name_or_path``)."""
    return {k: v for k, v in data.items() if not k.startswith("_")}
