"""GPU catalog: ``catalog/data/gpus.yaml`` (one entry per row of
/work/shared/reference/hardware_specs.csv) converted to SI ``GPUSpec`` once, at load.

Vendor units in the file (TFLOP/s, GB, TB/s, MiB, MHz, GB/s, Gbit/s) are converted here with
``perfcast.units``; nothing downstream sees them. ``load_gpu`` resolves catalog slugs and the
spellings used in the ground-truth CSVs (``H100 (DGX-H100)``, ``A100 80GB (Selene, DGX A100)``,
``H200 SXM 141GB``, ...) through ``perfcast.catalog.resolve``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache, lru_cache
from typing import Any

from perfcast.catalog.files import DATA_DIR, build_spec, read_mapping
from perfcast.catalog.hardware_schema import GPUFile
from perfcast.catalog.power import power_clock_exponent, power_limited_clock_Hz
from perfcast.catalog.resolve import NameIndex
from perfcast.specs.hardware import GPUSpec
from perfcast.units import GB, MEGA, TB, MiB, gbps_to_Bps, tflops_to_flops

GPUS_FILE = DATA_DIR / "gpus.yaml"

_PEAK_FIELDS = {
    "fp32": "peak_fp32_flops",
    "tf32": "peak_tf32_flops",
    "bf16": "peak_bf16_flops",
    "fp16": "peak_fp16_flops",
    "fp8": "peak_fp8_flops",
    "fp6": "peak_fp6_flops",
    "fp4": "peak_fp4_flops",
    "int8": "peak_int8_ops",
}


@dataclass(frozen=True)
class GPUInterconnect:
    """Network figures of one GPU's catalog row (SI), used to assemble systems around it."""

    gpu: str
    """GPU slug."""
    interconnect: str
    """Scale-up fabric in words (NVLink 4 via NVSwitch, xGMI mesh, ICI torus, ...)."""
    scale_up_bandwidth_Bps: float
    """Unidirectional scale-up bandwidth per GPU, bytes/s (xGMI: aggregate over peer links)."""
    scale_up_domain_gpus: int
    """GPUs in one scale-up domain."""
    scale_out_bandwidth_Bps: float
    """Unidirectional NIC bandwidth per GPU, bytes/s."""
    gpus_per_node: int
    """GPUs per server/host."""
    source: str
    """Source of the row, including any documented fill."""


def _source(row: dict[str, Any]) -> str:
    """CSV source text, with the row name and any filled values spelled out."""
    text = str(row["source"])
    if row.get("csv_row"):
        text = f"hardware_specs.csv row '{row['csv_row']}': {text}"
    if row.get("filled"):
        text += f" | filled: {row['filled']}"
    return text


def _to_spec(slug: str, row: dict[str, Any], where: str | None = None) -> GPUSpec:
    """One gpus.yaml entry or GPU file (vendor units) -> GPUSpec (SI); ``where`` names the
    entry in errors (default: the gpus.yaml entry)."""
    where = where or f"{GPUS_FILE.name} entry {slug!r}"
    row = build_spec(GPUFile, row, where).model_dump(exclude_none=True)
    fields: dict[str, Any] = {
        "name": slug,
        "display_name": row["display_name"],
        "vendor": row["vendor"],
        "generation": row["generation"],
        "hbm_capacity_bytes": float(row["hbm_GB"]) * GB,
        "hbm_bandwidth_Bps": float(row["hbm_TBps"]) * TB,
        "num_sms": row.get("num_sms"),
        "source": _source(row),
    }
    for precision, tflops in (row.get("peak_TFLOPs") or {}).items():
        if precision not in _PEAK_FIELDS:
            raise ValueError(f"gpus.yaml {slug}: unknown precision {precision!r}")
        fields[_PEAK_FIELDS[precision]] = tflops_to_flops(float(tflops))
    if row.get("boost_clock_MHz") is not None:
        fields["boost_clock_Hz"] = float(row["boost_clock_MHz"]) * MEGA
    if row.get("sustained_clock_MHz") is not None:
        fields["sustained_clock_Hz"] = float(row["sustained_clock_MHz"]) * MEGA
        fields["source"] += f" | sustained clock: {row['sustained_clock_source']}"
    if row.get("tdp_W") is not None:
        fields["tdp_W"] = float(row["tdp_W"])
        fields["source"] += f" | board power: {row['tdp_source']}"
    if row.get("power_limit_W") is not None:
        fields.update(_power_capped(slug, row, fields))
    if row.get("hbm_usable_MiB") is not None:
        fields["hbm_usable_bytes"] = float(row["hbm_usable_MiB"]) * MiB
    if row.get("hbm_usable_source"):
        fields["source"] += f" | usable HBM: {row['hbm_usable_source']}"
    if row.get("l2_cache_MiB") is not None:
        fields["l2_cache_bytes"] = float(row["l2_cache_MiB"]) * MiB
    return build_spec(GPUSpec, fields, where)


def gpu_from_entry(name: str, row: dict[str, Any], where: str) -> tuple[GPUSpec, GPUInterconnect]:
    """A GPU entry outside gpus.yaml (a user's ``--gpu FILE.yaml``, an inline system GPU):
    its spec and network figures, checked against the same schema as the catalog."""
    return _to_spec(name, row, where), _to_interconnect(name, row)


def _power_capped(slug: str, row: dict[str, Any], fields: dict[str, Any]) -> dict[str, Any]:
    """Fields of an entry run below its rated board power: the cap, and the sustained matrix
    clock lowered per ``catalog.power.power_limited_clock_Hz`` with the catalog's α."""
    rated_clock = fields.get("sustained_clock_Hz") or fields.get("boost_clock_Hz")
    if rated_clock is None or fields.get("tdp_W") is None:
        raise ValueError(f"gpus.yaml {slug}: power_limit_W needs tdp_W and a clock")
    limit = float(row["power_limit_W"])
    return {
        "power_limit_W": limit,
        "sustained_clock_Hz": float(power_limited_clock_Hz(
            rated_clock, limit, fields["tdp_W"], power_exponent())),
        "source": fields["source"] + f" | power limit {limit:g} W: {row['power_limit_source']}; "
                  f"sustained clock f_rated*(P/TDP)^alpha, alpha {power_exponent():.2f} "
                  f"({read_mapping(GPUS_FILE)['power_clock_model']['source']})",
    }


@lru_cache(maxsize=1)
def power_exponent() -> float:
    """α of f ∝ P^α from the catalog's ``power_clock_model.reference_pair`` (catalog.power)."""
    low, high = (_rows()[slug] for slug in read_mapping(GPUS_FILE)["power_clock_model"]
                 ["reference_pair"])
    return power_clock_exponent(float(low["sustained_clock_MHz"]), float(low["tdp_W"]),
                                float(high["sustained_clock_MHz"]), float(high["tdp_W"]))


def _to_interconnect(slug: str, row: dict[str, Any]) -> GPUInterconnect:
    """Scale-up / scale-out figures of one gpus.yaml entry, in SI."""
    scale_up = row["scale_up"]
    return GPUInterconnect(
        gpu=slug,
        interconnect=str(scale_up["interconnect"]),
        scale_up_bandwidth_Bps=float(scale_up["unidir_GBps"]) * GB,
        scale_up_domain_gpus=int(scale_up["domain_gpus"]),
        scale_out_bandwidth_Bps=gbps_to_Bps(float(row["scale_out_Gbps"])),
        gpus_per_node=int(row.get("gpus_per_node", 8)),
        source=_source(row),
    )


@lru_cache(maxsize=1)
def _rows() -> dict[str, dict[str, Any]]:
    return dict(read_mapping(GPUS_FILE)["gpus"])


@lru_cache(maxsize=1)
def _index() -> NameIndex:
    return NameIndex("gpu", {slug: row.get("aliases") or () for slug, row in _rows().items()})


@cache
def _load_slug(slug: str) -> GPUSpec:
    return _to_spec(slug, _rows()[slug])


def resolve_gpu_name(name: str) -> str:
    """Catalog slug for a GPU name or alias; ``InputError`` with suggestions when unknown."""
    return _index().resolve(name, field="gpu")


def find_gpu_name(name: str) -> str | None:
    """Catalog slug for a GPU name or alias; None when unknown."""
    return _index().find(name)


def load_gpu(name: str) -> GPUSpec:
    """The catalog GPU named ``name`` (slug, alias or ground-truth spelling), or a GPU file
    (``perfcast.catalog.user_hardware``), in SI units."""
    from perfcast.catalog.user_hardware import is_hardware_file, load_gpu_file

    if is_hardware_file(name):
        return load_gpu_file(name)
    return _load_slug(resolve_gpu_name(name))


def gpu_names() -> list[str]:
    """Catalog GPU slugs, sorted."""
    return list(_index().slugs)


def list_gpus() -> list[GPUSpec]:
    """Every catalog GPU, sorted by slug."""
    return [_load_slug(slug) for slug in gpu_names()]


@cache
def gpu_interconnect(name: str) -> GPUInterconnect:
    """Scale-up / scale-out figures of the catalog GPU ``name`` (SI units)."""
    slug = resolve_gpu_name(name)
    return _to_interconnect(slug, _rows()[slug])
