"""SimuMax's measured kernel table as fit observations (``kernel_reference_rows.Observation``).

Source: shared/reference/measured_kernels/simumax_kernels.csv (README beside it). The points
come from one A100-PCIe machine and one B200 cluster in SimuMax's own setup (TransformerEngine
``general_gemm``/``general_grouped_gemm`` timed by host wall-clock loops; FlashAttention /
TE attention, causal). They are observations of *that* cluster: ``fit_kernel_analytical.py``
scores the shipped calibration on them and runs the leave-one-source-out comparison; of the
default calibration only Blackwell's BF16 GEMM efficiency is fitted on them (the B200 dense
GEMMs: the sustained rate of training shapes, ``SUSTAINED_BF16_GEMM`` there); ``perfcast
--kernel-table`` uses them as measured.

Rates are perfcast's FLOP counts over the measured time: GEMMs 2·m·n·k·batch (grouped GEMMs
timed as ``batch`` = local experts GEMMs, the analytical model's batched approximation);
causal attention counts half of SimuMax's full-S² FLOPs (README caveat 1), i.e. the
``causal_adjusted_tflops`` column. MLA attention (d_qk 192 ≠ d_v 128) and the
``qkv_contiguous=False`` / memory-bound rows are left out.
"""

from __future__ import annotations

import csv
from pathlib import Path

from kernel_reference_rows import Attention, Observation, T

from perfcast.kernels.simumax_table import convert_simumax_row, measured_time_s

HARDWARE_NAME = {"B200": "NVIDIA B200", "A100-PCIe": "A100 PCIe 80GB"}
"""SimuMax GPU -> ``kernel_reference_rows.HARDWARE`` entry (peaks, HBM of the variant)."""

SOURCE = "SimuMax"


def read_simumax_observations(path: Path) -> list[Observation]:
    """GEMM, grouped-GEMM and (MHA/GQA) attention points, ``fit=False``, block
    ``gemm-bf16`` / ``attn-fwd`` / ``attn-bwd``; implementation names the source."""
    observations = []
    with path.open(newline="", encoding="utf-8") as f:
        for line, raw in enumerate(csv.DictReader(f), start=2):
            row, _ = convert_simumax_row(raw, line)
            if row is None or raw["gpu"] not in HARDWARE_NAME:
                continue
            hardware = HARDWARE_NAME[raw["gpu"]]
            why = "one cluster's table: scored (B200 dense GEMMs fit Blackwell's BF16 rate)"
            if row["kind"] == "gemm":
                dims = (float(row["m"]), float(row["n"]), float(row["k"]), float(row["batch"]))
                rate = 2 * dims[0] * dims[1] * dims[2] * dims[3] / measured_time_s(raw)
                observations.append(Observation(
                    line, hardware, "gemm-bf16", f"{SOURCE} {raw['op_name']}", rate, False,
                    why, gemm=dims))
                continue
            if raw["qk_head_dim"] != raw["v_head_dim"]:
                continue
            heads = float(raw["head_num"])
            attn = Attention(float(raw["batch"]), heads, float(raw["seq_len"]),
                             float(raw["seq_len"]), float(raw["qk_head_dim"]), True)
            block = "attn-bwd" if raw["op_name"] == "sdp_bwd" else "attn-fwd"
            observations.append(Observation(
                line, hardware, block, f"{SOURCE} {raw['op_name']}",
                float(raw["causal_adjusted_tflops"]) * T, False, why, attention=attn))
    return observations
