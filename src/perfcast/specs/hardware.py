"""GPUSpec and SystemSpec: one accelerator, and a cluster of them with its network tiers.

All values SI: FLOP/s, bytes, bytes/s, seconds, Hz. Catalog files hold vendor units and are
converted once, at load (``perfcast.catalog.gpus``).
"""

from __future__ import annotations

from typing import Final, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, model_validator

from perfcast.errors import InputError

Precision = Literal["fp32", "tf32", "bf16", "fp16", "fp8", "fp6", "fp4", "int8"]
PRECISIONS: Final[tuple[Precision, ...]] = get_args(Precision)
Vendor = Literal["nvidia", "amd", "google", "intel"]
Generation = Literal[
    "volta", "ampere", "hopper", "blackwell", "blackwell-ultra",
    "cdna2", "cdna3", "cdna4", "tpu", "gaudi",
]
MX_BLOCK_SCALING_GENERATIONS: frozenset[str] = frozenset({"blackwell", "blackwell-ultra", "cdna4"})
"""Generations whose matrix units take MX block-scaled operands (one E8M0 scale per 32
elements, OCP MX spec v1.0): NVIDIA Blackwell (5th-generation Tensor Cores, PTX ISA 8.7
``tcgen05.mma ... .block_scale``; Transformer Engine's ``MXFP8BlockScaling`` requires compute
capability 10.0+) and AMD CDNA 4 (MI350 series, CDNA 4 ISA ``V_MFMA_SCALE_F32_*``). Hopper and
older scale per tensor/row/block in software only."""
ScaleUpTopology = Literal["switch", "mesh", "pcie"]
"""How the scale-up domain joins its GPUs: ``switch`` (NVSwitch: every GPU reaches any peer at
its full per-GPU bandwidth), ``mesh`` (AMD xGMI fully connected: one link per pair of GPUs, so a
group of r GPUs uses r−1 links per GPU), ``pcie`` (through PCIe switches / the host)."""


class GPUSpec(BaseModel):
    """One accelerator: dense peaks per precision, memory, and on-chip resources."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(description="Catalog slug, e.g. 'h100-sxm'.")
    display_name: str = Field(description="Vendor name and variant, e.g. 'NVIDIA H100 SXM5 80GB'.")
    vendor: Vendor = Field(description="Vendor of the accelerator.")
    generation: Generation = Field(description="Architecture generation (keys calibration).")
    peak_fp32_flops: float | None = Field(default=None, gt=0, description="Dense FP32 (non-tensor) FLOP/s.")
    peak_tf32_flops: float | None = Field(default=None, gt=0, description="Dense TF32 matrix FLOP/s.")
    peak_bf16_flops: float = Field(gt=0, description="Dense BF16 matrix FLOP/s.")
    peak_fp16_flops: float | None = Field(default=None, gt=0, description="Dense FP16 matrix FLOP/s.")
    peak_fp8_flops: float | None = Field(
        default=None, gt=0, description="Dense FP8 matrix FLOP/s; None = unsupported."
    )
    peak_fp6_flops: float | None = Field(default=None, gt=0, description="Dense FP6 matrix FLOP/s.")
    peak_fp4_flops: float | None = Field(default=None, gt=0, description="Dense FP4 matrix FLOP/s.")
    peak_int8_ops: float | None = Field(default=None, gt=0, description="Dense INT8 matrix OP/s.")
    hbm_capacity_bytes: float = Field(gt=0, description="Device memory capacity in bytes.")
    hbm_usable_bytes: float | None = Field(
        default=None, gt=0,
        description="Device memory the driver reports to software (nvidia-smi / rocm-smi "
                    "total), bytes, with its source in ``source``; None = hbm_capacity_bytes.",
    )
    hbm_bandwidth_Bps: float = Field(gt=0, description="Peak device memory bandwidth, bytes/s.")
    num_sms: int | None = Field(default=None, gt=0, description="Streaming multiprocessors / compute units.")
    boost_clock_Hz: float | None = Field(default=None, gt=0, description="Boost (tensor) clock in Hz.")
    l2_cache_bytes: float | None = Field(default=None, gt=0, description="L2 (or last-level) cache in bytes.")
    sustained_clock_Hz: float | None = Field(
        default=None, gt=0,
        description="Clock sustained under dense matrix load, Hz (catalog, with source); None = boost.",
    )
    tdp_W: float | None = Field(
        default=None, gt=0,
        description="Rated board power of the SKU, W (catalog, with source); None = not recorded.",
    )
    power_limit_W: float | None = Field(
        default=None, gt=0,
        description="Configured board-power cap, W, when below tdp_W (the catalog lowers "
                    "sustained_clock_Hz for it, catalog.power); None = runs at tdp_W.",
    )
    clock_override_Hz: float | None = Field(
        default=None, gt=0,
        description="User's clock (--gpu-clock-mhz), Hz: scales compute throughput; None = sustained.",
    )
    source: str = Field(description="Where these numbers come from.")

    @property
    def usable_hbm_bytes(self) -> float:
        """Memory a training or serving process can allocate from, bytes: the driver's
        reported total where the catalog records it, else the vendor capacity."""
        return self.hbm_usable_bytes if self.hbm_usable_bytes is not None else self.hbm_capacity_bytes

    def peak_flops(self, precision: Precision) -> float:
        """Dense matrix peak for ``precision`` in FLOP/s.

        Raises ``ValueError`` naming the GPU when the precision is not supported. FP16 falls back
        to BF16 (same tensor throughput on every listed part).
        """
        value = {
            "fp32": self.peak_fp32_flops,
            "tf32": self.peak_tf32_flops,
            "bf16": self.peak_bf16_flops,
            "fp16": self.peak_fp16_flops or self.peak_bf16_flops,
            "fp8": self.peak_fp8_flops,
            "fp6": self.peak_fp6_flops,
            "fp4": self.peak_fp4_flops,
            "int8": self.peak_int8_ops,
        }[precision]
        if value is None:
            raise InputError("precision", precision, f"gpu {self.name!r} has no {precision} peak")
        return value

    @property
    def matrix_clock_Hz(self) -> float | None:
        """Clock the matrix units run at: the override, else the sustained, else the boost clock."""
        return self.clock_override_Hz or self.sustained_clock_Hz or self.boost_clock_Hz

    def compute_clock_scale(self) -> float:
        """Compute-throughput factor of ``clock_override_Hz`` against the catalog clock.

        override/(sustained or boost): 1 without an override. Backends whose efficiencies were
        fitted at the catalog clock (roofline) multiply their peak by it.
        """
        catalog_clock = self.sustained_clock_Hz or self.boost_clock_Hz
        if self.clock_override_Hz is None or catalog_clock is None:
            return 1.0
        return self.clock_override_Hz / catalog_clock

    def sustained_matrix_flops(self, precision: Precision) -> float:
        """Dense matrix FLOP/s at the clock the GPU holds under load: peak·f_matrix/f_boost.

        Datasheet peaks are quoted at the boost clock (H100: 1830 MHz·528 tensor cores·1024
        FLOP/clk = 989 TFLOP/s, gpus.yaml note); MI300X runs dense MFMA at ~1.2 GHz, not 2.1
        (AMD MAF blog, kernel_efficiency.csv lines 23-29), so its sustained peak is ~751 TFLOP/s.
        """
        peak = self.peak_flops(precision)
        if self.matrix_clock_Hz is None or self.boost_clock_Hz is None:
            return peak * self.compute_clock_scale()
        return peak * self.matrix_clock_Hz / self.boost_clock_Hz

    def with_clock(self, clock_Hz: float | None) -> GPUSpec:
        """This GPU with its matrix clock overridden to ``clock_Hz`` (None: unchanged)."""
        if clock_Hz is None:
            return self
        return self.model_copy(update={"clock_override_Hz": float(clock_Hz)})

    @property
    def mx_block_scaling(self) -> bool:
        """True when the tensor cores take MX block-scaled operands (``MX_BLOCK_SCALING_GENERATIONS``)."""
        return self.generation in MX_BLOCK_SCALING_GENERATIONS

    @property
    def nvfp4(self) -> bool:
        """True when the tensor cores take NVFP4 (E2M1 with an E4M3 scale per 16 elements):
        NVIDIA parts with an FP4 peak, i.e. Blackwell (PTX ISA 8.7 ``.kind::mxf4nvf4``)."""
        return self.vendor == "nvidia" and self.supports("fp4")

    def supports(self, precision: Precision) -> bool:
        try:
            self.peak_flops(precision)
        except ValueError:
            return False
        return True


class SystemSpec(BaseModel):
    """A cluster: GPUs in nodes, a scale-up domain (NVLink/xGMI) and a scale-out network."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(description="Catalog slug, e.g. 'dgx-h100'.")
    gpu: GPUSpec = Field(description="The accelerator in every slot.")
    gpus_per_node: int = Field(gt=0, description="GPUs per server node.")
    scale_up_domain_gpus: int = Field(
        gt=0, description="GPUs in one scale-up (NVLink/xGMI) domain: 8 for DGX, 72 for NVL72."
    )
    scale_up_bandwidth_Bps: float = Field(
        gt=0, description="Unidirectional scale-up bandwidth per GPU, bytes/s."
    )
    scale_up_latency_s: float = Field(
        default=3e-6, ge=0, description="Per-hop latency of a scale-up transfer, seconds."
    )
    scale_out_bandwidth_Bps: float = Field(
        gt=0, description="Unidirectional scale-out (NIC) bandwidth per GPU, bytes/s."
    )
    scale_out_latency_s: float = Field(
        default=10e-6, ge=0, description="Per-hop latency of a scale-out transfer, seconds."
    )
    scale_up_topology: ScaleUpTopology = Field(
        default="switch", description="Scale-up fabric: NVSwitch-like switch, xGMI mesh or PCIe."
    )
    scale_up_link_bandwidth_Bps: float | None = Field(
        default=None, gt=0,
        description="Mesh only: unidirectional bandwidth of the one link joining a pair of GPUs.",
    )
    nvls: bool = Field(
        default=False,
        description="The scale-up switch reduces in the network (NVLink SHARP, NVSwitch gen3+).",
    )
    scale_out_nics_per_node: int | None = Field(
        default=None, gt=0,
        description="Compute NICs (rails) per node; scale_out_bandwidth_Bps is their sum / GPUs.",
    )
    pod_gpus: int | None = Field(
        default=None, gt=0,
        description="Third tier: GPUs under one non-blocking scale-out pod (leaf/rail group); "
        "None = the scale-out network is non-blocking at any size.",
    )
    pod_oversubscription: float = Field(
        default=1.0, ge=1.0,
        description="Third tier: downlink/uplink ratio above a pod; traffic leaving a pod sees "
        "scale-out bandwidth divided by it.",
    )
    pod_latency_s: float | None = Field(
        default=None, ge=0,
        description="Third tier: per-hop latency between pods, seconds; None = scale_out_latency_s.",
    )
    num_gpus: int | None = Field(
        default=None, gt=0, description="Total GPUs in the cluster; None = as many as asked."
    )
    source: str = Field(description="Where the topology and bandwidths come from.")

    @model_validator(mode="after")
    def _check_domain(self) -> SystemSpec:
        if self.scale_up_domain_gpus < self.gpus_per_node and (
            self.gpus_per_node % self.scale_up_domain_gpus != 0
        ):
            raise ValueError(
                f"gpus_per_node={self.gpus_per_node} is not a multiple of "
                f"scale_up_domain_gpus={self.scale_up_domain_gpus}"
            )
        if self.scale_up_topology == "mesh" and self.scale_up_link_bandwidth_Bps is None:
            raise ValueError(f"system {self.name!r}: scale_up_topology='mesh' needs "
                             "scale_up_link_bandwidth_Bps (per-peer link)")
        if self.nvls and self.scale_up_topology != "switch":
            raise ValueError(f"system {self.name!r}: nvls=True needs scale_up_topology='switch' "
                             f"(got {self.scale_up_topology!r})")
        return self

    def with_num_gpus(self, num_gpus: int) -> SystemSpec:
        """The same system sized to ``num_gpus`` GPUs."""
        return self.model_copy(update={"num_gpus": num_gpus})


def as_precision(value: str, field: str = "precision") -> Precision:
    """``value`` as a ``Precision`` (a typed narrowing of text read from files or flags);
    ``InputError`` naming ``field`` and the value when it is not one."""
    for precision in PRECISIONS:
        if precision == value:
            return precision
    raise InputError(field, value, f"choose from {', '.join(PRECISIONS)}")
