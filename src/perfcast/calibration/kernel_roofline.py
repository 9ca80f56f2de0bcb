"""Loader and typed schema of ``kernel_roofline.yaml``: roofline efficiencies per GPU generation.

The file is written by ``tools/fit_kernel_roofline.py`` from the measured rows of
``shared/reference/kernel_efficiency.csv``; every block names the rows it comes from (1-based
line numbers of that CSV, header = line 1) and how it was obtained (``method``).
A generation missing from the file falls back to the conservative ``default`` block;
``KernelRooflineCalibration.uses_default`` tells a report that this happened.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from perfcast.calibration._files import CALIBRATION_DIR, load_yaml_model
from perfcast.specs.hardware import Generation, Precision

KERNEL_ROOFLINE_PATH: Final[Path] = CALIBRATION_DIR / "kernel_roofline.yaml"

Method = Literal["fitted", "transferred", "anchored", "default"]
"""How a block was obtained: least-squares ``fitted`` to its rows; ``transferred`` from another
generation (named in ``note``); ``anchored`` to a single headline row with the shape
dependence transferred; ``default`` = the most conservative value over fitted generations."""

GemmClass = Literal["bf16", "fp8"]
"""Efficiency class of a GEMM precision: 16/32-bit tensor-core GEMMs and 8-bit-or-less ones."""

GEMM_CLASS: Final[dict[Precision, GemmClass]] = {
    "fp32": "bf16",
    "tf32": "bf16",
    "bf16": "bf16",
    "fp16": "bf16",
    "fp8": "fp8",
    "fp6": "fp8",
    "fp4": "fp8",
    "int8": "fp8",
}
"""Which efficiency block a precision uses; its peak is always the GPU's own for ``precision``.
Only bf16/fp16 and fp8 are measured; the other precisions borrow the nearest class."""

CalibrationKey = Generation | Literal["default"]


class _Block(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    method: Method = Field(description="How the values were obtained (see ``Method``).")
    source_rows: tuple[int, ...] = Field(
        default=(), description="kernel_efficiency.csv line numbers the values come from."
    )
    note: str = Field(default="", description="Provenance and caveats, one or two sentences.")
    fit_num_rows: int = Field(default=0, ge=0, description="Rows in the least-squares fit.")
    fit_rms_log_error: float | None = Field(
        default=None, ge=0, description="RMS of ln(predicted/measured) over the fit rows."
    )


class GemmEfficiency(_Block):
    """GEMM efficiency curve eff = eff_max·F/(F + flops_half) (``kernels.efficiency``)."""

    eff_max: float = Field(gt=0, le=1, description="Achievable fraction of peak for large GEMMs.")
    flops_half: float = Field(ge=0, description="GEMM FLOPs at which eff = eff_max/2.")


class AttentionEfficiency(_Block):
    """Flash-attention efficiency eff_max·L/(L + keys_half)·d/(d + head_dim_half)."""

    eff_max: float = Field(gt=0, le=1, description="Achievable fraction of peak, long/large heads.")
    keys_half: float = Field(ge=0, description="Mean keys per query at half saturation.")
    head_dim_half: float = Field(ge=0, description="Mean head dim (d_qk+d_v)/2 at half saturation.")


class ScalarValue(_Block):
    """One calibrated number with its provenance."""

    value: float = Field(gt=0, description="The value, in the SI unit its field name says.")


class GenerationKernelCalibration(BaseModel):
    """Everything the roofline backend needs for one GPU generation."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    gemm: dict[GemmClass, GemmEfficiency] = Field(description="GEMM curves per precision class.")
    attention_forward: AttentionEfficiency = Field(description="Flash-attention forward, 16-bit.")
    attention_backward: AttentionEfficiency = Field(description="Flash-attention backward, 16-bit.")
    attention_forward_fp8: AttentionEfficiency | None = Field(
        default=None, description="FP8 forward; None = FP8 attention is timed as 16-bit."
    )
    attention_fa2_forward: AttentionEfficiency | None = Field(
        default=None, description="FlashAttention-2 forward, 16-bit; None = not calibrated here."
    )
    attention_fa2_backward: AttentionEfficiency | None = Field(
        default=None, description="FlashAttention-2 backward, 16-bit; None = not calibrated here."
    )
    hbm_efficiency: ScalarValue = Field(description="Achievable fraction of peak HBM bandwidth.")
    launch_overhead_s: ScalarValue = Field(description="Per-kernel launch/scheduling gap, s.")

    @model_validator(mode="after")
    def _check(self) -> GenerationKernelCalibration:
        missing = {"bf16", "fp8"} - set(self.gemm)
        if missing:
            raise ValueError(f"gemm is missing precision classes {sorted(missing)}")
        if self.hbm_efficiency.value > 1:
            raise ValueError(f"hbm_efficiency.value={self.hbm_efficiency.value} exceeds 1")
        return self

    def gemm_for(self, precision: Precision) -> GemmEfficiency:
        """The GEMM block for ``precision`` (through ``GEMM_CLASS``)."""
        return self.gemm[GEMM_CLASS[precision]]


class KernelRooflineCalibration(BaseModel):
    """The whole file: provenance header plus one block per generation and a ``default``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    generated_by: str = Field(description="Script that wrote the file.")
    generated_on: str = Field(description="ISO date the script ran.")
    reference: str = Field(description="Measurement file the values were fitted to.")
    row_numbering: str = Field(description="How ``source_rows`` index the reference file.")
    generations: dict[CalibrationKey, GenerationKernelCalibration] = Field(
        description="Per-generation calibration; must contain 'default'."
    )

    @model_validator(mode="after")
    def _check_default(self) -> KernelRooflineCalibration:
        if "default" not in self.generations:
            keys = sorted(self.generations)
            raise ValueError(f"generations has no 'default' block (keys: {keys})")
        return self

    def uses_default(self, generation: Generation) -> bool:
        """True when ``generation`` has no block of its own and gets ``default``."""
        return generation not in self.generations

    def for_generation(self, generation: Generation) -> GenerationKernelCalibration:
        """The block of ``generation``, or ``default`` when it has none."""
        return self.generations.get(generation, self.generations["default"])


@cache
def _load_shipped() -> KernelRooflineCalibration:
    return load_yaml_model(KernelRooflineCalibration, KERNEL_ROOFLINE_PATH)


def load_kernel_roofline(path: Path | None = None) -> KernelRooflineCalibration:
    """The roofline calibration in ``path``; the shipped file (cached) when ``path`` is None."""
    if path is None:
        return _load_shipped()
    return load_yaml_model(KernelRooflineCalibration, path)
