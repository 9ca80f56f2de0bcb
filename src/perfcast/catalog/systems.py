"""System catalog: ``catalog/data/systems.yaml`` -> ``SystemSpec`` (SI units).

A system names a catalog GPU, its node size and scale-up domain; per-GPU bandwidths come from
that GPU's row (``perfcast.catalog.gpus.gpu_interconnect``), so each hardware number lives once.
Latencies default to the values in the file's ``defaults`` block (sourced from
/work/shared/reference/collectives.md). ``system_for_gpu`` picks the default system of a GPU, or
assembles a node from the GPU's own row when no named system exists.
"""

from __future__ import annotations

from functools import cache, lru_cache
from typing import Any

from perfcast.catalog.files import DATA_DIR, build_spec, read_mapping
from perfcast.catalog.gpus import GPUInterconnect, gpu_interconnect, load_gpu, resolve_gpu_name
from perfcast.catalog.hardware_schema import SystemFile
from perfcast.catalog.resolve import NameIndex
from perfcast.errors import InputError
from perfcast.specs.hardware import GPUSpec, SystemSpec
from perfcast.units import GB, gbps_to_Bps

SYSTEMS_FILE = DATA_DIR / "systems.yaml"
US_PER_S = 1e6
"""Microseconds per second (latencies are written in us in systems.yaml)."""
LATENCY_NOTE = "latencies: systems.yaml defaults (collectives.md sections 3, 5a, 6c)"


@lru_cache(maxsize=1)
def _document() -> dict[str, Any]:
    return read_mapping(SYSTEMS_FILE)


def _rows() -> dict[str, dict[str, Any]]:
    return dict(_document()["systems"])


@lru_cache(maxsize=1)
def _index() -> NameIndex:
    return NameIndex("system", {slug: row.get("aliases") or () for slug, row in _rows().items()})


def _latencies(row: dict[str, Any]) -> dict[str, float]:
    """Scale-up / scale-out per-hop latency in seconds (entry override, else file default)."""
    defaults = _document()["defaults"]
    return {
        "scale_up_latency_s": float(
            row.get("scale_up_latency_us", defaults["scale_up_latency_us"])
        ) / US_PER_S,
        "scale_out_latency_s": float(
            row.get("scale_out_latency_us", defaults["scale_out_latency_us"])
        ) / US_PER_S,
    }


def _topology(row: dict[str, Any]) -> dict[str, Any]:
    """Topology fields of an entry (SystemSpec defaults where the entry says nothing)."""
    fields: dict[str, Any] = {}
    if row.get("scale_up_topology") is not None:
        fields["scale_up_topology"] = str(row["scale_up_topology"])
    if row.get("scale_up_link_GBps") is not None:
        fields["scale_up_link_bandwidth_Bps"] = float(row["scale_up_link_GBps"]) * GB
    for key in ("nvls", "scale_out_nics_per_node", "pod_gpus", "pod_oversubscription"):
        if row.get(key) is not None:
            fields[key] = row[key]
    if row.get("pod_latency_us") is not None:
        fields["pod_latency_s"] = float(row["pod_latency_us"]) / US_PER_S
    return fields


def build_system(slug: str, row: dict[str, Any], gpu: GPUSpec, link: GPUInterconnect,
                 where: str) -> SystemSpec:
    """One system entry (systems.yaml or a ``--system`` file) -> SystemSpec, bandwidths from
    its GPU's row unless the entry overrides them; ``where`` names the entry in errors."""
    row = build_spec(SystemFile, {**row, "gpu": gpu.name}, where).model_dump(exclude_none=True)
    scale_up = link.scale_up_bandwidth_Bps
    if row.get("scale_up_unidir_GBps") is not None:
        scale_up = float(row["scale_up_unidir_GBps"]) * GB
    scale_out = link.scale_out_bandwidth_Bps
    if row.get("scale_out_Gbps") is not None:
        scale_out = gbps_to_Bps(float(row["scale_out_Gbps"]))
    fields = {
        "name": slug,
        "gpu": gpu,
        "gpus_per_node": int(row["gpus_per_node"]),
        "scale_up_domain_gpus": int(row["scale_up_domain_gpus"]),
        "scale_up_bandwidth_Bps": scale_up,
        "scale_out_bandwidth_Bps": scale_out,
        **_latencies(row),
        **_topology(row),
        "source": "; ".join(" ".join(str(part).split()) for part in (
            row["source"], LATENCY_NOTE, row.get("nvls_source")) if part),
    }
    return build_spec(SystemSpec, fields, where)


def _build(slug: str, row: dict[str, Any]) -> SystemSpec:
    """One systems.yaml entry -> SystemSpec (its GPU from the catalog)."""
    gpu = load_gpu(row["gpu"])
    return build_system(slug, row, gpu, gpu_interconnect(gpu.name),
                        f"{SYSTEMS_FILE.name} entry {slug!r}")


@cache
def _load_slug(slug: str) -> SystemSpec:
    return _build(slug, _rows()[slug])


def _sized(system: SystemSpec, num_gpus: int | None) -> SystemSpec:
    """``system`` sized to ``num_gpus`` (a positive integer) when given."""
    if num_gpus is None:
        return system
    if isinstance(num_gpus, bool) or not isinstance(num_gpus, int) or num_gpus < 1:
        raise InputError("num_gpus", num_gpus, "must be a positive integer")
    return system.with_num_gpus(num_gpus)


def resolve_system_name(name: str) -> str:
    """Catalog slug for a system name or alias; ``InputError`` with suggestions when unknown."""
    return _index().resolve(name, field="system")


def load_system(name: str, num_gpus: int | None = None, gpu: str | None = None) -> SystemSpec:
    """The system ``name``, optionally sized to ``num_gpus`` GPUs: a catalog system (slug or
    alias), a system or GPU file (``perfcast.catalog.user_hardware``), or a catalog GPU (its
    default system, else the node assembled from its row). ``gpu`` (a catalog GPU or a GPU
    file, ``--gpu``) replaces the system's GPU and keeps its topology and bandwidths."""
    if gpu is not None:
        from perfcast.catalog.user_hardware import with_gpu

        return with_gpu(load_system(name, num_gpus), gpu)
    from perfcast.catalog.user_hardware import is_hardware_file, load_system_file

    if is_hardware_file(name):
        return _sized(load_system_file(name), num_gpus)
    slug = _index().find(name)
    if slug is not None:
        return _sized(_load_slug(slug), num_gpus)
    from perfcast.catalog.gpus import find_gpu_name

    if find_gpu_name(name) is not None:
        return system_for_gpu(name, num_gpus)
    raise _unknown_system(name)


def _unknown_system(name: str) -> InputError:
    """The error for a name that is no system, GPU or file, with the catalog's suggestions."""
    reason = "unknown system"
    try:
        resolve_system_name(name)
    except InputError as exc:
        reason = exc.reason
    return InputError("system", name, f"{reason}; or a catalog GPU (perfcast systems), or a "
                      "system/GPU YAML file (perfcast catalog template system|gpu)")


def system_names() -> list[str]:
    """Catalog system slugs, sorted."""
    return list(_index().slugs)


def list_systems() -> list[SystemSpec]:
    """Every catalog system, sorted by slug."""
    return [_load_slug(slug) for slug in system_names()]


@lru_cache(maxsize=1)
def _default_systems() -> dict[str, str]:
    """GPU slug -> slug of its default system (``default_for_gpu: true``), one per GPU."""
    defaults: dict[str, str] = {}
    for slug, row in _rows().items():
        if not row.get("default_for_gpu"):
            continue
        gpu = resolve_gpu_name(row["gpu"])
        if gpu in defaults:
            raise ValueError(f"systems.yaml: {defaults[gpu]!r} and {slug!r} both default for {gpu}")
        defaults[gpu] = slug
    return defaults


@cache
def _node_for_gpu(gpu_slug: str) -> SystemSpec:
    """A node assembled from the catalog GPU row's own scale-up / scale-out figures."""
    return node_for_gpu(load_gpu(gpu_slug), gpu_interconnect(gpu_slug), f"gpus.yaml entry {gpu_slug!r}")


def node_for_gpu(gpu: GPUSpec, link: GPUInterconnect, where: str) -> SystemSpec:
    """The generic system of one GPU: a node of ``link.gpus_per_node`` GPUs, its scale-up domain
    and NIC rate from the GPU's own row, latencies from the systems.yaml defaults."""
    fields = {
        "name": f"{gpu.name}-node",
        "gpu": gpu,
        "gpus_per_node": link.gpus_per_node,
        "scale_up_domain_gpus": link.scale_up_domain_gpus,
        "scale_up_bandwidth_Bps": link.scale_up_bandwidth_Bps,
        "scale_out_bandwidth_Bps": link.scale_out_bandwidth_Bps,
        **_latencies({}),
        "source": f"assembled from {where} ({link.interconnect}); {LATENCY_NOTE}; "
        f"{link.source}",
    }
    return build_spec(SystemSpec, fields, where)


def system_for_gpu(gpu_name: str, num_gpus: int | None = None) -> SystemSpec:
    """Default system for a GPU name (e.g. 'H100 (DGX-H100)' -> dgx-h100, 'A100 40GB' ->
    dgx-a100-40gb); GPUs without a named system get ``<gpu>-node`` from their own row."""
    gpu_slug = resolve_gpu_name(gpu_name)
    slug = _default_systems().get(gpu_slug)
    system = _load_slug(slug) if slug is not None else _node_for_gpu(gpu_slug)
    return _sized(system, num_gpus)
