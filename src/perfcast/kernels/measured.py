"""Measured kernel backend: interpolates a table of measured kernel times, analytical outside.

The table (``kernels.kernel_table``: perfcast's layout or SimuMax's measured_kernels layout)
holds measured times of GEMMs, attention passes and memory-bound kernels per GPU. The backend
times a kernel with the analytical model and corrects it by the measured/analytical ratio
interpolated over the table's points of the same GPU, kind, precision class (and, for GEMMs,
pass and main-gradient variant when the table tags them): inverse-distance weighting
(Shepard 1968, power 2) of ln(ratio) in log-shape space, exact at table points and bounded by
the ratios of the points. A shape outside the bounding box of those points (per log
dimension), or with no point of its kind at all, gets ratio 1: the analytical time, per op;
``outside_table`` reports which (``schedule.kernel_coverage`` lists them per step).
``perfcast profile`` writes such tables; ``calibration/kernel_measured.csv`` is built from the
published points of ``shared/reference/kernel_efficiency.csv`` by
``tools/build_kernel_measured_table.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import Final

import numpy as np

from perfcast.arrays import Bools, Floats
from perfcast.calibration._files import CALIBRATION_DIR
from perfcast.calibration.attention_kernels import AttentionKernelCalibration
from perfcast.calibration.kernel_roofline import GEMM_CLASS
from perfcast.errors import InputError
from perfcast.kernels.analytical import AnalyticalBackend
from perfcast.kernels.backend import KernelBackendName
from perfcast.kernels.kernel_table import (
    DEFAULT_MAIN_GRAD,
    KERNEL_TABLE_COLUMNS,
    KernelTable,
    load_kernel_table,
)
from perfcast.kernels.roofline import RooflineBackend
from perfcast.specs.hardware import GPUSpec, Precision, as_precision
from perfcast.specs.strategy import AttentionKernel

__all__ = ["KERNEL_MEASURED_PATH", "KERNEL_TABLE_COLUMNS", "KernelTable", "MeasuredBackend",
           "load_kernel_table", "measured_backend_for_table"]

KERNEL_MEASURED_PATH: Final[Path] = CALIBRATION_DIR / "kernel_measured.csv"

IDW_POWER: Final[float] = 2.0
"""Inverse-distance weighting exponent (Shepard's method, 2 = the usual choice)."""


@dataclass(frozen=True)
class _Points:
    """Table points of one (gpu, kind, class, flags): log-shape features and ln(ratio)."""

    features: np.ndarray
    log_ratio: np.ndarray


_FEATURES: Final[dict[str, tuple[str, ...]]] = {
    "gemm": ("m", "n", "k", "batch"),
    "attention": ("batch", "num_heads", "num_kv_heads", "seq_q", "seq_kv", "head_dim_qk"),
    "memory": ("bytes_moved",),
}
"""Shape dimensions a table point is located by (natural log of each)."""


def _features(kind: str, values: Mapping[str, Floats | str]) -> list[Floats]:
    return [np.log(np.asarray(values[key], dtype=float)) for key in _FEATURES[kind]]


@cache
def _shipped_table() -> KernelTable:
    return load_kernel_table(KERNEL_MEASURED_PATH)


def _flag(text: str) -> bool:
    return text.strip().lower() in ("1", "true", "yes")


@dataclass(frozen=True)
class _Query:
    """Which table points a query may use: kind, precision class and tags."""

    kind: str
    group: str
    flags: tuple[bool, ...] = ()
    gemm_pass: str | None = None
    main_grad: str = DEFAULT_MAIN_GRAD


@dataclass(frozen=True, eq=False)
class MeasuredBackend:
    """Analytical times corrected by a measured table (shipped table by default)."""

    table: KernelTable = field(default_factory=_shipped_table)
    analytical: AnalyticalBackend = field(default_factory=AnalyticalBackend)
    name: KernelBackendName = KernelBackendName.MEASURED

    @property
    def attention_kernels(self) -> AttentionKernelCalibration:
        """Derived kernel classes (``KernelBackend``): its analytical backend's."""
        return self.analytical.attention_kernels

    @property
    def roofline_layer(self) -> RooflineBackend:
        """The roofline backend under its analytical one, whose parameters the serving
        formulas take (``estimate.inference_kernels.roofline_params``)."""
        return self.analytical.roofline

    def with_attention_kernels(self, kernels: AttentionKernelCalibration) -> MeasuredBackend:
        """This backend with derived kernel classes ``kernels`` (``KernelBackend``)."""
        analytical = self.analytical.with_attention_kernels(kernels)
        return self if analytical is self.analytical else replace(self, analytical=analytical)

    def _points(self, gpu: GPUSpec, query: _Query) -> _Points | None:
        return _table_points(self, _reference_gpu(gpu), query)

    def _model_time(self, gpu: GPUSpec, kind: str, row: dict[str, str]) -> float:
        if kind == "gemm":
            return float(self.analytical.gemm_time_s(
                gpu, float(row["m"]), float(row["n"]), float(row["k"]), float(row["batch"]),
                as_precision(row["precision"], "kernel_table precision")))
        if kind == "attention":
            return float(self.analytical.attention_time_s(
                gpu, float(row["batch"]), float(row["num_heads"]), float(row["seq_q"]),
                float(row["seq_kv"]), float(row["head_dim_qk"]), float(row["head_dim_v"]),
                _flag(row["causal"]), _flag(row["backward"]),
                as_precision(row["precision"], "kernel_table precision"),
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
                    precision: Precision = "bf16", *, gemm_pass: str | None = None,
                    main_grad: str = DEFAULT_MAIN_GRAD, grouped: bool = False) -> Floats:
        """Analytical GEMM time × interpolated measured/analytical ratio, seconds.
        ``gemm_pass`` (a ``graph.ops.Phase`` value) restricts the points to rows measured
        for that pass (plus untagged rows) when the table has any; None uses every pass.
        ``grouped`` goes to the analytical model (its grouped-GEMM efficiency)."""
        query = _Query("gemm", GEMM_CLASS[precision], (), gemm_pass, main_grad)
        ratio, _ = self._ratio(self._points(gpu, query), "gemm",
                               {"m": m, "n": n, "k": k, "batch": batch})
        return self.analytical.gemm_time_s(gpu, m, n, k, batch, precision,
                                           grouped=grouped) * ratio

    def attention_time_s(
        self, gpu: GPUSpec, batch: Floats, num_heads: Floats, seq_q: Floats, seq_kv: Floats,
        head_dim_qk: Floats, head_dim_v: Floats, causal: Bools, backward: bool,
        precision: Precision = "bf16", *, num_kv_heads: Floats | None = None,
        kernel: AttentionKernel = "auto",
    ) -> Floats:
        """Analytical attention time × interpolated ratio (same direction and mask), s.
        The table measures the local GPU's default kernel; ``kernel`` scales the model."""
        values = _attention_values(batch, num_heads, num_kv_heads, seq_q, seq_kv, head_dim_qk)
        group = GEMM_CLASS[precision]
        r_causal, _ = self._ratio(
            self._points(gpu, _Query("attention", group, (True, backward))), "attention", values)
        r_full, _ = self._ratio(
            self._points(gpu, _Query("attention", group, (False, backward))), "attention", values)
        model = self.analytical.attention_time_s(
            gpu, batch, num_heads, seq_q, seq_kv, head_dim_qk, head_dim_v, causal, backward,
            precision, num_kv_heads=num_kv_heads, kernel=kernel)
        return model * np.where(causal, r_causal, r_full)

    def memory_bound_time_s(self, gpu: GPUSpec, bytes_moved: Floats) -> Floats:
        """Analytical memory-bound time × interpolated ratio, seconds."""
        ratio, _ = self._ratio(self._points(gpu, _Query("memory", "any")), "memory",
                               {"bytes_moved": bytes_moved})
        return self.analytical.memory_bound_time_s(gpu, bytes_moved) * ratio

    def outside_table(self, gpu: GPUSpec, kind: str, precision: Precision = "bf16",
                      causal: bool = False, backward: bool = False,
                      gemm_pass: str | None = None, **shape: Floats) -> Bools:
        """True where a shape lies outside the table's points for ``gpu`` and ``kind`` and is
        timed analytically (``gemm``: m, n, k, batch; ``attention``: batch, num_heads,
        seq_q, seq_kv, head_dim_qk and optionally num_kv_heads; ``memory``: bytes_moved)."""
        group = "any" if kind == "memory" else GEMM_CLASS[precision]
        flags = (causal, backward) if kind == "attention" else ()
        if kind == "attention":
            shape = _attention_values(shape["batch"], shape["num_heads"],
                                      shape.get("num_kv_heads"), shape["seq_q"],
                                      shape["seq_kv"], shape["head_dim_qk"])
        query = _Query(kind, group, flags, gemm_pass if kind == "gemm" else None)
        return self._ratio(self._points(gpu, query), kind, shape)[1]


@cache
def measured_backend_for_table(path: str) -> MeasuredBackend:
    """A measured backend over the kernel table at ``path`` (loaded once per process)."""
    return MeasuredBackend(table=load_kernel_table(path))


def _attention_values(batch, num_heads, num_kv_heads, seq_q, seq_kv, head_dim_qk
                      ) -> dict[str, Floats]:
    return {"batch": batch, "num_heads": num_heads,
            "num_kv_heads": num_heads if num_kv_heads is None else num_kv_heads,
            "seq_q": seq_q, "seq_kv": seq_kv, "head_dim_qk": head_dim_qk}


def _reference_gpu(gpu: GPUSpec) -> GPUSpec:
    """The GPU the table's analytical ratios are taken against: the catalog entry of that name
    at its own clock (a clock override then scales the forecast), else ``gpu`` unclocked."""
    from perfcast.catalog.gpus import load_gpu

    try:
        return load_gpu(gpu.name)
    except InputError:
        return gpu.model_copy(update={"clock_override_Hz": None})


def _matching_rows(table: KernelTable, gpu_name: str, query: _Query) -> list[dict[str, str]]:
    """Rows of ``gpu_name`` a query may use (``_Query``): same kind, precision class and
    attention flags; for GEMMs the query's main-gradient variant and, when the table tags
    any row with the query's pass, those rows and untagged ones."""
    kind = query.kind
    name = gpu_name.lower()
    rows = [r for r in table.rows if r["gpu"].lower() == name and r["kind"] == kind
            and (kind == "memory"
                 or GEMM_CLASS[as_precision(r["precision"], "kernel_table precision")]
                 == query.group)
            and (kind != "attention" or (_flag(r["causal"]), _flag(r["backward"])) == query.flags)]
    if kind != "gemm":
        return rows
    rows = [r for r in rows if r.get("main_grad", "") in ("", query.main_grad)]
    if query.gemm_pass and any(r.get("gemm_pass") == query.gemm_pass for r in rows):
        rows = [r for r in rows if r.get("gemm_pass", "") in ("", query.gemm_pass)]
    return rows


@cache
def _table_points(backend: MeasuredBackend, gpu: GPUSpec, query: _Query) -> _Points | None:
    """Features and ln(measured/analytical) of the table rows matching the query, cached."""
    rows = _matching_rows(backend.table, gpu.name, query)
    if not rows:
        return None
    if query.kind == "attention":
        rows = [dict(r, num_kv_heads=r["num_kv_heads"] or r["num_heads"]) for r in rows]
    features = np.array([[float(f) for f in _features(query.kind, r)] for r in rows])
    log_ratio = np.array([np.log(float(r["time_s"]) / backend._model_time(gpu, query.kind, r))
                          for r in rows])
    return _Points(features, log_ratio)
