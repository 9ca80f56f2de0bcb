"""Loader and typed schema of ``attention_kernels.yaml``: fused-attention kernel classes.

The kernel backends calibrate each GPU generation's own attention kernel (``auto``) and, where
measured, FlashAttention-2 (``fa2``). A kernel class without kernel measurements of its own is
timed as a calibrated class times a sourced or fitted slowdown (``derived``), one per GPU
generation where the kernel pair's relative speed differs by architecture
(``time_ratio_by_generation``).

The same file holds the derived FP8 GEMM kernels (``scaled_gemm``): a scaled-matmul kernel
class timed as the calibrated FP8 GEMM (the tensorwise-scaled one the kernel efficiencies
describe) times a fitted slowdown, ``kernels.scaled_gemm``.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Annotated, Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from perfcast.calibration._files import CALIBRATION_DIR, load_yaml_model
from perfcast.calibration.fit_record import FitRecord

ATTENTION_KERNELS_PATH: Final[Path] = CALIBRATION_DIR / "attention_kernels.yaml"

CalibratedKernel = Literal["auto", "fa2"]
"""Kernel classes with their own efficiency curves in the kernel backends' calibration."""


class DerivedKernel(BaseModel):
    """A kernel class timed as ``base`` × ``time_ratio`` (≥ 1: it is slower than ``base``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    base: CalibratedKernel = Field(description="Calibrated kernel class it is measured against.")
    time_ratio: float = Field(ge=1.0, description="Its time over the base kernel's time (every "
                              "generation not in time_ratio_by_generation).")
    # {}: pydantic copies defaults per instance; default_factory=dict costs each process a
    # ~2.5 ms inspect.signature parse (tests/test_train_process_imports.py).
    time_ratio_by_generation: dict[str, Annotated[float, Field(ge=1.0)]] = Field(
        {},
        description="Generation -> its own time over the base kernel's time: two kernels' "
                    "relative speed is a property of the pair on one architecture.")
    method: Literal["fitted", "sourced"] = Field(description="How time_ratio was obtained.")
    source: str = Field(description="Where the ratio comes from, and its cross-check.")

    def ratio_for(self, generation: str | None) -> float:
        """The time ratio on ``generation`` (``time_ratio`` when it has none of its own)."""
        if generation is None:
            return self.time_ratio
        return self.time_ratio_by_generation.get(generation, self.time_ratio)


class DerivedScaledGemm(BaseModel):
    """An FP8 scaled-matmul kernel class timed as the calibrated FP8 GEMM × ``time_ratio``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    time_ratio: float = Field(ge=1.0, description="Its time over the calibrated (tensorwise-"
                              "scaled) FP8 GEMM's time at the same shape.")
    method: Literal["fitted", "sourced"] = Field(description="How time_ratio was obtained.")
    source: str = Field(description="The kernel it stands for, and where the ratio comes from.")


class AttentionKernelCalibration(BaseModel):
    """Kernel classes derived from a calibrated one: fused attention
    (``Strategy.attention_kernel``) and FP8 scaled-matmul kernels (``kernels.scaled_gemm``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    reference: str
    derived: dict[str, DerivedKernel]
    # {}: pydantic copies defaults per instance; default_factory=dict costs each process a
    # ~2.5 ms inspect.signature parse (tests/test_train_process_imports.py).
    scaled_gemm: dict[str, DerivedScaledGemm] = {}
    """Scaled-matmul kernel class (``kernels.scaled_gemm.SCALED_GEMM_KERNEL``) -> its ratio."""
    fit: FitRecord | None = None
    """How the fitted values were obtained (``perfcast calibrate``)."""


@cache
def load_attention_kernels(path: Path | None = None) -> AttentionKernelCalibration:
    """The attention-kernel calibration in ``path`` (the shipped file when None); cached."""
    return load_yaml_model(AttentionKernelCalibration, path or ATTENTION_KERNELS_PATH)
