"""Catalog look-ups used while parsing ground-truth rows, injectable for tests.

``CatalogLookup`` bundles two functions, a model by name and the default system of a GPU
spelling. The default one (``default_catalog``) reads the free-text name through the normalization
layer (``perfcast.validate.vocabulary_names``: vendor prefixes, memory sizes, system names,
release suffixes, architecture twins) and loads the catalog entry, imported lazily. An unknown
model gives ``None`` so that a row can fall back to its own columns; an unknown GPU raises
``VocabularyError`` naming the column, the value and the closest catalog names. Tests pass
small stand-in specs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache

from perfcast.errors import InputError
from perfcast.specs.hardware import SystemSpec
from perfcast.specs.model import ModelSpec

ModelLookup = Callable[[str], ModelSpec | None]
SystemLookup = Callable[[str], SystemSpec | None]
NotesLookup = Callable[[str, str], tuple[str, ...]]


@dataclass(frozen=True)
class CatalogLookup:
    """Where parsed rows get catalog models and systems from."""

    model: ModelLookup
    """Catalog model for a ground-truth model name, or None when the catalog has none."""
    system: SystemLookup
    """Default system for a ground-truth ``gpu_type`` spelling, or None when unknown."""
    notes: NotesLookup = field(default=lambda column, text: ())
    """What reading a ``model`` / ``gpu_type`` text assumed (suffix dropped, twin used, memory
    or power limit the catalog entry does not have), one line each."""


def _catalog_model(name: str) -> ModelSpec | None:
    from perfcast.catalog.models import load_model
    from perfcast.validate.vocabulary import VocabularyError
    from perfcast.validate.vocabulary_names import read_model_name

    try:
        found = read_model_name(name)
    except VocabularyError:
        return None
    if found is None:
        return None
    try:
        return load_model(found.catalog)
    except (InputError, ValueError, OSError):
        return None


def _catalog_system(gpu_type: str) -> SystemSpec | None:
    """The system a ``gpu_type`` text names; ``VocabularyError`` when it names none."""
    from perfcast.validate.vocabulary_names import read_gpu_type

    found = read_gpu_type(gpu_type)
    return None if found is None else found.system_spec


def _vocabulary_notes(column: str, text: str) -> tuple[str, ...]:
    """Notes of the normalization layer for a ``model`` or ``gpu_type`` text (none if unread)."""
    from perfcast.validate.vocabulary import VocabularyError
    from perfcast.validate.vocabulary_names import read_gpu_type, read_model_name

    reader = {"model": read_model_name, "gpu_type": read_gpu_type}.get(column)
    try:
        found = reader(text) if reader is not None else None
    except VocabularyError:
        return ()
    return found.notes if found is not None else ()


@lru_cache(maxsize=1)
def default_catalog() -> CatalogLookup:
    """The shipped catalog (``perfcast.catalog``); unknown names give None."""
    return CatalogLookup(model=_catalog_model, system=_catalog_system, notes=_vocabulary_notes)


def table_lookup(
    models: dict[str, ModelSpec] | None = None, systems: dict[str, SystemSpec] | None = None
) -> CatalogLookup:
    """A lookup over fixed tables keyed by exact spelling (tests, notebooks)."""
    model_table, system_table = dict(models or {}), dict(systems or {})
    return CatalogLookup(model=model_table.get, system=system_table.get)
