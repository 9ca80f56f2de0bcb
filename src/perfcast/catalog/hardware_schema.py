"""Schema of a hardware entry: one GPU (``gpus.yaml`` entries, ``--gpu FILE.yaml``) and one
system (``systems.yaml`` entries, ``--system FILE.yaml``), in the catalog's vendor units.

The shipped catalog files and a user's own files are checked by the same pydantic models, so a
field means the same thing in both; a wrong field is one ``InputError`` naming it (via
``perfcast.catalog.files.build_spec``). Units are those of the catalog files (TFLOP/s, GB, TB/s,
MiB, MHz, GB/s, Gbit/s, us, W); ``perfcast.catalog.gpus`` / ``systems`` convert them to SI once.
``perfcast catalog template gpu|system`` prints a filled-in example of each.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt, ValidationInfo, field_validator

from perfcast.specs.hardware import Generation, Precision, ScaleUpTopology, Vendor

_STRICT = ConfigDict(frozen=True, extra="forbid")


class ScaleUpFile(BaseModel):
    """The GPU's scale-up fabric (NVLink / xGMI / ICI / on-die Ethernet)."""

    model_config = _STRICT
    interconnect: str = Field(min_length=1, description="The fabric in words.")
    unidir_GBps: PositiveFloat = Field(
        description="Scale-up bandwidth per GPU, one direction, 10^9 B/s (xGMI: aggregate over "
        "the peer links).")
    domain_gpus: PositiveInt = Field(description="GPUs in one scale-up domain.")


class GPUFile(BaseModel):
    """One accelerator, as written in ``gpus.yaml`` or a ``--gpu FILE.yaml``."""

    model_config = _STRICT
    display_name: str = Field(min_length=1, description="Vendor name and variant.")
    vendor: Vendor = Field(description="nvidia | amd | google | intel.")
    generation: Generation = Field(
        description="Architecture generation; keys the calibration (a generation without "
        "measured runs gets the pooled fit, and forecasts say so).")
    peak_TFLOPs: dict[Precision, PositiveFloat] = Field(
        description="Dense (non-sparse) peak per precision, 10^12 FLOP/s; bf16 is required by "
        "the estimator.")
    hbm_GB: PositiveFloat = Field(description="HBM capacity, 10^9 bytes.")
    hbm_TBps: PositiveFloat = Field(description="HBM bandwidth, 10^12 bytes/s.")
    scale_up: ScaleUpFile
    scale_out_Gbps: PositiveFloat = Field(description="NIC line rate per GPU, 10^9 bit/s.")
    source: str = Field(min_length=1, description="Where every number comes from.")
    gpus_per_node: PositiveInt = Field(8, description="GPUs per server/host.")
    num_sms: PositiveInt | None = Field(None, description="SMs / CUs (tile-wave GEMM model).")
    boost_clock_MHz: PositiveFloat | None = None
    sustained_clock_MHz: PositiveFloat | None = Field(
        None, description="Clock held under dense matrix load (needs sustained_clock_source).")
    sustained_clock_source: str | None = Field(None, validate_default=True)
    tdp_W: PositiveFloat | None = Field(
        None, description="Rated board power, W (needs tdp_source); energy in train "
        "--train-tokens uses it.")
    tdp_source: str | None = Field(None, validate_default=True)
    power_limit_W: PositiveFloat | None = Field(
        None, description="Configured power cap below tdp_W (needs power_limit_source).")
    power_limit_source: str | None = Field(None, validate_default=True)
    hbm_usable_MiB: PositiveFloat | None = Field(
        None, description="Memory the driver reports, 2^20 bytes (needs hbm_usable_source).")
    hbm_usable_source: str | None = Field(None, validate_default=True)
    l2_cache_MiB: PositiveFloat | None = None
    # []: pydantic copies defaults per instance; default_factory=list costs each process a
    # ~2.5 ms inspect.signature parse (tests/test_train_process_imports.py).
    aliases: list[str] = Field([], description="Other spellings (catalog).")
    csv_row: str | None = Field(None, description="hardware_specs.csv row (catalog entries).")
    notes: str | None = None
    filled: str | None = Field(None, description="Values the source leaves empty, and why.")

    @field_validator("peak_TFLOPs")
    @classmethod
    def _has_bf16(cls, peaks: dict[str, float]) -> dict[str, float]:
        if "bf16" not in peaks:
            raise ValueError("needs a bf16 entry (MFU and the kernel model use it)")
        return peaks

    @field_validator("sustained_clock_source", "tdp_source", "power_limit_source",
                     "hbm_usable_source", mode="after")
    @classmethod
    def _sourced(cls, source: str | None, info: ValidationInfo) -> str | None:
        """Every optional measured figure comes with its source."""
        value = _SOURCED[str(info.field_name)]
        if info.data.get(value) is not None and not source:
            raise ValueError(f"required with {value}={info.data[value]!r} (where it comes from)")
        return source


_SOURCED = {"sustained_clock_source": "sustained_clock_MHz", "tdp_source": "tdp_W",
            "power_limit_source": "power_limit_W", "hbm_usable_source": "hbm_usable_MiB"}
"""Source field -> the figure it sources."""


class SystemFile(BaseModel):
    """One system (node or rack of one GPU type), as in ``systems.yaml`` or ``--system
    FILE.yaml``. Bandwidths default to the GPU entry's ``scale_up`` / ``scale_out_Gbps``."""

    model_config = _STRICT
    gpu: str | GPUFile = Field(
        description="A catalog GPU name, a GPU file path (relative to this file), or a GPU "
        "entry written inline.")
    gpus_per_node: PositiveInt
    scale_up_domain_gpus: PositiveInt
    source: str = Field(min_length=1, description="Where the topology comes from.")
    name: str | None = Field(None, description="Name in reports (user files; default: stem).")
    scale_out_nics_per_node: PositiveInt | None = None
    nvls: bool | None = Field(None, description="NVSwitch reduces in the network (NVLS).")
    nvls_source: str | None = None
    scale_up_topology: ScaleUpTopology | None = None
    scale_up_link_GBps: PositiveFloat | None = Field(
        None, description="Per-link bandwidth of a mesh, 10^9 B/s one direction.")
    scale_up_unidir_GBps: PositiveFloat | None = Field(
        None, description="Override of the GPU's scale-up bandwidth, 10^9 B/s.")
    scale_out_Gbps: PositiveFloat | None = Field(
        None, description="Override of the GPU's NIC rate, 10^9 bit/s.")
    scale_up_latency_us: PositiveFloat | None = None
    scale_out_latency_us: PositiveFloat | None = None
    pod_gpus: PositiveInt | None = None
    pod_oversubscription: PositiveFloat | None = None
    pod_latency_us: PositiveFloat | None = None
    default_for_gpu: bool = False
    # []: pydantic copies defaults per instance; default_factory=list costs each process a
    # ~2.5 ms inspect.signature parse (tests/test_train_process_imports.py).
    aliases: list[str] = []
