"""SimuMax measured kernel rows -> perfcast kernel-table rows (``kernels.kernel_table``).

Source: shared/reference/measured_kernels/simumax_kernels_README.md (MooreThreads/SimuMax
v1.2, ``configs/system/*.json`` ``accurate_efficient_factor``). Each SimuMax row stores an
efficiency against the file's peak and the FLOP count SimuMax's benchmark used; the kernel
time is the one both imply (SimuMax ``SystemConfig.compute_op_accuracy_time``):

    time_s = flops_simumax_convention / (efficiency · peak_tflops_used · 1e12)

That is the measured time whatever FLOP convention the count follows. For attention the
count is full S² (base = b·S²·h·(d_qk + d_v), fwd 2·base, bwd 5·base) although the kernel ran
causal: the time above is the causal kernel's, and is stored as a causal pass; perfcast's
causal FLOPs (half of that) then give the true causal rate (README caveat 1).

Shapes are rewritten into the GEMM convention of perfcast's graph (``graph.layer``:
forward m=tokens, n=out, k=in; dgrad m=tokens, n=in, k=out; wgrad m=in, n=out, k=tokens):

* ``matmul`` TN (forward) and NN (dgrad) keys already are (m, n, k) in that convention;
  NT (wgrad) keys are m=out, n=in, k=tokens, so m and n swap.
* ``group_matmul`` keys hold the forward (M, N, K) for every stage; dgrad is (M, K, N),
  wgrad (K, N, M); ``batch`` = the number of local experts ``ng``.
* ``sdp_fwd``/``sdp_bwd``: heads per rank, seq_q = seq_kv = ``seq_len``, causal.

Kept out, with a reason in ``KernelTable.skipped``: ``qkv_contiguous=False`` attention (a
layout perfcast does not time; SimuMax looks these keys up only for S5000 systems) and the
memory-bound rows (aggregates over several kernels with no byte count per point).
"""

from __future__ import annotations

from typing import Final

from perfcast.kernels.kernel_table import KERNEL_TABLE_COLUMNS, table_gpu_name

_GEMM_PASS: Final[dict[str, str]] = {
    "fwd": "forward", "bwd_grad_act": "backward_dgrad", "bwd_grad_w": "backward_wgrad"}
"""SimuMax ``stage`` -> perfcast ``graph.ops.Phase`` value."""

_FIRST_DATA_LINE: Final[int] = 2
"""File line of the first data row (line 1 is the header)."""


def measured_time_s(row: dict[str, str]) -> float:
    """Kernel seconds implied by a SimuMax row: FLOPs (SimuMax's count) / (efficiency · peak)."""
    return float(row["flops_simumax_convention"]) / (
        float(row["efficiency"]) * float(row["peak_tflops_used"]) * 1e12)


def _flag(text: str) -> bool:
    return text.strip().lower() in ("1", "true", "yes")


def _gemm_shape(row: dict[str, str]) -> tuple[float, float, float, float]:
    """(m, n, k, batch) of a matmul or group_matmul row in perfcast's convention."""
    m, n, k = float(row["m"]), float(row["n"]), float(row["k"])
    stage = row["stage"]
    if row["op_name"] == "group_matmul":
        batch = float(row["groups"])
        if stage == "bwd_grad_act":
            return m, k, n, batch
        if stage == "bwd_grad_w":
            return k, n, m, batch
        return m, n, k, batch
    batch = float(row["b"] or 1)
    if stage == "bwd_grad_w":
        return n, m, k, batch
    return m, n, k, batch


def _main_grad(row: dict[str, str]) -> str:
    """Main-gradient variant tag: grouped rows state it; a dense NT row with a BF16 output is
    the ``grad_reduce_in_bf16`` twin of the FP32 one (README, 'Attribution')."""
    if row["op_name"] == "group_matmul":
        return row["main_grad_dtype"] or ""
    if row["stage"] == "bwd_grad_w":
        return "bf16" if row["out_dtype"] == "bf16" else "fp32"
    return ""


def _base_row(row: dict[str, str], line: int, kind: str) -> dict[str, str]:
    out = dict.fromkeys(KERNEL_TABLE_COLUMNS, "")
    out.update(gpu=table_gpu_name(row["gpu"]), kind=kind, precision=row["dtype"] or "bf16",
               time_s=repr(measured_time_s(row)), gemm_pass="", main_grad="",
               source=f"SimuMax line {line}: {row['op_name']} {row['shape_key']}")
    return out


def convert_simumax_row(row: dict[str, str], line: int) -> tuple[dict[str, str] | None, str]:
    """(perfcast row, "") for a row perfcast can time, else (None, reason)."""
    op = row["op_name"]
    if op in ("matmul", "group_matmul"):
        out = _base_row(row, line, "gemm")
        m, n, k, batch = _gemm_shape(row)
        out.update(m=repr(m), n=repr(n), k=repr(k), batch=repr(batch),
                   gemm_pass=_GEMM_PASS[row["stage"]], main_grad=_main_grad(row))
        return out, ""
    if op in ("sdp_fwd", "sdp_bwd"):
        if not _flag(row["qkv_contiguous"]):
            return None, "qkv_contiguous=False attention layout (perfcast times contiguous Q/K/V)"
        out = _base_row(row, line, "attention")
        out.update(batch=row["batch"], num_heads=row["head_num"],
                   num_kv_heads=row["kv_head_num"], seq_q=row["seq_len"],
                   seq_kv=row["seq_len"], head_dim_qk=row["qk_head_dim"],
                   head_dim_v=row["v_head_dim"], causal="True",
                   backward=str(op == "sdp_bwd"))
        return out, ""
    return None, f"{op}: memory-bound aggregate with no byte count per point"


def convert_simumax_rows(rows: list[dict[str, str]]) -> tuple[list[dict[str, str]], list[str]]:
    """Converted rows and one 'line N (gpu op): reason' per row kept out."""
    converted, skipped = [], []
    for i, row in enumerate(rows):
        line = i + _FIRST_DATA_LINE
        out, reason = convert_simumax_row(row, line)
        if out is None:
            skipped.append(f"line {line} ({row['gpu']} {row['op_name']}): {reason}")
        else:
            converted.append(out)
    return converted, skipped
