"""Measured kernel backend: interpolates a table of measured kernel times, analytical outside.

The table (CSV, ``KERNEL_TABLE_COLUMNS``; ``#`` lines are metadata: GPU name, driver, torch
version, date) holds measured times of GEMMs, attention passes and memory-bound kernels per
GPU. The backend times a kernel with the analytical model and corrects it by the measured/
analytical ratio interpolated over the table's points of the same GPU and kind: inverse-
distance weighting (Shepard 1968, power 2) of ln(ratio) in log-shape space, exact at table
points. A shape outside the bounding box of those points (per log dimension) gets ratio 1:
the analytical time; ``outside_table`` reports which. ``perfcast profile`` writes such tables;
``calibration/kernel_measured.csv`` is built from the published points of
``shared/reference/kernel_efficiency.csv`` by ``tools/build_kernel_measured_table.py``.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Final

import numpy as np

from perfcast.arrays import Bools, Floats
from perfcast.calibration._files import CALIBRATION_DIR
from perfcast.calibration.kernel_roofline import GEMM_CLASS
from perfcast.errors import InputError
from perfcast.kernels.analytical import AnalyticalBackend
from perfcast.kernels.backend import KernelBackendName
from perfcast.specs.hardware import GPUSpec, Precision
from perfcast.specs.strategy import AttentionKernel

KERNEL_MEASURED_PATH: Final[Path] = CALIBRATION_DIR / "kernel_measured.csv"

KERNEL_TABLE_COLUMNS: Final[tuple[str, ...]] = (
    "gpu", "kind", "precision", "m", "n", "k", "batch", "num_heads", "num_kv_heads", "seq_q",
    "seq_kv", "head_dim_qk", "head_dim_v", "causal", "backward", "bytes_moved", "time_s",
    "source",
)
"""Columns of a kernel table. ``kind``: gemm (m, n, k, batch), attention (batch, num_heads,
num_kv_heads, seq_q, seq_kv, head_dim_qk, head_dim_v, causal, backward) or memory
(bytes_moved); unused cells empty. ``gpu``: catalog name or alias; ``time_s``: seconds."""

IDW_POWER: Final[float] = 2.0
"""Inverse-distance weighting exponent (Shepard's method, 2 = the usual choice)."""


@dataclass(frozen=True)
class _Points:
    """Table points of one (gpu, kind, class, flags): log-shape features and ln(ratio)."""

    features: np.ndarray
    log_ratio: np.ndarray


def _features(kind: str, values: dict[str, Floats]) -> list[Floats]:
    keys = {"gemm": ("m", "n", "k", "batch"),
            "attention": ("batch", "num_heads", "seq_q", "seq_kv", "head_dim_qk"),
            "memory": ("bytes_moved",)}[kind]
    return [np.log(np.asarray(values[key], dtype=float)) for key in keys]


@dataclass(frozen=True, eq=False)
class KernelTable:
    """Measured rows of a kernel table, validated at load (``load_kernel_table``)."""

    rows: tuple[dict[str, str], ...]
    path: str

    def gpu_names(self) -> set[str]:
        return {row["gpu"] for row in self.rows}


def load_kernel_table(path: Path | str) -> KernelTable:
    """Read a kernel table; ``InputError`` naming the file for a missing file or column."""
    path = Path(path)
    if not path.is_file():
        raise InputError("kernel_table", str(path), "file not found")
    from perfcast.catalog.gpus import resolve_gpu_name

    with path.open(newline="", encoding="utf-8") as f:
        reader = csv.DictReader(line for line in f if not line.startswith("#"))
        missing = set(KERNEL_TABLE_COLUMNS) - set(reader.fieldnames or ())
        if missing:
            raise InputError("kernel_table", str(path), f"missing columns {sorted(missing)}")
        rows = []
        for row in reader:
            row = dict(row)
            row["gpu"] = resolve_gpu_name(row["gpu"])
            rows.append(row)
    return KernelTable(tuple(rows), str(path))


@cache
def _shipped_table() -> KernelTable:
    return load_kernel_table(KERNEL_MEASURED_PATH)


def _flag(text: str) -> bool:
    return text.strip().lower() in ("1", "true", "yes")


@dataclass(frozen=True, eq=False)
class MeasuredBackend:
    """Analytical times corrected by a measured table (shipped table by default)."""

    table: KernelTable = field(default_factory=_shipped_table)
    analytical: AnalyticalBackend = field(default_factory=AnalyticalBackend)
    name: KernelBackendName = KernelBackendName.MEASURED

    def _points(self, gpu: GPUSpec, kind: str, group: str, flags: tuple[bool, ...] = ()
                ) -> _Points | None:
        return _table_points(self, gpu.name, kind, group, flags)

    def _model_time(self, gpu: GPUSpec, kind: str, row: dict[str, str]) -> float:
        if kind == "gemm":
            return float(self.analytical.gemm_time_s(
                gpu, float(row["m"]), float(row["n"]), float(row["k"]), float(row["batch"]),
                row["precision"]))
        if kind == "attention":
            return float(self.analytical.attention_time_s(
                gpu, float(row["batch"]), float(row["num_heads"]), float(row["seq_q"]),
                float(row["seq_kv"]), float(row["head_dim_qk"]), float(row["head_dim_v"]),
                _flag(row["causal"]), _flag(row["backward"]), row["precision"],
                num_kv_heads=float(row["num_kv_heads"] or row["num_heads"])))
        return float(self.analytical.memory_bound_time_s(gpu, float(row["bytes_moved"])))

    def _ratio(self, points: _Points | None, kind: str, values: dict[str, Floats]
               ) -> tuple[Floats, Bools]:
        """(measured/analytical ratio, outside-table flag) at the query shapes."""
        if points is None:
            shape = np.broadcast(*_features(kind, values)).shape
            return np.ones(shape), np.ones(shape, dtype=bool)
        q = np.stack(np.broadcast_arrays(*_features(kind, values)), axis=-1)[..., None, :]
        lo, hi = points.features.min(axis=0), points.features.max(axis=0)
        inside = np.all((q[..., 0, :] >= lo - 1e-9) & (q[..., 0, :] <= hi + 1e-9), axis=-1)
        dist2 = np.sum((q - points.features) ** 2, axis=-1)
        exact = dist2 < 1e-18
        weights = np.where(exact.any(axis=-1, keepdims=True), exact * 1.0,
                           1.0 / np.maximum(dist2, 1e-18) ** (IDW_POWER / 2))
        log_ratio = np.sum(weights * points.log_ratio, axis=-1) / np.sum(weights, axis=-1)
        return np.where(inside, np.exp(log_ratio), 1.0), ~inside

    def gemm_time_s(self, gpu: GPUSpec, m: Floats, n: Floats, k: Floats, batch: Floats = 1,
                    precision: Precision = "bf16") -> Floats:
        """Analytical GEMM time × interpolated measured/analytical ratio, seconds."""
        ratio, _ = self._ratio(self._points(gpu, "gemm", GEMM_CLASS[precision]), "gemm",
                               {"m": m, "n": n, "k": k, "batch": batch})
        return self.analytical.gemm_time_s(gpu, m, n, k, batch, precision) * ratio

    def attention_time_s(
        self, gpu: GPUSpec, batch: Floats, num_heads: Floats, seq_q: Floats, seq_kv: Floats,
        head_dim_qk: Floats, head_dim_v: Floats, causal: Bools, backward: bool,
        precision: Precision = "bf16", *, num_kv_heads: Floats | None = None,
        kernel: AttentionKernel = "auto",
    ) -> Floats:
        """Analytical attention time × interpolated ratio (same direction and mask), s.
        The table measures the local GPU's default kernel; ``kernel`` scales the model."""
        values = {"batch": batch, "num_heads": num_heads, "seq_q": seq_q, "seq_kv": seq_kv,
                  "head_dim_qk": head_dim_qk}
        group = GEMM_CLASS[precision]
        r_causal, _ = self._ratio(self._points(gpu, "attention", group, (True, backward)),
                                  "attention", values)
        r_full, _ = self._ratio(self._points(gpu, "attention", group, (False, backward)),
                                "attention", values)
        model = self.analytical.attention_time_s(
            gpu, batch, num_heads, seq_q, seq_kv, head_dim_qk, head_dim_v, causal, backward,
            precision, num_kv_heads=num_kv_heads, kernel=kernel)
        return model * np.where(causal, r_causal, r_full)

    def memory_bound_time_s(self, gpu: GPUSpec, bytes_moved: Floats) -> Floats:
        """Analytical memory-bound time × interpolated ratio, seconds."""
        ratio, _ = self._ratio(self._points(gpu, "memory", "any"), "memory",
                               {"bytes_moved": bytes_moved})
        return self.analytical.memory_bound_time_s(gpu, bytes_moved) * ratio

    def outside_table(self, gpu: GPUSpec, kind: str, precision: Precision = "bf16",
                      causal: bool = False, backward: bool = False, **shape: Floats) -> Bools:
        """True where a shape lies outside the table's points for ``gpu`` and ``kind``
        (``gemm``: m, n, k, batch; ``attention``: batch, num_heads, seq_q, seq_kv,
        head_dim_qk; ``memory``: bytes_moved) and is timed analytically."""
        group = "any" if kind == "memory" else GEMM_CLASS[precision]
        flags = (causal, backward) if kind == "attention" else ()
        return self._ratio(self._points(gpu, kind, group, flags), kind, shape)[1]


@cache
def _table_points(backend: MeasuredBackend, gpu_name: str, kind: str, group: str,
                  flags: tuple[bool, ...]) -> _Points | None:
    """Features and ln(measured/analytical) of the table rows matching the query, cached."""
    from perfcast.catalog.gpus import load_gpu

    rows = [r for r in backend.table.rows if r["gpu"] == gpu_name and r["kind"] == kind
            and (kind == "memory" or GEMM_CLASS[r["precision"]] == group)
            and (kind != "attention" or (_flag(r["causal"]), _flag(r["backward"])) == flags)]
    if not rows:
        return None
    gpu = load_gpu(gpu_name)
    features = np.array([[float(f) for f in _features(kind, r)] for r in rows])
    log_ratio = np.array([np.log(float(r["time_s"]) / backend._model_time(gpu, kind, r))
                          for r in rows])
    return _Points(features, log_ratio)
