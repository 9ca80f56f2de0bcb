"""Loader and typed schema of ``fp8_block_kernels.yaml``: how much longer a block-scaled FP8
GEMM takes through an engine's slower kernel class than through the tuned kernels the
roofline stands for (``EngineConfig.fp8_block_kernels``)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Final

from pydantic import BaseModel, ConfigDict

from perfcast.calibration._files import CALIBRATION_DIR, load_yaml_model
from perfcast.calibration.comm_protocols import SourcedValue

FP8_BLOCK_KERNELS_PATH: Final[Path] = CALIBRATION_DIR / "fp8_block_kernels.yaml"


class Fp8BlockKernelCalibration(BaseModel):
    """Time factors of the Triton block-FP8 kernels of early-2025 ROCm engine builds."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    reference: str
    triton_rocm_dense_gemm_slowdown: SourcedValue
    triton_rocm_moe_gemm_slowdown: SourcedValue


@dataclass(frozen=True)
class Fp8GemmSlowdown:
    """Multipliers on the seconds of block-scaled FP8 GEMMs (1 = the tuned kernels)."""

    dense: float = 1.0
    """Linear layers with FP8 weights other than the routed experts."""
    routed_experts: float = 1.0
    """The routed experts' grouped GEMMs (fused MoE)."""


@cache
def load_fp8_block_kernels(path: Path | None = None) -> Fp8BlockKernelCalibration:
    """The block-FP8 kernel-class calibration in ``path`` (the shipped file when None); cached."""
    return load_yaml_model(Fp8BlockKernelCalibration, path or FP8_BLOCK_KERNELS_PATH)


def fp8_gemm_slowdown(kernel_class: str, weights: str,
                      calibration: Fp8BlockKernelCalibration | None = None) -> Fp8GemmSlowdown:
    """Slowdown of FP8-weight GEMMs for an engine's block-FP8 ``kernel_class``: the Triton
    kernels of ROCm builds before AITER (``triton_rocm``) take the sourced factors of
    ``fp8_block_kernels.yaml``; ``native`` kernels, or weights that are not FP8, take none."""
    if kernel_class != "triton_rocm" or weights != "fp8":
        return Fp8GemmSlowdown()
    cal = calibration or load_fp8_block_kernels()
    return Fp8GemmSlowdown(dense=cal.triton_rocm_dense_gemm_slowdown.value,
                           routed_experts=cal.triton_rocm_moe_gemm_slowdown.value)
