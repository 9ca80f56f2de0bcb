"""perfcast: forecast LLM training and inference performance on GPU clusters.

The public API is imported lazily so that ``perfcast --help`` stays fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_LAZY = {
    "ModelSpec": "perfcast.specs.model",
    "GPUSpec": "perfcast.specs.hardware",
    "SystemSpec": "perfcast.specs.hardware",
    "Strategy": "perfcast.specs.strategy",
    "Workload": "perfcast.specs.workload",
    "load_model": "perfcast.catalog.models",
    "load_gpu": "perfcast.catalog.gpus",
    "load_system": "perfcast.catalog.systems",
    "estimate_memory": "perfcast.memory.estimate",
    "estimate_training": "perfcast.estimate.training",
}

if TYPE_CHECKING:  # pragma: no cover
    from perfcast.catalog.gpus import load_gpu
    from perfcast.catalog.models import load_model
    from perfcast.catalog.systems import load_system
    from perfcast.memory.estimate import estimate_memory
    from perfcast.specs.hardware import GPUSpec, SystemSpec
    from perfcast.specs.model import ModelSpec
    from perfcast.specs.strategy import Strategy
    from perfcast.specs.workload import Workload


def __getattr__(name: str) -> Any:
    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError(f"module 'perfcast' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module_name), name)


__all__ = sorted(_LAZY)
