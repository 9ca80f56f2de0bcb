"""Write fitted calibrations as the YAML files ``load_calibration(DIR)`` reads.

Each file keeps the schema of the shipped one and gains a ``fit:`` block
(``calibration.fit_record.FitRecord``): sha256 of the data, rows used, kernel backend, date,
loss, and per fitted parameter its value, standard error and ``at_bound`` flag. Values are
rounded to ``DIGITS`` significant digits (the round-trip test compares within that rounding).
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from perfcast.calibration.bundle import FILE_NAMES, Calibration
from perfcast.calibration.fit_record import FitRecord, ParameterRecord
from perfcast.validate.fit_training import ratio_name, scaled_gemm_name
from perfcast.validate.least_squares_fit import LOSS_TEXT, ParameterEstimate

DIGITS = 4
"""Significant digits written for fitted values and standard errors."""
TOOL = "perfcast calibrate"


def _round(value: float) -> float:
    return float(f"{float(value):.{DIGITS}g}")


def _sig(value: float | None) -> float | None:
    return None if value is None else float(f"{value:.{DIGITS}g}")


def fit_record(parameters: Sequence[ParameterEstimate], data_sha256: dict[str, str],
               num_rows: int, kernel_backend: str, date: str | None = None,
               loss: str = LOSS_TEXT) -> FitRecord:
    """The ``fit:`` block for ``parameters`` (rounded as written)."""
    return FitRecord(
        tool=TOOL, date=date or datetime.date.today().isoformat(), data_sha256=data_sha256,
        num_rows=num_rows, kernel_backend=kernel_backend, loss=loss,
        parameters={p.name: ParameterRecord(value=_round(p.value),
                                            standard_error=_sig(p.standard_error),
                                            at_bound=p.at_bound, low=p.low, high=p.high)
                    for p in parameters})


def _header(key: str, what: str) -> str:
    return (f"# {what}\n# Written by `{TOOL}` (perfcast/validate/calibration_writer.py); the fit:"
            f" block says\n# from which data. Loaded by perfcast/calibration/{key}.py.\n")


def _dump(model: Any, fit: FitRecord) -> str:
    data = model.model_dump(mode="json", exclude_none=True)
    data["fit"] = fit.model_dump(mode="json")
    ordered = {"fit": data.pop("fit"), **data}
    return yaml.safe_dump(ordered, sort_keys=False, width=100, allow_unicode=True)


SCALED_GEMM_SOURCE = {
    "rowwise": (
        "torch._scaled_mm with per-row scale vectors (torchao float8 rowwise recipes): the "
        "CUTLASS f8f8bf16_rowwise kernel on SM90 (aten native/cuda/RowwiseScaledMM.cu), "
        "hipBLASLt's vector-scale path on ROCm, over the tensorwise cuBLASLt/hipBLASLt GEMM the "
        "kernel efficiencies describe (kernels/scaled_gemm.py). No kernel measurement of the "
        "pair in shared/reference; torchao's README e2e table (Llama-3-8B, 8 H100): tensorwise "
        "+25% over BF16, rowwise +10%."),
    "block-scaled": (
        "Blackwell block-scaled MMA (PTX tcgen05.mma kind::mxf8f6f4 / kind::mxf4nvf4 "
        ".block_scale: a scale-factor tile per K-block copied into tensor memory, scales in "
        "the 32x4x4 swizzled layout cuBLAS and torch._scaled_mm take) of the MXFP8 and NVFP4 "
        "recipes, over the tensorwise FP8 GEMM (FP4: at the FP4 peak) the kernel efficiencies "
        "describe (kernels/scaled_gemm.py). No block-scaled GEMM measurement in "
        "shared/reference (kernel_efficiency.csv has plain FP8 torch._scaled_mm bursts only)."),
}
"""Kernel class -> what its fitted time ratio stands for (``kernels.scaled_gemm``)."""


def write_training_files(calibration: Calibration, parameters: Sequence[ParameterEstimate],
                         out_dir: Path, data_sha256: dict[str, str], num_rows: int,
                         kernel_backend: str, cv_ranges: dict[str, tuple[float, float]]
                         | None = None) -> list[Path]:
    """Write training_overheads.yaml, comm_overlap.yaml and attention_kernels.yaml of a
    training fit into ``out_dir``; returns the paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    cv_ranges = cv_ranges or {}
    by_file: dict[str, list[ParameterEstimate]] = {k: [] for k in FILE_NAMES}
    for p in parameters:
        key = ("training_overheads" if p.name.startswith("compute_overhead_fraction")
               else "attention_kernels" if p.name.startswith(("attention_time_ratio",
                                                                "scaled_gemm_time_ratio"))
               else "comm_overlap")
        by_file[key].append(p)

    def record(key: str) -> FitRecord:
        return fit_record(by_file[key], data_sha256, num_rows, kernel_backend)

    def cv_note(name: str) -> str:
        span = cv_ranges.get(name)
        return (f" Leave-one-source-out range {span[0]:.3f}-{span[1]:.3f}." if span else "")

    overheads = calibration.training_overheads
    overheads = overheads.model_copy(update={"generations": {
        g: e.model_copy(update={"compute_overhead_fraction": _round(e.compute_overhead_fraction)})
        for g, e in sorted(overheads.generations.items())}})
    overlap = calibration.comm_overlap
    key = "stream_overlap_exposed_fraction"
    entry = getattr(overlap, key)
    overlap = overlap.model_copy(update={key: entry.model_copy(update={
        "value": _round(entry.value),
        "source": ("Critical-path seconds per overlapped second of a collective issued on its "
                   "own stream (DDP/ZeRO gradient reduction, ZeRO-3/FSDP gathers, the CP K/V "
                   "ring; schedule/overlap.py), one value for every generation, fitted jointly "
                   f"with the per-generation overheads on {num_rows} measured rows."
                   + cv_note(key))})})
    kernels = calibration.attention_kernels
    derived = {}
    for name, d in kernels.derived.items():
        if d.method == "fitted":
            by_generation = {g: _round(r) for g, r in sorted(d.time_ratio_by_generation.items())}
            own = "".join(f" {g}: its own ratio, fitted on its rows alike."
                          + cv_note(ratio_name(name, g)) for g in by_generation)
            d = d.model_copy(update={
                "time_ratio": _round(d.time_ratio), "time_ratio_by_generation": by_generation,
                "source": (
                    f"fitted jointly with the per-generation overheads on {num_rows} measured "
                    f"rows (its rows: those whose framework runs the {name} kernel)."
                    + cv_note(ratio_name(name)) + own
                    + " Cross-check: the FlashAttention-2 paper (Dao 2023, §4.1) measures "
                    "FlashAttention-2 1.3-2.5x faster than the FlashAttention Triton kernel on "
                    "A100; on H100 the Triton tutorial kernel is at or above FA2's speed "
                    "(kernel_efficiency.csv lines 336, 161-166).")})
        derived[name] = d
    scaled = {name: g.model_copy(update={
        "time_ratio": _round(g.time_ratio),
        "source": (SCALED_GEMM_SOURCE[name] + f" Fitted jointly with the per-generation overheads on "
                   f"{num_rows} measured rows (its rows: those whose FP8 recipe runs the {name} "
                   "kernel)." + cv_note(scaled_gemm_name(name)))})
        if g.method == "fitted" else g for name, g in kernels.scaled_gemm.items()}
    kernels = kernels.model_copy(update={"derived": derived, "scaled_gemm": scaled})
    texts = {
        "training_overheads": _header("training_overheads", "Training overhead per GPU generation"
                                      ": critical-path kernels take (1 + f) x the kernel model's "
                                      "time;\n# default = the pooled fit, used (and flagged) for "
                                      "generations without enough rows.")
        + _dump(overheads, record("training_overheads")),
        "comm_overlap": _header("comm_overlap", "Compute slowdown and exposure of communication "
                                "overlapped with compute; only\n# stream_overlap_exposed_fraction"
                                " is fitted, the other entries are carried over.")
        + _dump(overlap, record("comm_overlap")),
        "attention_kernels": _header("attention_kernels", "Fused-attention kernel classes timed "
                                     "as a calibrated class times time_ratio.\n# triton is "
                                     "fitted end to end: shared/reference holds no kernel "
                                     "measurement of the FlashAttention\n# Triton kernel against "
                                     "FA2 (kernel_efficiency.csv line 336 is the Triton tutorial "
                                     "kernel vs FA3\n# on H100; simumax_kernels.csv has FA2/TE "
                                     "kernels only).\n# time_ratio_by_generation: a generation's "
                                     "own ratio (the pair's relative speed differs by\n# "
                                     "architecture).")
        + _dump(kernels, record("attention_kernels")),
    }
    paths = []
    for key, text in texts.items():
        path = out_dir / FILE_NAMES[key]
        path.write_text(text, encoding="utf-8")
        paths.append(path)
    return paths


def write_inference_file(text_model: Any, parameters: Sequence[ParameterEstimate], out_dir: Path,
                         data_sha256: dict[str, str], num_rows: int) -> Path:
    """Write inference_overheads.yaml of a serving fit into ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / FILE_NAMES["inference_overheads"]
    text_model = text_model.model_copy(update={
        "generations": {g: b.model_copy(update={
            k: _round(getattr(b, k)) for k in ("step_overhead_s", "layer_overhead_s",
                                               "prefill_layer_overhead_s",
                                               "prefill_overhead_fraction",
                                               "bandwidth_efficiency")})
            for g, b in text_model.generations.items()},
        "gqa_kv_read_exponent": _round(text_model.gqa_kv_read_exponent),
        "dequant_bandwidth_efficiency": {k: _round(v) for k, v in
                                         text_model.dequant_bandwidth_efficiency.items()}})
    record = fit_record(parameters, data_sha256, num_rows, "roofline")
    path.write_text(_header("inference_overheads", "Serving overheads per GPU generation; "
                            "default = the pooled fit.") + _dump(text_model, record),
                    encoding="utf-8")
    return path


def write_graph_replay_file(fit: Any, out_dir: Path, data_sha256: dict[str, str],
                            ranges: dict[str, tuple[float, float]]) -> Path:
    """Write graph_replay.yaml of a kernel-gap fit (``validate.fit_graph_replay``);
    ``ranges``: parameter name -> (min, max) over the leave-one-source-out folds."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / FILE_NAMES["graph_replay"]
    from perfcast.validate.fit_graph_replay import LOSS_TEXT as GAP_LOSS

    record = fit_record(fit.parameters, data_sha256, fit.rows_used, "roofline", loss=GAP_LOSS)
    vendors = {}
    for vendor, entry in fit.calibration.vendors.items():
        span = ranges.get(f"kernel_gap_s[{vendor}]")
        vendors[vendor] = entry.model_copy(update={
            "kernel_gap_s": _round(entry.kernel_gap_s),
            "loso_range_s": None if span is None else (_round(span[0]), _round(span[1]))})
    model = fit.calibration.model_copy(update={"vendors": vendors})
    path.write_text(_header("graph_replay", "Device time per dependent-kernel boundary in a "
                            "replayed CUDA/HIP graph (graphed decode steps),\n# per GPU vendor.")
                    + _dump(model, record), encoding="utf-8")
    return path


def write_routing_file(fit: Any, out_dir: Path, data_sha256: dict[str, str],
                       kernel_backend: str) -> Path:
    """Write moe_routing.yaml of a routing fit (``validate.fit_moe_routing.RoutingFit``)."""
    from perfcast.validate.fit_moe_routing import routing_calibration

    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / FILE_NAMES["moe_routing"]
    record = fit_record([] if fit.fallback else [fit.estimate], data_sha256,
                        2 * len(fit.pairs), kernel_backend)
    model = routing_calibration(fit)
    path.write_text(_header("moe_routing", "Routing facts of MoE training that no input states"
                            ": the busiest EP rank's routed tokens over\n# the mean under "
                            "dropless learned routing (graph/stage.py moe_load_imbalance).")
                    + _dump(model, record), encoding="utf-8")
    return path


def write_intervals_file(intervals: Any, out_dir: Path, data_sha256: dict[str, str],
                         num_rows: int, kernel_backend: str) -> Path:
    """Write forecast_intervals.yaml (bands from cross-validated residuals)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / FILE_NAMES["intervals"]
    record = fit_record([], data_sha256, num_rows, kernel_backend)
    rounded = intervals.model_copy(update={kind: _rounded_bands(getattr(intervals, kind))
                                           for kind in ("training", "serving")})
    path.write_text(_header("forecast_intervals", "80% forecast bands of a new source: per group "
                            "of comparable runs, the double-conformal\n# band (Dunn, Wasserman & "
                            "Ramdas 2023) of log(forecast time / measured time) of leave-one-\n"
                            "# source-out forecasts, in log space, and their random-effects "
                            "moments.")
                    + _dump(rounded, record), encoding="utf-8")
    return path


def _rounded_bands(bands: Any) -> Any:
    """``bands`` with every float written to ``DIGITS`` significant digits."""
    floats = ("center", "between_var", "within_var", "low", "high")
    return bands.model_copy(update={
        "cv_coverage": _sig(bands.cv_coverage),
        "cv_coverage_by_source": _sig(bands.cv_coverage_by_source),
        "cv_median_half_width": _sig(bands.cv_median_half_width),
        "groups": {k: b.model_copy(update={f: _round(getattr(b, f)) for f in floats})
                   for k, b in bands.groups.items()}})
