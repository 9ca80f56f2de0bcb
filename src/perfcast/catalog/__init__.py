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

from perfcast.catalog.frameworks import framework_names, load_framework_profile
from perfcast.catalog.gpus import gpu_names, list_gpus, load_gpu
from perfcast.catalog.hf_config import model_from_hf_config
from perfcast.catalog.models import list_models, load_model, model_names
from perfcast.catalog.systems import list_systems, load_system, system_for_gpu, system_names

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
