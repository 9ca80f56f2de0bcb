"""Catalog look-ups used while parsing ground-truth rows, injectable for tests.

``CatalogLookup`` bundles two functions, a model by name and the default system of a GPU
spelling. The default one (``default_catalog``) calls ``perfcast.catalog.models.load_model``
and ``perfcast.catalog.systems.system_for_gpu``, imported lazily, and turns "unknown name" into
``None`` so that a row can fall back to its own columns. Tests pass small stand-in specs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

from perfcast.errors import InputError
from perfcast.specs.hardware import SystemSpec
from perfcast.specs.model import ModelSpec

ModelLookup = Callable[[str], ModelSpec | None]
SystemLookup = Callable[[str], SystemSpec | None]


@dataclass(frozen=True)
class CatalogLookup:
    """Where parsed rows get catalog models and systems from."""

    model: ModelLookup
    """Catalog model for a ground-truth model name, or None when the catalog has none."""
    system: SystemLookup
    """Default system for a ground-truth ``gpu_type`` spelling, or None when unknown."""


def _catalog_model(name: str) -> ModelSpec | None:
    try:
        from perfcast.catalog.models import load_model
    except ImportError:
        return None
    try:
        return load_model(name)
    except (InputError, ValueError, OSError):
        return None


def _catalog_system(gpu_type: str) -> SystemSpec | None:
    try:
        from perfcast.catalog.systems import system_for_gpu
    except ImportError:
        return None
    try:
        return system_for_gpu(gpu_type)
    except (InputError, ValueError, OSError):
        return None


@lru_cache(maxsize=1)
def default_catalog() -> CatalogLookup:
    """The shipped catalog (``perfcast.catalog``); unknown names give None."""
    return CatalogLookup(model=_catalog_model, system=_catalog_system)


def table_lookup(
    models: dict[str, ModelSpec] | None = None, systems: dict[str, SystemSpec] | None = None
) -> CatalogLookup:
    """A lookup over fixed tables keyed by exact spelling (tests, notebooks)."""
    model_table, system_table = dict(models or {}), dict(systems or {})
    return CatalogLookup(model=model_table.get, system=system_table.get)
