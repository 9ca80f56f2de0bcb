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
from perfcast.catalog.gpus import gpu_interconnect, load_gpu, resolve_gpu_name
from perfcast.catalog.resolve import NameIndex
from perfcast.errors import InputError
from perfcast.specs.hardware import SystemSpec
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


def _build(slug: str, row: dict[str, Any]) -> SystemSpec:
    """One systems.yaml entry -> SystemSpec, bandwidths from the GPU's catalog row."""
    gpu = load_gpu(row["gpu"])
    link = gpu_interconnect(gpu.name)
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
    return build_spec(SystemSpec, fields, f"{SYSTEMS_FILE.name} entry {slug!r}")


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


def load_system(name: str, num_gpus: int | None = None) -> SystemSpec:
    """The catalog system ``name`` (slug or alias), optionally sized to ``num_gpus`` GPUs."""
    return _sized(_load_slug(resolve_system_name(name)), num_gpus)


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
    """A node assembled from the GPU row's own scale-up / scale-out figures."""
    link = gpu_interconnect(gpu_slug)
    fields = {
        "name": f"{gpu_slug}-node",
        "gpu": load_gpu(gpu_slug),
        "gpus_per_node": link.gpus_per_node,
        "scale_up_domain_gpus": link.scale_up_domain_gpus,
        "scale_up_bandwidth_Bps": link.scale_up_bandwidth_Bps,
        "scale_out_bandwidth_Bps": link.scale_out_bandwidth_Bps,
        **_latencies({}),
        "source": f"assembled from gpus.yaml {gpu_slug} ({link.interconnect}); {LATENCY_NOTE}; "
        f"{link.source}",
    }
    return build_spec(SystemSpec, fields, f"gpus.yaml entry {gpu_slug!r}")


def system_for_gpu(gpu_name: str, num_gpus: int | None = None) -> SystemSpec:
    """Default system for a GPU name (e.g. 'H100 (DGX-H100)' -> dgx-h100, 'A100 40GB' ->
    dgx-a100-40gb); GPUs without a named system get ``<gpu>-node`` from their own row."""
    gpu_slug = resolve_gpu_name(gpu_name)
    slug = _default_systems().get(gpu_slug)
    system = _load_slug(slug) if slug is not None else _node_for_gpu(gpu_slug)
    return _sized(system, num_gpus)
