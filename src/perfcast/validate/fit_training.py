"""Fit the end-to-end training calibration on measured runs (the library behind
``perfcast calibrate`` and ``perfcast validate --cross-validate``).

Parameters, each shared by every row of its scope (no row, model or source singled out):

* ``compute_overhead_fraction`` per GPU generation with at least ``MIN_ROWS_PER_GENERATION``
  fit rows: kernels on the critical path take (1 + f) × the kernel model's time (kernel gaps,
  host time, sustained clocks below the microbenchmarks, communication kernels slowing compute;
  ``estimate.training.assemble_step``); bounds [0, 3];
* ``default``: the POOLED f, fitted on every fit row with the shared parameters fixed; a
  generation with fewer rows (or none: MI300X, B300 ...) uses it and its forecasts say so
  (``CalibrationStatus.fallback``);
* ``stream_overlap_exposed_fraction`` (``comm_overlap.yaml``): critical-path seconds per
  overlapped second of a collective on its own stream; bounds [0, 1];
* the ``time_ratio`` of each derived attention kernel marked ``method: fitted`` in
  ``attention_kernels.yaml`` (FlashAttention Triton over FA2), and one more for each generation
  listed in its ``time_ratio_by_generation`` (``attention_time_ratio[triton|hopper]``: the
  relative speed of two kernels differs by architecture); bounds [1, 2.8], start (and the value
  where no fit row runs the kernel) ``RATIO_PRIOR`` = 1.9, the middle of the FA2 paper's range;
* the ``time_ratio`` of each derived FP8 scaled-matmul kernel marked ``method: fitted``
  (``attention_kernels.yaml`` ``scaled_gemm``; ``scaled_gemm_time_ratio[rowwise]``: the
  per-row-scaled ``torch._scaled_mm`` kernel over the tensorwise one, ``kernels.scaled_gemm``);
  bounds [1, 2.2] on ``SCALED_GEMM_GRID``.

Rows: quality A and B (``FIT_QUALITIES``), dense and MoE, of a training.csv-schema file.
Residual: log(predicted/measured tokens/s/GPU) (``least_squares_fit``). Per-row forecasts come
from a ``ResponseTable`` built once (f enters exactly; the other parameters on grids).
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np

from perfcast.calibration.bundle import Calibration, load_calibration
from perfcast.calibration.training_overheads import POOLED_KEY, TrainingOverheads
from perfcast.kernels.backend import DEFAULT_KERNEL_BACKEND, KernelBackend, get_backend
from perfcast.validate.least_squares_fit import Bounded, ParameterEstimate, solve
from perfcast.validate.response_table import GridParameter, ResponseTable
from perfcast.validate.training_rows import ParsedRow, parse_rows, read_rows

MIN_ROWS_PER_GENERATION = 10
"""Fewer fit rows than this and a generation takes the pooled fraction (one f from a handful
of rows would mostly fit their noise)."""
FIT_QUALITIES = ("A", "B")
"""Quality C rows (campaign averages, thin configurations) are forecast but never fitted."""
FRACTION_BOUNDS = (0.0, 3.0)
FRACTION_START = 0.2
"""Start of every fraction: a fixed value, so that a fit never starts from (and, for a
parameter its rows do not constrain, never returns) a value fitted on other data."""
OVERLAP_GRID = tuple(round(0.05 * i, 2) for i in range(21))
RATIO_PRIOR = 1.9
"""Start of every derived attention kernel's time ratio, and its value in a fit none of whose
rows runs the kernel (a leave-one-source-out fold without its only source): the middle of the
FlashAttention-2 paper's measured range, FA2 1.3-2.5x faster than the FlashAttention Triton
kernel on A100 (Dao 2023, §4.1). It is the middle of ``RATIO_GRID``."""
RATIO_STEP = 0.225
RATIO_GRID = tuple(round(RATIO_PRIOR + RATIO_STEP * (i - 4), 3) for i in range(9))
"""1.0 ... 2.8: nine points centred on ``RATIO_PRIOR``; the ends are the fit's bounds."""
OVERLAP_KEY = "stream_overlap_exposed_fraction"
SCALED_GEMM_GRID = tuple(round(1.0 + 0.15 * i, 2) for i in range(9))
"""1.0 ... 2.2: time ratio of a derived FP8 scaled-matmul kernel. 1 = as fast as the calibrated
FP8 GEMM; 2.2 = slower than a BF16 GEMM at twice the FP8 rate (at 2x the MI300X rowwise runs
of torchao's README are still faster than the same recipe with BF16 weight-gradient GEMMs, not
slower as measured). The centre (1.6) is the start and the value in a fit without its rows."""


def fraction_name(generation: str) -> str:
    return f"compute_overhead_fraction[{generation}]"


GENERATION_SEPARATOR = "|"
"""Separates a kernel class from a generation in a ratio's name: ``triton|hopper``."""


def ratio_name(kernel: str, generation: str | None = None) -> str:
    key = kernel if generation is None else f"{kernel}{GENERATION_SEPARATOR}{generation}"
    return f"attention_time_ratio[{key}]"


def _set_overlap(cal: Calibration, value: float) -> Calibration:
    overlap = cal.comm_overlap
    entry = getattr(overlap, OVERLAP_KEY).model_copy(update={"value": float(value)})
    return cal.replace(comm_overlap=overlap.model_copy(update={OVERLAP_KEY: entry}))


def _set_ratio(kernel: str, generation: str | None, cal: Calibration, value: float
               ) -> Calibration:
    """``cal`` with ``kernel``'s time ratio (its own on ``generation``; the shared one when
    None) set to ``value``."""
    kernels = cal.attention_kernels
    old = kernels.derived[kernel]
    update: dict[str, object] = (
        {"time_ratio": float(value)} if generation is None else
        {"time_ratio_by_generation": old.time_ratio_by_generation | {generation: float(value)}})
    derived = old.model_copy(update=update)
    return cal.replace(attention_kernels=kernels.model_copy(
        update={"derived": kernels.derived | {kernel: derived}}))


def scaled_gemm_name(kernel: str) -> str:
    return f"scaled_gemm_time_ratio[{kernel}]"


def _set_scaled_gemm(kernel: str, cal: Calibration, value: float) -> Calibration:
    """``cal`` with the FP8 scaled-matmul ``kernel``'s time ratio set to ``value``."""
    kernels = cal.attention_kernels
    entry = kernels.scaled_gemm[kernel].model_copy(update={"time_ratio": float(value)})
    return cal.replace(attention_kernels=kernels.model_copy(
        update={"scaled_gemm": kernels.scaled_gemm | {kernel: entry}}))


def grid_parameters(calibration: Calibration) -> tuple[GridParameter, ...]:
    """The non-linear parameters this calibration fits: the stream-overlap share, every
    ``method: fitted`` derived attention kernel's time ratios (shared, and per generation) and
    every ``method: fitted`` FP8 scaled-matmul kernel's time ratio."""
    out = [GridParameter(OVERLAP_KEY, 0.0, 1.0, OVERLAP_GRID, _set_overlap)]
    for name, derived in sorted(calibration.attention_kernels.derived.items()):
        if derived.method == "fitted":
            for generation in (None, *sorted(derived.time_ratio_by_generation)):
                out.append(GridParameter(ratio_name(name, generation), RATIO_GRID[0],
                                         RATIO_GRID[-1], RATIO_GRID,
                                         partial(_set_ratio, name, generation)))
    for name, gemm in sorted(calibration.attention_kernels.scaled_gemm.items()):
        if gemm.method == "fitted":
            out.append(GridParameter(scaled_gemm_name(name), SCALED_GEMM_GRID[0],
                                     SCALED_GEMM_GRID[-1], SCALED_GEMM_GRID,
                                     partial(_set_scaled_gemm, name)))
    return tuple(out)


def data_sha256(paths: Sequence[Path]) -> dict[str, str]:
    """File name -> sha256 of the file's bytes."""
    return {Path(p).name: hashlib.sha256(Path(p).read_bytes()).hexdigest() for p in paths}


@dataclass(frozen=True)
class TrainingData:
    """The parsed rows of some training CSVs and their response table."""

    table: ResponseTable
    skipped: tuple
    data_sha256: dict[str, str]
    kernel_backend: str
    backend: KernelBackend | None = None
    """The kernel backend instance the rows were forecast with."""

    @property
    def rows(self) -> tuple[ParsedRow, ...]:
        return self.table.data.rows

    def fit_mask(self, exclude_source: str | None = None) -> np.ndarray:
        """Rows a fit uses: quality A/B, without ``exclude_source``."""
        return np.array([r.quality.upper() in FIT_QUALITIES and r.source_id != exclude_source
                         for r in self.rows], bool)


def load_training_data(paths: Sequence[Path], calibration: Calibration | None = None,
                       kernel_backend: str | KernelBackend = DEFAULT_KERNEL_BACKEND.value,
                       qualities: Sequence[str] | None = None) -> TrainingData:
    """Parse ``paths`` (training.csv schema) and build the response table of every row that
    parses and forecasts (``qualities`` keeps only those grades). ``kernel_backend``: a
    backend name or instance (e.g. a measured backend over a user's kernel table)."""
    from perfcast.estimate.training import estimate_training

    calibration = calibration or load_calibration()
    raw = [row for p in paths for row in read_rows(Path(p))]
    if qualities:
        keep = {q.upper() for q in qualities}
        raw = [row for row in raw if (row.get("quality") or "").strip().upper() in keep]
    parsed, skipped = parse_rows(raw)
    backend = get_backend(kernel_backend)
    table = ResponseTable(parsed, calibration, backend, grid_parameters(calibration),
                          estimate_training)
    return TrainingData(table, tuple(skipped), data_sha256(paths),
                        str(getattr(backend, "name", kernel_backend)), backend)


@dataclass(frozen=True)
class TrainingFit:
    """A fitted training calibration: estimates, the calibration they make, and per-row
    residuals (log(predicted/measured)) of the fit rows."""

    parameters: tuple[ParameterEstimate, ...]
    calibration: Calibration
    rows_used: int
    rows_by_generation: dict[str, int]
    fallback_generations: tuple[str, ...]
    """Generations with fit rows but fewer than MIN_ROWS_PER_GENERATION (pooled f)."""
    row_ids: tuple[str, ...]
    residuals: tuple[float, ...]
    data_sha256: dict[str, str]
    kernel_backend: str

    def value(self, name: str) -> float:
        return next(p.value for p in self.parameters if p.name == name)


def fit_training(data: TrainingData, mask: np.ndarray | None = None) -> TrainingFit:
    """Fit the parameters (module docstring) on the rows of ``data`` selected by ``mask``
    (default: ``data.fit_mask()``). Raises ``ValueError`` when ``mask`` selects no row."""
    table = data.table
    mask = data.fit_mask() if mask is None else mask
    if not mask.any():
        raise ValueError("no quality A/B row to fit")
    gens = np.array(table.data.generation)
    counts = Counter(gens[mask].tolist())
    fitted = sorted(g for g, n in counts.items() if n >= MIN_ROWS_PER_GENERATION)
    base = table.calibration
    grid = table.parameters
    joint = mask & np.isin(gens, fitted)
    # a grid parameter no joint row depends on stays at its centre (a solver step along a
    # direction without gradient is numerical drift, not a fit)
    free = [bool(np.any(table.depends_on(j)[joint])) for j in range(len(grid))]
    bounded = [Bounded(fraction_name(g), FRACTION_START, *FRACTION_BOUNDS) for g in fitted]
    bounded += [Bounded(p.name, p.centre, p.low, p.high) for p, f in zip(grid, free, strict=True)
                if f]
    index = np.array([fitted.index(g) if g in fitted else 0 for g in gens])
    log_measured = np.log(table.data.measured)

    def grid_values(x_free: np.ndarray) -> list[float]:
        values = iter(x_free)
        return [float(next(values)) if f else p.centre for p, f in zip(grid, free, strict=True)]

    def residuals(x: np.ndarray) -> np.ndarray:
        predicted = table.predicted(grid_values(x[len(fitted):]), x[:len(fitted)][index])
        return (np.log(predicted) - log_measured)[joint]

    held = {p.name: ParameterEstimate(p.name, p.centre, None, False, p.low, p.high)
            for p in grid}
    if joint.any():
        solved, _ = solve(residuals, bounded)
        held |= {e.name: e for e in solved[len(fitted):]}
        estimates = tuple(solved[:len(fitted)]) + tuple(held[p.name] for p in grid)
    else:  # no generation has enough rows: the shared parameters stay at their start
        estimates = tuple(held[p.name] for p in grid)
    theta = [e.value for e in estimates[len(fitted):]]

    def pooled_residuals(x: np.ndarray) -> np.ndarray:
        return (np.log(table.predicted(theta, np.full(len(gens), x[0]))) - log_measured)[mask]

    pooled, _ = solve(pooled_residuals, [Bounded(fraction_name(POOLED_KEY), FRACTION_START,
                                                 *FRACTION_BOUNDS)])
    estimates = tuple(estimates[:len(fitted)]) + pooled + tuple(estimates[len(fitted):])
    calibration = _fitted_calibration(base, grid, estimates, fitted, counts)
    fractions = np.array([_fraction(calibration.training_overheads, g) for g in gens])
    final = np.log(table.predicted(theta, fractions)) - log_measured
    row_ids = tuple(r.row_id for r, m in zip(table.data.rows, mask, strict=True) if m)
    return TrainingFit(
        parameters=estimates, calibration=calibration, rows_used=int(mask.sum()),
        rows_by_generation=dict(sorted(counts.items())),
        fallback_generations=tuple(sorted(set(counts) - set(fitted))),
        row_ids=row_ids, residuals=tuple(final[mask].tolist()),
        data_sha256=data.data_sha256, kernel_backend=data.kernel_backend)


def _fraction(overheads: TrainingOverheads, generation: str) -> float:
    return overheads.for_generation(generation).compute_overhead_fraction


def _fitted_calibration(base: Calibration, grid: Sequence[GridParameter],
                        estimates: Sequence[ParameterEstimate], fitted: Sequence[str],
                        counts: Counter) -> Calibration:
    """``base`` with the fitted values: one overhead entry per fitted generation (others'
    entries dropped: they take the pooled ``default``), the grid parameters applied."""
    by_name = {e.name: e for e in estimates}
    old = base.training_overheads
    pooled_rows = sum(counts.values())
    generations = {POOLED_KEY: old.generations[POOLED_KEY].model_copy(update={
        "compute_overhead_fraction": by_name[fraction_name(POOLED_KEY)].value,
        "source": f"pooled fit over every generation ({pooled_rows} quality A/B rows); used, "
                  f"and flagged, for generations with fewer than {MIN_ROWS_PER_GENERATION} "
                  f"rows of their own"})}
    for g in fitted:
        entry = old.generations.get(g, old.generations[POOLED_KEY])
        generations[g] = entry.model_copy(update={
            "compute_overhead_fraction": by_name[fraction_name(g)].value,
            "source": f"fitted on {counts[g]} quality A/B rows of {g} GPUs"})
    calibration = base.replace(training_overheads=TrainingOverheads(generations=generations))
    for parameter in grid:
        calibration = parameter.apply(calibration, by_name[parameter.name].value)
    return calibration
