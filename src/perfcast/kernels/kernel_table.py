"""Kernel tables: measured kernel times read from CSV, in perfcast's layout or SimuMax's.

Two layouts are read, told apart by the header:

* perfcast's own (``KERNEL_TABLE_COLUMNS``; ``perfcast profile`` writes it and
  ``calibration/kernel_measured.csv`` ships in it): one row per measured kernel, ``time_s``
  in seconds, ``#`` lines are metadata (GPU name, driver, torch version, date);
* SimuMax's measured efficiency tables as shipped in ``shared/reference/measured_kernels/``
  (``SIMUMAX_COLUMNS``), converted row by row in ``kernels.simumax_table``; rows that map to
  no kernel perfcast times are kept out and listed in ``KernelTable.skipped`` with a reason.

Each row is a dict of strings in perfcast's columns plus two optional tags:
``gemm_pass`` (forward, backward_dgrad, backward_wgrad; empty = any pass) and
``main_grad`` (fp32, bf16; empty = not a weight-gradient variant; ``DEFAULT_MAIN_GRAD``
is what a query without one matches).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from perfcast.errors import InputError

KERNEL_TABLE_COLUMNS: Final[tuple[str, ...]] = (
    "gpu", "kind", "precision", "m", "n", "k", "batch", "num_heads", "num_kv_heads", "seq_q",
    "seq_kv", "head_dim_qk", "head_dim_v", "causal", "backward", "bytes_moved", "time_s",
    "source",
)
"""Columns of a kernel table. ``kind``: gemm (m, n, k, batch), attention (batch, num_heads,
num_kv_heads, seq_q, seq_kv, head_dim_qk, head_dim_v, causal, backward) or memory
(bytes_moved); unused cells empty. ``gpu``: catalog name or alias; ``time_s``: seconds."""

OPTIONAL_COLUMNS: Final[tuple[str, ...]] = ("gemm_pass", "main_grad")
"""Optional tags of a GEMM row (empty when absent): the pass it was measured for (GEMM
layouts differ per pass: TN forward, NN dgrad, NT wgrad) and the weight-gradient output."""

DEFAULT_MAIN_GRAD: Final[str] = "fp32"
"""Weight gradients accumulate into an FP32 ``main_grad`` (Megatron-LM's default with
``--accumulate-allreduce-grads-in-fp32``); ``bf16`` rows (``grad_reduce_in_bf16``) are only
matched by a query that names them."""

SIMUMAX_COLUMNS: Final[tuple[str, ...]] = (
    "gpu", "kernel", "op_name", "stage", "dtype", "out_dtype", "layout", "b", "m", "n", "k",
    "groups", "main_grad_dtype", "batch", "seq_len", "head_num", "kv_head_num", "qk_head_dim",
    "v_head_dim", "qkv_contiguous", "flops_simumax_convention", "efficiency",
    "peak_tflops_used", "shape_key",
)
"""Columns of SimuMax's measured kernel table (shared/reference/measured_kernels/
simumax_kernels_README.md) that the conversion reads; their presence marks the layout."""


@dataclass(frozen=True, eq=False)
class KernelTable:
    """Measured rows of a kernel table, validated at load (``load_kernel_table``)."""

    rows: tuple[dict[str, str], ...]
    path: str
    layout: str = "perfcast"
    """``perfcast`` or ``simumax``: the layout the file was read in."""
    skipped: tuple[str, ...] = ()
    """One line per row kept out of ``rows`` (file line and reason)."""

    def gpu_names(self) -> set[str]:
        return {row["gpu"] for row in self.rows}


def table_gpu_name(name: str) -> str:
    """Catalog slug of a table's GPU name, or the name itself lower-cased when the catalog
    has no such GPU (it then matches a user-defined GPU of that name, e.g. from a system
    YAML; SimuMax's A100-PCIe has no catalog entry)."""
    from perfcast.catalog.gpus import resolve_gpu_name

    try:
        return resolve_gpu_name(name)
    except InputError:
        return name.strip().lower()


def load_kernel_table(path: Path | str) -> KernelTable:
    """Read a kernel table in either layout (detected from the header); ``InputError``
    naming the file for a missing file, a header of neither layout or an unknown GPU."""
    path = Path(path)
    if not path.is_file():
        raise InputError("kernel_table", str(path), "file not found")
    with path.open(newline="", encoding="utf-8") as f:
        lines = [line for line in f if not line.startswith("#")]
    reader = csv.DictReader(lines)
    header = set(reader.fieldnames or ())
    if set(SIMUMAX_COLUMNS) <= header:
        from perfcast.kernels.simumax_table import convert_simumax_rows

        rows, skipped = convert_simumax_rows(list(reader))
        if not rows:
            raise InputError("kernel_table", str(path), "no SimuMax row maps to a kernel")
        return KernelTable(tuple(rows), str(path), "simumax", tuple(skipped))
    missing = set(KERNEL_TABLE_COLUMNS) - header
    if missing:
        raise InputError("kernel_table", str(path),
                         f"missing columns {sorted(missing)} (neither perfcast's kernel table "
                         "nor a SimuMax measured_kernels table)")
    from perfcast.catalog.gpus import resolve_gpu_name

    rows = []
    for row in reader:
        row = {key: value or "" for key, value in row.items() if key is not None}
        row["gpu"] = resolve_gpu_name(row["gpu"])
        for column in OPTIONAL_COLUMNS:
            row.setdefault(column, "")
        rows.append(row)
    return KernelTable(tuple(rows), str(path))
