"""Reading a calibration YAML file into a frozen pydantic model (one error names the file)."""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from perfcast.errors import InputError, format_validation_error
from perfcast.yaml_load import MalformedYaml, safe_load

CALIBRATION_DIR = Path(__file__).parent
"""Shipped calibration files: ``kernel_roofline.yaml``, ``comm_alpha_beta.yaml``."""

ModelT = TypeVar("ModelT", bound=BaseModel)


def load_yaml_model(cls: type[ModelT], path: Path) -> ModelT:
    """Parse ``path`` (YAML mapping) and validate it as ``cls``.

    Raises ``InputError`` naming the file for unreadable, malformed or invalid content.
    """
    try:
        data = safe_load(path.read_text(encoding="utf-8"))
    except (OSError, MalformedYaml) as exc:
        raise InputError("calibration file", str(path), f"cannot read: {exc}") from exc
    if not isinstance(data, dict):
        raise InputError("calibration file", str(path), "top level is not a mapping")
    try:
        return cls.model_validate(data)
    except ValidationError as exc:
        raise InputError("calibration file", str(path), format_validation_error(exc)) from exc
