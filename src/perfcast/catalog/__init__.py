"""Named presets as data files: models, GPUs and systems, plus Hugging Face config import.

- ``load_model`` / ``list_models`` / ``model_names``: ``perfcast.catalog.models``
- ``load_gpu`` / ``list_gpus`` / ``gpu_names``: ``perfcast.catalog.gpus``
- ``load_system`` / ``list_systems`` / ``system_names`` / ``system_for_gpu``:
  ``perfcast.catalog.systems``
- ``model_from_hf_config``: ``perfcast.catalog.hf_config``
- ``load_framework_profile`` / ``framework_names``: ``perfcast.catalog.frameworks`` (training
  framework defaults; applied by ``perfcast.catalog.framework_defaults``)

Data lives in ``catalog/data`` in vendor units with a ``source`` per entry; loaders return typed,
frozen specs in SI units. Name lookup is shared (``perfcast.catalog.resolve``).
"""

from importlib import import_module

_EXPORTS = {
    "framework_names": "frameworks", "load_framework_profile": "frameworks",
    "gpu_names": "gpus", "list_gpus": "gpus", "load_gpu": "gpus",
    "model_from_hf_config": "hf_config",
    "list_models": "models", "load_model": "models", "model_names": "models",
    "list_systems": "systems", "load_system": "systems", "system_for_gpu": "systems",
    "system_names": "systems",
}
"""Exported name -> submodule, imported on first use (PEP 562): ``import perfcast.catalog.models``
then costs only that module, not every loader (part of a ``perfcast train`` process's time)."""


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(import_module(f"perfcast.catalog.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'perfcast.catalog' has no attribute {name!r}")


__all__ = [
    "framework_names",
    "gpu_names",
    "list_gpus",
    "list_models",
    "list_systems",
    "load_framework_profile",
    "load_gpu",
    "load_model",
    "load_system",
    "model_from_hf_config",
    "model_names",
    "system_for_gpu",
    "system_names",
]
