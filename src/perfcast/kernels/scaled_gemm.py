"""FP8 / FP4 scaled-matmul kernel classes slower than the calibrated FP8 GEMM.

The kernel efficiencies (``calibration/kernel_analytical.yaml``, ``kernel_roofline.yaml``)
describe FP8 GEMMs with one scale per tensor (``torch._scaled_mm`` tensorwise, cuBLASLt /
hipBLASLt, DeepGEMM-class kernels). A recipe with one fp32 scale per row of each operand
(torchao ``Float8LinearRecipeName.ROWWISE`` and ``ROWWISE_WITH_GW_HP``) calls
``torch._scaled_mm`` with per-row scale vectors, which PyTorch dispatches to a different
kernel: on SM90 the CUTLASS ``f8f8bf16_rowwise`` kernel ported from FBGEMM (aten
``native/cuda/RowwiseScaledMM.cu``) that applies both scale vectors in its epilogue, on ROCm
hipBLASLt's vector-scale path. torchao's README records the end-to-end cost (Llama-3-8B, 8
H100, torchtitan: tensorwise +25% over BF16, rowwise +10%), and the kernel pair's time
ratio is fitted end to end on the rowwise runs (``perfcast calibrate``:
``scaled_gemm_time_ratio[rowwise]``) since shared/reference holds no kernel measurement of it.

Block-scaled recipes (``mxfp8``: one E8M0 scale per 32 elements, OCP MX v1.0 §5; ``nvfp4``: one
E4M3 scale per 16 elements plus a per-tensor fp32 scale, NVFP4 pretraining paper arXiv
2509.25149 §2) run a third kernel class: Blackwell's block-scaled MMA (PTX ISA
``tcgen05.mma.kind::mxf8f6f4.block_scale`` / ``kind::mxf4nvf4.block_scale``), which loads a
scale-factor tile per K-block and copies it into tensor memory (``tcgen05.cp``) beside the
operand tiles, reading the scales in the 32×4×4 swizzled layout cuBLAS and
``torch._scaled_mm`` require (torchao 0.18.0 ``prototype/moe_training/nvfp4_training/
nvfp4_linear.py``: ``scaled_mm(..., swizzle_a=[SWIZZLE_32_4_4, ...])``; MX scales are
re-laid out per GEMM by ``prototype/mx_formats/utils.py`` ``to_blocked``). The kernel
efficiencies (``mma_efficiency_fp8``) come from plain FP8 ``torch._scaled_mm`` best-shape
bursts (shared/reference/kernel_efficiency.csv: B200 76.3%, GB200 72.3% of the FP8 peak);
shared/reference holds no block-scaled GEMM measurement, so the class's time ratio is
fitted end to end (``scaled_gemm_time_ratio[block-scaled]``) on the MXFP8 / NVFP4 rows. One
ratio serves both formats: it stands for the block-scaled MMA path over the tensorwise one
(the FP4 GEMM's own 2× peak is in the catalog's ``fp4`` peak).

Not shipped (issue 21, branch mtp21, 2026-11-24): the shipped ``attention_kernels.yaml`` has
no ``block-scaled`` entry, so MXFP8 / NVFP4 GEMMs keep ratio 1; adding the entry (``method:
fitted``) makes ``perfcast calibrate`` fit it. Refit on main: ratio 1.407 ± 0.143, CV all 8.75
-> 8.60%, dense 7.46 -> 7.30%, MoE 17.25 -> 17.15%, megatron_dsv3_gb200 20.05 -> 17.85%,
torchtitan_nvfp4 13.36 -> 10.58%, nemo_perf 10.16 -> 10.01%, but torchao_moe 26.41 -> 31.11%
(bound 0.27): the DeepSeek-V3 MXFP8 rows slow down, the fitted Blackwell overhead fraction
falls and torchao's B200 Llama-4 proxy rows, too fast in BF16 as well (+37%), get faster.
On top of moe16c (row notes' PP layout / MTP depth; branch bw16, 2026-11-25) the entry refits
to 1.263 ± 0.118 with the Blackwell fraction 0.262 ± 0.034 -> 0.212 ± 0.038: CV all 8.34 ->
8.27%, torchtitan_nvfp4 14.76 -> 12.07%, but torchao_moe 30.31 -> 32.57%, megatron_dsv3_gb200
16.85 -> 17.25%, MoE 16.62 -> 16.71%. What those proxy rows miss is not shared with any other
source: forecast minus measured step is 0.33 / 0.35 s (of 1.33 / 1.26 s) when the routed
experts run BF16 (rows 532, 533) and 0.10 / 0.17 s when they run MXFP8 (534, 535), so about
0.23 s sits in the BF16 ``torch._grouped_mm`` GEMMs, ~2.3x the time of the Transformer-Engine
class grouped GEMM the kernel model fits on SimuMax's B200 rows; shared/reference measures no
``torch._grouped_mm`` on SM100, and only this source runs it on Blackwell, so a fitted class
ratio would have no rows in its own cross-validation fold.

time(scaled GEMM) = time(calibrated FP8 / FP4 GEMM, same shape) × time_ratio (≥ 1). Only
GEMMs that run in FP8 / FP4 take it; the BF16 weight-gradient GEMMs of ``rowwise-hp-wgrad``
and the GEMMs a recipe keeps in BF16 (router, LM head, BF16 first/last layers) do not.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from perfcast.kernels.backend import KernelBackend
from perfcast.specs.hardware import Precision
from perfcast.specs.strategy import FP8Recipe

SCALED_GEMM_KERNEL: Final[Mapping[FP8Recipe, str]] = {
    "rowwise": "rowwise", "rowwise-hp-wgrad": "rowwise",
    "mxfp8": "block-scaled", "nvfp4": "block-scaled"}
"""FP8 recipe -> its scaled-matmul kernel class (a key of ``attention_kernels.yaml``
``scaled_gemm``) when that differs from the calibrated one."""
LOW_PRECISION_GEMMS: Final[tuple[Precision, ...]] = ("fp8", "fp4")
"""GEMM formats a scaled-matmul kernel class applies to (``graph.fp8_casts.gemm_format``)."""


def scaled_gemm_time_ratio(backend: KernelBackend, recipe: FP8Recipe | None,
                           precision: Precision) -> float:
    """Time ratio of an FP8 / FP4 GEMM of ``recipe`` over the calibrated FP8 / FP4 GEMM
    (module docstring): 1 for 16-bit GEMMs, recipes on the calibrated kernel, and calibrations
    without the class (``backend.attention_kernels``, ``KernelBackend``)."""
    if precision not in LOW_PRECISION_GEMMS or recipe is None:
        return 1.0
    kernel = SCALED_GEMM_KERNEL.get(recipe)
    if kernel is None:
        return 1.0
    entry = backend.attention_kernels.scaled_gemm.get(kernel)
    return entry.time_ratio if entry is not None else 1.0
