"""One's own hardware: ``--system FILE.yaml`` and ``--gpu FILE.yaml``.

A GPU file has the fields of a ``gpus.yaml`` entry and a system file those of a ``systems.yaml``
entry (``perfcast.catalog.hardware_schema``; ``perfcast catalog template gpu|system`` prints a
filled-in example). A system file's ``gpu`` is a catalog GPU name, a GPU file path (relative to
the system file) or a GPU entry written inline. A GPU file given where a system is expected
becomes the generic node of that GPU (``perfcast.catalog.systems.node_for_gpu``). Every number
is the user's; the spec's ``source`` carries the file's own ``source`` text and the path.
"""

from __future__ import annotations

from pathlib import Path

from perfcast.catalog.files import DATA_SUFFIXES, build_spec, read_mapping
from perfcast.catalog.gpus import GPUInterconnect, gpu_from_entry, gpu_interconnect, load_gpu
from perfcast.catalog.hardware_schema import GPUFile, SystemFile
from perfcast.errors import InputError
from perfcast.specs.hardware import GPUSpec, SystemSpec

MAX_PATH_CHARS = 4096
"""Longest path accepted (Linux PATH_MAX)."""
GPU_MARKER = "hbm_GB"
"""A key only a GPU entry has: a file with it and no ``gpu`` key is a GPU file."""


def is_hardware_file(name: str) -> bool:
    """True when ``name`` names a file rather than a catalog entry: a JSON/YAML suffix, or a
    path separator in a name that exists."""
    if len(name) > MAX_PATH_CHARS:
        raise InputError("path", name[:60] + "...", f"longer than {MAX_PATH_CHARS} characters")
    path = Path(name).expanduser()
    return path.suffix.lower() in DATA_SUFFIXES or ("/" in name and path.exists())


def _existing(name: str | Path, field: str) -> Path:
    path = Path(name).expanduser()
    if not path.is_file():
        raise InputError(field, str(name), "file not found")
    return path


def _gpu_from_file(path: Path) -> tuple[GPUSpec, GPUInterconnect]:
    data = read_mapping(path)
    where = f"gpu file {path}"
    entry = build_spec(GPUFile, data, where)
    row = entry.model_dump(exclude_none=True)
    row["source"] = f"{entry.source} (from {path})"
    return gpu_from_entry(path.stem, row, where)


def load_gpu_file(name: str | Path) -> GPUSpec:
    """The GPU described by a GPU file (``--gpu FILE.yaml``)."""
    return _gpu_from_file(_existing(name, "gpu"))[0]


def load_system_file(name: str | Path) -> SystemSpec:
    """The system described by a system file, or the generic node of a GPU file."""
    from perfcast.catalog.systems import build_system, node_for_gpu

    path = _existing(name, "system")
    data = read_mapping(path)
    if "gpu" not in data and GPU_MARKER in data:
        gpu, link = _gpu_from_file(path)
        return node_for_gpu(gpu, link, f"gpu file {path}")
    where = f"system file {path}"
    entry = build_spec(SystemFile, data, where)
    gpu, link = _system_gpu(entry.gpu, path)
    row = entry.model_dump(exclude_none=True, exclude={"gpu", "name"})
    row["source"] = f"{entry.source} (from {path})"
    return build_system(entry.name or path.stem, row, gpu, link, where)


def _system_gpu(gpu: str | GPUFile, system_path: Path) -> tuple[GPUSpec, GPUInterconnect]:
    """The GPU a system file names: inline entry, GPU file (relative to the system file) or
    catalog name."""
    if isinstance(gpu, GPUFile):
        row = gpu.model_dump(exclude_none=True)
        return gpu_from_entry(f"{system_path.stem}-gpu", row, f"system file {system_path} gpu")
    if is_hardware_file(gpu):
        path = Path(gpu).expanduser()
        path = path if path.is_absolute() else system_path.parent / path
        return _gpu_from_file(_existing(path, "gpu"))
    spec = load_gpu(gpu)
    return spec, gpu_interconnect(spec.name)


def with_gpu(system: SystemSpec, gpu_name: str) -> SystemSpec:
    """``system`` with its GPU replaced by ``gpu_name`` (a catalog GPU or a GPU file):
    ``--gpu`` next to ``--system`` keeps the system's topology and bandwidths."""
    gpu = load_gpu(gpu_name)
    fields = {**dict(system), "gpu": gpu, "name": f"{system.name}+{gpu.name}",
              "source": f"{system.source}; GPU replaced by {gpu.name} (--gpu)"}
    return build_spec(SystemSpec, fields, f"system {system.name!r} with --gpu {gpu_name}")
