"""Loader and typed schema of ``kernel_analytical.yaml``: the tile/wave kernel model's knobs.

Per GPU generation: the GEMM tile shapes the vendor libraries pick from (CUTLASS / cuBLAS /
hipBLASLt / DeepGEMM, with sources), the flash-attention block sizes and softmax unit rate,
and the fitted efficiencies (fraction of per-SM matrix peak in the main loop, per-SM and L2
load bandwidth, fixed cycles per tile). HBM efficiency and launch overhead are not repeated
here: the analytical backend reads them from ``kernel_roofline.yaml`` (one value, one place).
The file is written by ``tools/fit_kernel_analytical.py``; ``source_rows`` are 1-based line
numbers of ``shared/reference/kernel_efficiency.csv``.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from perfcast.calibration._files import CALIBRATION_DIR, load_yaml_model
from perfcast.specs.hardware import Generation

KERNEL_ANALYTICAL_PATH: Final[Path] = CALIBRATION_DIR / "kernel_analytical.yaml"

_FROZEN = ConfigDict(frozen=True, extra="forbid")


class Provenance(BaseModel):
    """Where a block's numbers come from."""

    model_config = _FROZEN

    method: Literal["fitted", "transferred", "default"] = Field(
        description="fitted to source_rows; transferred from another generation (see note); "
        "default = the least favourable fitted generation")
    source_rows: tuple[int, ...] = Field(default=(), description="Reference CSV lines used.")
    note: str = Field(default="", description="Provenance and caveats.")
    fit_rms_log_error: float | None = Field(default=None, ge=0, description="RMS ln(pred/meas).")
    at_bound: tuple[str, ...] = Field(
        default=(), description="Fitted knobs that ended on their fit bound (the model's form, "
        "not the rows, sets them; treat as flagged).")


class TileShape(BaseModel):
    """One output tile of a GEMM kernel: tile_m × tile_n outputs on ``sms`` SMs (2 = a
    Blackwell 2-SM UMMA pair)."""

    model_config = _FROZEN

    tile_m: int = Field(gt=0, description="Rows of C per tile.")
    tile_n: int = Field(gt=0, description="Columns of C per tile.")
    sms: int = Field(default=1, gt=0, description="SMs that cooperate on one tile.")


class GemmTileModel(BaseModel):
    """Tile/wave GEMM knobs of one generation (``kernels.analytical_gemm``)."""

    model_config = _FROZEN

    tiles: tuple[TileShape, ...] = Field(min_length=1, description="Candidate tiles.")
    tiles_source: str = Field(description="Libraries/papers the candidate tiles come from.")
    split_k: tuple[int, ...] = Field(
        default=(1,), description="Split-K factors tried when the output tiles fill < 1 wave.")
    mma_efficiency_bf16: float = Field(
        gt=0, le=1, description="Main-loop fraction of per-SM 16-bit matrix peak.")
    mma_efficiency_fp8: float = Field(
        gt=0, le=1, description="Main-loop fraction of per-SM 8-bit matrix peak.")
    sm_load_bytes_per_clock: float = Field(
        gt=0, description="Operand bytes one SM can load per clock (L2/HBM -> shared memory).")
    l2_bytes_per_clock_per_sm: float = Field(
        gt=0, description="Aggregate L2 operand bandwidth per clock, divided by SM count.")
    tile_overhead_cycles: float = Field(
        ge=0, description="Fixed cycles per tile: pipeline fill, epilogue, tile scheduling.")
    provenance: Provenance
    grouped_bf16_ratio: float = Field(
        default=1.0, gt=0, le=1.5,
        description="Main-loop efficiency of a 16-bit grouped (MoE routed-expert) GEMM kernel "
        "over the dense one of the same generation (Transformer Engine general_grouped_gemm vs "
        "general_gemm on one machine): per-group tile scheduling, ragged group edges and "
        "per-group pointer setup run inside the main loop. 1.0 = timed as dense.")
    grouped_provenance: Provenance | None = Field(
        default=None, description="Where grouped_bf16_ratio comes from (None: not fitted, "
        "grouped GEMMs timed as dense).")

    @property
    def mma_efficiency_grouped_bf16(self) -> float:
        """Main-loop efficiency of a 16-bit grouped GEMM: dense × ``grouped_bf16_ratio``."""
        return self.mma_efficiency_bf16 * self.grouped_bf16_ratio

    def as_grouped(self) -> GemmTileModel:
        """This model with the 16-bit main-loop efficiency of a grouped GEMM kernel."""
        return self.model_copy(update={"mma_efficiency_bf16": self.mma_efficiency_grouped_bf16})


class AttentionTileModel(BaseModel):
    """Flash-attention knobs of one generation (``kernels.analytical_attention``)."""

    model_config = _FROZEN

    block_q: int = Field(gt=0, description="Query rows per work unit (forward).")
    block_kv: int = Field(gt=0, description="Key/value rows per inner step.")
    blocks_source: str = Field(description="Kernel the block sizes come from.")
    exp_per_clock_per_sm: float = Field(
        gt=0, description="Special-function (MUFU ex2) results per clock per SM.")
    exp_source: str = Field(description="Source of the special-function throughput.")
    softmax_overlap: float = Field(
        ge=0, le=1, description="Fraction of softmax time hidden under the matmuls.")
    mma_efficiency_forward: float = Field(gt=0, le=1, description="Forward main-loop efficiency.")
    mma_efficiency_backward: float = Field(
        gt=0, le=1, description="Backward main-loop efficiency.")
    unit_overhead_cycles: float = Field(
        ge=0, description="Fixed cycles per work unit: load Q (or K,V), rescale, write O.")
    provenance: Provenance


class GenerationAnalytical(BaseModel):
    model_config = _FROZEN

    gemm: GemmTileModel
    attention: AttentionTileModel


class KernelAnalyticalCalibration(BaseModel):
    """The whole file: header plus one block per generation and a ``default``."""

    model_config = _FROZEN

    generated_by: str
    generated_on: str
    reference: str
    generations: dict[Generation | Literal["default"], GenerationAnalytical]

    @model_validator(mode="after")
    def _check_default(self) -> KernelAnalyticalCalibration:
        if "default" not in self.generations:
            raise ValueError(f"generations has no 'default' block (keys: {sorted(self.generations)})")
        return self

    def uses_default(self, generation: Generation) -> bool:
        """True when ``generation`` has no block of its own."""
        return generation not in self.generations

    def transferred_parts(self, generation: Generation) -> tuple[str, ...]:
        """Kernel classes (``gemm``, ``attention``) whose block for ``generation`` was
        ``transferred`` from another generation (no measurements of that class on it), with
        the block's provenance note; empty for a generation without a block (``uses_default``
        covers that) or with fitted blocks."""
        block = self.generations.get(generation)
        if block is None:
            return ()
        return tuple(f"{name} kernel constants ({part.provenance.note})"
                     for name, part in (("GEMM", block.gemm), ("attention", block.attention))
                     if part.provenance.method == "transferred")

    def for_generation(self, generation: Generation) -> GenerationAnalytical:
        """The block of ``generation``, or ``default``."""
        return self.generations.get(generation, self.generations["default"])


@cache
def _load_shipped() -> KernelAnalyticalCalibration:
    return load_yaml_model(KernelAnalyticalCalibration, KERNEL_ANALYTICAL_PATH)


def load_kernel_analytical(path: Path | None = None) -> KernelAnalyticalCalibration:
    """The analytical calibration in ``path``; the shipped file (cached) when None."""
    if path is None:
        return _load_shipped()
    return load_yaml_model(KernelAnalyticalCalibration, path)
