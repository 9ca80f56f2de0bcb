"""Fit the serving overheads (``inference_overheads.yaml``) on measured inference rows.

Parameters, each shared by every row of its scope (no row, model or source singled out):

* per GPU generation with at least ``MIN_ROWS_PER_GENERATION`` rows (``GENERATION_PARAMS``):
  host seconds per layer, extra seconds per prefill layer and the prefill slowdown fraction;
* ``default``: the same three fitted on every row pooled, used (and flagged) for generations
  with fewer rows;
* not fitted (``FIXED_GENERATION_VALUES``, each with the reason): the host seconds per step and
  the share of the kernel model's HBM rate (both were fitted before and sat at their bounds);
* global: ``gqa_kv_read_exponent`` and the weight-only dequantization efficiencies.

Rows: every forecast row of an inference.csv-schema file except measured memory (fitted by
tools/fit_memory_overheads.py) and, by default, except rows served at fixed concurrency or
request rate (``batching: continuous``): their scheduler is not modelled yet and would pull
the overheads toward its error. Method: ``least_squares_fit.solve`` on log(pred/meas), every
generation block and the globals jointly, then the pooled block with the globals fixed; the
forecasts of a trial come from a ``ServingTable`` built once (``serving_table``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from perfcast.calibration.bundle import Calibration
from perfcast.calibration.inference_overheads import InferenceOverhead, InferenceOverheads
from perfcast.specs.inference import DEQUANT_CLASS
from perfcast.validate.inference_rows import InferenceCase
from perfcast.validate.least_squares_fit import Bounded, ParameterEstimate, solve
from perfcast.validate.serving_rows import ServingCase
from perfcast.validate.serving_table import BANDWIDTH_GRID, DEQUANT_GRID, ServingTable

MIN_ROWS_PER_GENERATION = 10
MEMORY_METRIC = "gpu_memory_usage"
GENERATION_PARAMS: dict[str, tuple[float, float, float, float]] = {
    # name: (start, low, high, solver unit)
    "layer_overhead_s": (10e-6, 0.0, 500e-6, 1e-6),
    "prefill_layer_overhead_s": (10e-6, 0.0, 500e-6, 1e-6),
    "prefill_overhead_fraction": (0.1, 0.0, 2.0, 1.0),
}
"""Start, bounds (SI) and the unit the solver works in (microseconds for times)."""
FIXED_GENERATION_VALUES: dict[str, float] = {
    "step_overhead_s": 0.0,
    "bandwidth_efficiency": BANDWIDTH_GRID[-1],
}
"""Serving-overhead fields held fixed, with why (both sat at a bound when fitted: 0 s with no
standard error, and 1.0 with standard error 0.02-0.1, on 422 rows, 2026-11-24):

* ``bandwidth_efficiency`` = 1: the HBM rate of a serving step is the kernel model's own
  achievable rate, ``hbm_efficiency`` of calibration/kernel_roofline.yaml, measured on
  memory-bound kernels (FlashInfer decode, Triton pointwise; 0.861 of peak on Ampere, 0.897 on
  Hopper, shared/reference/kernel_efficiency.csv). Decode steps stream weights and KV at that
  rate; a second factor on top of the measured one has no mechanism of its own.
* ``step_overhead_s`` = 0: static engines keep the decode loop on the device or replay it
  (FasterTransformer checks finished sequences on the GPU; gpt-fast replays a CUDA graph;
  TensorRT-LLM's gptSession runs ahead of the GPU), so the host time per step is hidden behind
  the queued kernels; host time is charged per layer (``layer_overhead_s``) and per step only
  where an engine profile says so (``estimate.serving_step_cost``)."""
GLOBAL_PARAMS: dict[str, tuple[float, float, float]] = {
    "gqa_kv_read_exponent": (0.5, 0.0, 1.0),
    "dequant_bandwidth_efficiency[int8]": (0.8, DEQUANT_GRID[0], DEQUANT_GRID[-1]),
    "dequant_bandwidth_efficiency[int4]": (0.6, DEQUANT_GRID[0], DEQUANT_GRID[-1]),
}
POOLED_KEY = "default"


CONCURRENCY_BATCHING = ("continuous", "offline")
"""``batching`` texts of rows served at fixed concurrency / request rate / max throughput."""


@dataclass(frozen=True)
class ServingRows:
    """Parsed inference rows, and which were measured at concurrency (``batching`` column)."""

    cases: tuple[InferenceCase | ServingCase, ...]
    concurrency_ids: frozenset[str]
    skipped: tuple = ()

    def is_concurrency(self, case: InferenceCase) -> bool:
        return case.row_id in self.concurrency_ids

    def fit_cases(self, exclude_source: str | None = None) -> list[InferenceCase]:
        """Rows the serving fit uses (module docstring), without ``exclude_source``: rows
        forecast by ``estimate_inference``; rows simulated through an engine scheduler
        (``ServingCase``, ``validate.serving_rows``) are forecast and reported, not fitted."""
        return [c for c in self.cases if isinstance(c, InferenceCase)
                and c.metric != MEMORY_METRIC
                and not self.is_concurrency(c) and c.source_id != exclude_source]


def load_inference_cases(paths: Sequence[Path]) -> ServingRows:
    """Parse inference.csv-schema files."""
    from perfcast.validate.inference_compare import parse_inference_rows
    from perfcast.validate.training_rows import read_rows

    raw = [row for p in paths for row in read_rows(Path(p))]
    concurrency = frozenset(
        (row.get("row_id") or "").strip() for row in raw
        if (row.get("batching") or "").strip().lower().startswith(CONCURRENCY_BATCHING))
    cases, skipped = parse_inference_rows(raw)
    return ServingRows(tuple(cases), concurrency, tuple(skipped))


@dataclass(frozen=True)
class InferenceFit:
    """Fitted serving overheads: estimates (SI units), the calibration they make, rows used,
    and the generations that take the pooled block."""
    parameters: tuple[ParameterEstimate, ...]
    calibration: Calibration
    rows_used: int
    rows_by_generation: dict[str, int]
    fallback_generations: tuple[str, ...]
    row_ids: tuple[str, ...] = ()
    residuals: tuple[float, ...] = ()
    """log(predicted/measured) of each fit row (response table) under the fitted values."""


def _overheads(blocks: dict[str, dict[str, float]], glob: dict[str, float],
               base: InferenceOverheads, counts: Counter) -> InferenceOverheads:
    generations = {}
    for g, values in blocks.items():
        rows = sum(counts.values()) if g == POOLED_KEY else counts[g]
        scope = "every generation pooled" if g == POOLED_KEY else f"{g} GPUs"
        generations[g] = InferenceOverhead(**values, source=(
            f"fitted on {rows} rows ({scope}); step_overhead_s and bandwidth_efficiency fixed "
            "(perfcast.validate.fit_inference.FIXED_GENERATION_VALUES)"))
    return base.model_copy(update={
        "generations": generations,
        "gqa_kv_read_exponent": glob["gqa_kv_read_exponent"],
        "dequant_bandwidth_efficiency": {
            "int8": glob["dequant_bandwidth_efficiency[int8]"],
            "int4": glob["dequant_bandwidth_efficiency[int4]"]}})


def _dequant_key(case: InferenceCase) -> str:
    """The row's dequantization class (``specs.inference.DEQUANT_CLASS``; fp4 weights under
    16-bit activations take the int4 efficiency), "" when not weight-only."""
    weights = str(case.options.get("weight_precision") or "")
    return DEQUANT_CLASS.get(weights, "") if case.options.get("precision") in (
        "bf16", "fp16") else ""


def fit_inference(rows: ServingRows, base: Calibration, exclude_source: str | None = None,
                  table: ServingTable | None = None) -> InferenceFit:
    """Fit the serving overheads on ``rows.fit_cases(exclude_source)`` (``table``: a
    ``ServingTable`` of ``rows.fit_cases()``, built when None)."""
    from perfcast.estimate.inference import estimate_inference

    table = table or ServingTable(rows.fit_cases(), base, estimate_inference)
    mask = np.array([c.source_id != exclude_source for c in table.cases], bool)
    gens = np.array(table.generation)
    counts = Counter(gens[mask].tolist())
    fitted = sorted(g for g, n in counts.items() if n >= MIN_ROWS_PER_GENERATION)
    names, units = list(GENERATION_PARAMS), np.array([v[3] for v in GENERATION_PARAMS.values()])
    k = len(names)
    dq_keys = [_dequant_key(c) for c in table.cases]
    log_measured = np.log(table.measured)

    def predict(blocks: dict[str, dict[str, float]], glob: dict[str, float]) -> np.ndarray:
        start = FIXED_GENERATION_VALUES | {n: v[0] for n, v in GENERATION_PARAMS.items()}
        per_row = [blocks.get(g) or blocks.get(POOLED_KEY) or start for g in table.generation]
        dq = [glob.get(f"dequant_bandwidth_efficiency[{k}]", 1.0) for k in dq_keys]
        return table.predicted(per_row, glob["gqa_kv_read_exponent"], dq)

    def unpack(x: np.ndarray, keys: Sequence[str]) -> dict[str, dict[str, float]]:
        return {g: FIXED_GENERATION_VALUES | dict(zip(
            names, (x[k * j:k * j + k] * units).tolist(), strict=True)) for j, g in enumerate(keys)}

    bounded = [Bounded(f"{n}[{g}]", GENERATION_PARAMS[n][0] / GENERATION_PARAMS[n][3],
                       GENERATION_PARAMS[n][1] / GENERATION_PARAMS[n][3],
                       GENERATION_PARAMS[n][2] / GENERATION_PARAMS[n][3])
               for g in fitted for n in names]
    bounded += [Bounded(n, *v) for n, v in GLOBAL_PARAMS.items()]
    joint = mask & np.isin(gens, fitted)

    def residuals(x: np.ndarray) -> np.ndarray:
        glob = dict(zip(GLOBAL_PARAMS, x[k * len(fitted):].tolist(), strict=True))
        return (np.log(predict(unpack(x, fitted), glob)) - log_measured)[joint]

    found, _ = solve(residuals, bounded)
    glob = {e.name: e.value for e in found[k * len(fitted):]} or {
        n: v[0] for n, v in GLOBAL_PARAMS.items()}
    blocks = unpack(np.array([e.value for e in found[:k * len(fitted)]]), fitted)

    def pooled_residuals(x: np.ndarray) -> np.ndarray:
        return (np.log(predict(unpack(x, [POOLED_KEY]), glob)) - log_measured)[mask]

    pooled, _ = solve(pooled_residuals, [Bounded(f"{n}[{POOLED_KEY}]", *[
        v / GENERATION_PARAMS[n][3] for v in GENERATION_PARAMS[n][:3]]) for n in names])
    blocks |= unpack(np.array([e.value for e in pooled]), [POOLED_KEY])
    estimates = [_in_si(e, units[i % k]) for i, e in enumerate(found[:k * len(fitted)])]
    estimates += [_in_si(e, units[i]) for i, e in enumerate(pooled)] + list(found[k * len(fitted):])
    calibration = base.replace(serving_overheads=_overheads(
        blocks, glob, base.inference_overheads, counts))
    final = np.log(predict(blocks, glob)) - log_measured
    return InferenceFit(
        parameters=tuple(estimates), calibration=calibration, rows_used=int(mask.sum()),
        rows_by_generation=dict(sorted(counts.items())),
        fallback_generations=tuple(sorted(set(counts) - set(fitted))),
        row_ids=tuple(c.row_id for c, m in zip(table.cases, mask, strict=True) if m),
        residuals=tuple(final[mask].tolist()))


def _in_si(e: ParameterEstimate, unit: float) -> ParameterEstimate:
    """An estimate from solver units back to SI."""
    return ParameterEstimate(e.name, e.value * unit, None if e.standard_error is None
                             else e.standard_error * unit, e.at_bound, e.low * unit,
                             e.high * unit)
