"""Model catalog: named architectures, HF ``config.json`` files and ModelSpec YAML/JSON files.

``load_model`` accepts

- a catalog slug (``llama-3.1-405b``), an alias or common spelling (``Llama 3.1 405B``,
  ``meta-llama/Llama-3.1-405B``, ``LLAMA3-405B``; see ``catalog/data/models.yaml``);
- a path to a Hugging Face ``config.json`` (or a directory holding one): detected by a
  ``model_type`` or ``architectures`` key, mapped by ``perfcast.catalog.hf_config``;
- a path to a YAML/JSON file whose keys are ``ModelSpec`` fields (``name`` defaults to the
  file stem).

Catalog entries are the verbatim reference JSONs in ``catalog/data/models`` (from
/work/shared/reference/models, each with ``_source`` and ``_notes``) plus ``models.yaml``
(published parameter counts from INDEX.md, aliases, documented fills). Loads are cached.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

from perfcast.catalog.files import (
    DATA_DIR,
    DATA_SUFFIXES,
    build_spec,
    read_mapping,
    strip_private,
)
from perfcast.catalog.hf_config import model_from_hf_config
from perfcast.catalog.resolve import NameIndex
from perfcast.errors import InputError
from perfcast.specs.model import ModelSpec

MODELS_DIR = DATA_DIR / "models"
MODELS_INDEX = DATA_DIR / "models.yaml"
BILLION = 1e9
HF_MARKER_KEYS = ("model_type", "architectures")
"""A file with either key is a Hugging Face config; otherwise it holds ModelSpec fields."""


@dataclass(frozen=True)
class _Entry:
    """One row of models.yaml."""

    published_params: float
    aliases: tuple[str, ...]
    fill: dict[str, Any]
    fill_source: str | None


@lru_cache(maxsize=1)
def _entries() -> dict[str, _Entry]:
    """models.yaml rows, checked against the JSON files present (one row per file)."""
    rows = read_mapping(MODELS_INDEX)["models"]
    files = {p.stem for p in MODELS_DIR.glob("*.json")}
    if set(rows) != files:
        raise RuntimeError(
            f"catalog/data/models.yaml and models/*.json disagree: only in yaml "
            f"{sorted(set(rows) - files)}, only as json {sorted(files - set(rows))}"
        )
    return {
        slug: _Entry(
            published_params=float(row["published_params_B"]) * BILLION,
            aliases=tuple(row.get("aliases") or ()),
            fill=dict(row.get("fill") or {}),
            fill_source=row.get("fill_source"),
        )
        for slug, row in rows.items()
    }


@lru_cache(maxsize=1)
def _index() -> NameIndex:
    return NameIndex("model", {slug: e.aliases for slug, e in _entries().items()})


@cache
def _load_slug(slug: str) -> ModelSpec:
    """The catalog model ``slug`` (cached: specs are frozen)."""
    entry = _entries()[slug]
    path = MODELS_DIR / f"{slug}.json"
    raw = read_mapping(path)
    config = {**entry.fill, **raw}
    source = f"perfcast catalog {slug}: {raw.get('_source', path.name)}"
    if entry.fill:
        filled = ", ".join(f"{k}={v}" for k, v in entry.fill.items())
        source += f" [filled {filled}: {entry.fill_source}]"
    spec = model_from_hf_config(config, name=slug, source=source)
    return spec.model_copy(update={"published_params": entry.published_params})


def model_names() -> list[str]:
    """Catalog slugs, sorted."""
    return list(_index().slugs)


def list_models() -> list[ModelSpec]:
    """Every catalog model, sorted by slug."""
    return [_load_slug(slug) for slug in model_names()]


def resolve_model_name(name: str) -> str:
    """Catalog slug for a name or alias; ``InputError`` with suggestions when unknown."""
    return _index().resolve(name, field="model")


def load_model(name_or_path: str | Path) -> ModelSpec:
    """A catalog model by slug/alias, or a model file (HF config.json or ModelSpec YAML/JSON)."""
    text = str(name_or_path)
    if not text.strip():
        raise InputError("model", name_or_path, "empty model name")
    path = Path(text).expanduser()
    if isinstance(name_or_path, Path) or path.suffix.lower() in DATA_SUFFIXES:
        return load_model_file(path)
    slug = _index().find(text)
    if slug is not None:
        return _load_slug(slug)
    if path.exists():
        return load_model_file(path)
    return _load_slug(resolve_model_name(text))  # raises with suggestions


def load_model_file(path: Path) -> ModelSpec:
    """A model from a file: HF ``config.json`` (directory allowed) or ModelSpec fields."""
    if path.is_dir():
        path = path / "config.json"
    if not path.is_file():
        raise InputError("model", str(path), "file not found")
    data = read_mapping(path)
    stem = path.parent.name if path.name == "config.json" else path.stem
    if any(key in data for key in HF_MARKER_KEYS):
        return model_from_hf_config(data, name=stem or "model", source=str(path))
    fields = strip_private(data)
    fields.setdefault("name", stem)
    fields.setdefault("source", f"file {path}")
    return build_spec(ModelSpec, fields, str(path))
