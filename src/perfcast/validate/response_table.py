"""Response table: each training row's step time as a cheap function of the fitted parameters.

A fit or a cross-validation fold re-forecasts every row under many parameter values; a full
``estimate_training`` per trial costs ~2 ms a row. The table evaluates each row a few dozen
times up front and then answers any trial with array arithmetic.

Two kinds of parameter:

* **Linear**: the per-generation kernel overhead fraction f. ``estimate_training`` adds
  ``other = step_overhead_s + f · kernel_path_s`` to the step (``estimate.training.
  assemble_step``), so step(f) = a + f · k exactly, with a = step at f = 0 and
  k = kernel_path_s, both from ONE estimate at f = 1 (k = other − step_overhead_s).
* **Grid** (``GridParameter``; e.g. the stream-overlap share, a derived attention kernel's
  time ratio): the row is evaluated on a 1-D grid of each parameter (the others at their
  centre) and a(θ), k(θ) are interpolated linearly between grid points, summed over
  parameters as additive deviations from the centre:
  a(θ) = a(c) + Σ_p [a(c with θ_p) − a(c)]. A row is evaluated on a parameter's grid only if
  moving that parameter to its low or high end changes it (most rows depend on at most one).
  For a row that depends on several, the additive form is checked at every corner of the
  box; where it is off by more than ``ADDITIVE_TOLERANCE`` the row gets its full tensor grid
  (multilinear interpolation) instead.

Error of the approximation: exact in f; between grid points, the deviation of a piecewise-
linear step time from its chord (tests/test_calibration_fit.py measures the maximum against
full re-evaluation at the fitted optimum).
"""

from __future__ import annotations

import copy
import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy.interpolate import RegularGridInterpolator

from perfcast.calibration.bundle import Calibration
from perfcast.calibration.training_overheads import TrainingOverheads
from perfcast.validate.training_rows import ParsedRow

ADDITIVE_TOLERANCE = 1e-6
"""Largest relative corner deviation of the additive form before a row gets a tensor grid."""


@dataclass(frozen=True)
class GridParameter:
    """A parameter entering the step non-linearly, fitted on a grid of values."""

    name: str
    low: float
    high: float
    grid: tuple[float, ...]
    """Increasing values from ``low`` to ``high``; the middle one is the centre."""
    apply: Callable[[Calibration, float], Calibration] = field(compare=False)
    """The calibration with this parameter set to a value."""

    @property
    def centre(self) -> float:
        return self.grid[len(self.grid) // 2]


def _with_unit_fraction(calibration: Calibration) -> Calibration:
    """Every generation's overhead fraction set to 1 (its step_overhead_s kept)."""
    old = calibration.training_overheads
    return calibration.replace(training_overheads=TrainingOverheads(
        generations={g: e.model_copy(update={"compute_overhead_fraction": 1.0})
                     for g, e in old.generations.items()}))


@dataclass(frozen=True)
class RowData:
    """Per-row constants (arrays over the table's rows, in row order)."""

    rows: tuple[ParsedRow, ...]
    generation: tuple[str, ...]
    tokens_per_gpu_step: np.ndarray
    """tokens per step / GPUs: predicted tokens/s/GPU = this / step time."""
    measured: np.ndarray
    """Measured tokens/s/GPU."""


class ResponseTable:
    """a(θ), k(θ) of every row for grid parameters θ (see the module docstring)."""

    def __init__(self, rows: Sequence[ParsedRow], calibration: Calibration, backend,
                 parameters: Sequence[GridParameter], estimator: Callable) -> None:
        self.parameters = tuple(parameters)
        self.calibration = calibration
        centre = tuple(p.centre for p in self.parameters)
        self._trials: dict[tuple[float, ...], Calibration] = {}
        kept, values, gens, kpg, meas = [], [], [], [], []
        for row in rows:
            cache: dict[tuple[float, ...], tuple[float, float]] = {}

            def at(point: tuple[float, ...], row: ParsedRow = row, cache=cache):
                if point not in cache:
                    cache[point] = self._evaluate(row, point, backend, estimator)
                return cache[point]

            try:
                base = at(centre)
            except Exception:  # noqa: BLE001 - rows the estimator rejects are not in the table
                continue
            kept.append(row)
            values.append(self._row_response(at, centre, base))
            gens.append(row.system.gpu.generation)
            kpg.append(row.workload.tokens_per_step / row.strategy.num_gpus)
            meas.append(row.measured_tokens_per_s_per_gpu)
        self.data = RowData(tuple(kept), tuple(gens), np.array(kpg, float), np.array(meas, float))
        self._centre = np.array([v[0] for v in values])  # (n, 2)
        self._deltas = [np.stack([v[1][j] for v in values]) if values else np.zeros((0, 1, 2))
                        for j in range(len(self.parameters))]  # each (n, grid_j, 2)
        self._tensor = [(i, v[2]) for i, v in enumerate(values) if v[2] is not None]

    def _calibration_at(self, point: tuple[float, ...]) -> Calibration:
        if point not in self._trials:
            cal = self.calibration
            for parameter, value in zip(self.parameters, point, strict=True):
                cal = parameter.apply(cal, value)
            self._trials[point] = _with_unit_fraction(cal)
        return self._trials[point]

    def _evaluate(self, row: ParsedRow, point, backend, estimator) -> tuple[float, float]:
        """(a, k) of ``row`` at ``point``: step at f = 0 and kernel-path seconds."""
        cal = self._calibration_at(point)
        report = estimator(row.model, row.system, row.strategy, row.workload,
                           kernel_backend=backend, calibration=cal)
        step_overhead = cal.training_overheads.for_generation(
            row.system.gpu.generation).step_overhead_s
        k = report.breakdown.other_s - step_overhead
        a = report.step_time_s - k
        if not (math.isfinite(a) and a > 0):
            raise ValueError(f"step time {a!r}")
        return a, k

    def _row_response(self, at, centre, base):
        """(centre (a, k), per parameter its grid deltas, optional tensor correction)."""
        base = np.array(base)
        deltas, dependent = [], []
        for j, parameter in enumerate(self.parameters):
            ends = [np.array(at(_set(centre, j, v))) for v in (parameter.low, parameter.high)]
            if all(np.allclose(e, base, rtol=1e-12, atol=0) for e in ends):
                deltas.append(np.zeros((len(parameter.grid), 2)))
                continue
            dependent.append(j)
            deltas.append(np.array([at(_set(centre, j, v)) for v in parameter.grid]) - base)
        tensor = None
        if len(dependent) > 1:
            tensor = self._tensor_if_needed(at, centre, base, deltas, dependent)
        return base, deltas, tensor

    def _tensor_if_needed(self, at, centre, base, deltas, dependent):
        """A multilinear interpolator of the interaction (full − additive) when the additive
        form misses a corner by more than ``ADDITIVE_TOLERANCE``; else None."""
        def additive(point):
            return base + sum(_lerp(self.parameters[j].grid, deltas[j], point[j])
                              for j in dependent)

        def full(point):
            return np.array(at(point))

        for corner in itertools.product(*[(self.parameters[j].low, self.parameters[j].high)
                                          for j in dependent]):
            point = centre
            for j, v in zip(dependent, corner, strict=True):
                point = _set(point, j, v)
            if np.max(np.abs(full(point) / additive(point) - 1)) > ADDITIVE_TOLERANCE:
                break
        else:
            return None
        grids = [self.parameters[j].grid for j in dependent]
        values = np.zeros([len(g) for g in grids] + [2])
        for index in itertools.product(*[range(len(g)) for g in grids]):
            point = centre
            for j, i in zip(dependent, index, strict=True):
                point = _set(point, j, self.parameters[j].grid[i])
            values[index] = full(point) - additive(point)
        return dependent, RegularGridInterpolator(grids, values)

    def with_rows_of(self, other: ResponseTable) -> ResponseTable:
        """A copy whose rows also in ``other`` (the same ``ParsedRow`` objects) take ``other``'s responses:
        a few rows re-tabulated under a changed calibration (a cross-validation fold's
        routing imbalance) without rebuilding the rest. Same parameters required."""
        if other.parameters != self.parameters:
            raise ValueError("tables with different grid parameters")
        where = {id(row): i for i, row in enumerate(other.data.rows)}
        index = [(i, where[id(row)]) for i, row in enumerate(self.data.rows)
                 if id(row) in where]
        out = copy.copy(self)
        out._centre = self._centre.copy()
        out._deltas = [d.copy() for d in self._deltas]
        for i, k in index:
            out._centre[i] = other._centre[k]
            for j, deltas in enumerate(out._deltas):
                deltas[i] = other._deltas[j][k]
        mine = {i for i, _ in index}
        theirs = dict(other._tensor)
        out._tensor = [(i, t) for i, t in self._tensor if i not in mine] + [
            (i, theirs[k]) for i, k in index if k in theirs]
        return out

    def depends_on(self, j: int) -> np.ndarray:
        """Rows (bool over the table's rows) whose step moves with grid parameter ``j``."""
        return np.any(self._deltas[j] != 0, axis=(1, 2))

    def response(self, theta: Sequence[float] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(a, k) arrays over the rows at grid-parameter values ``theta``."""
        total = self._centre.copy()
        for j, parameter in enumerate(self.parameters):
            total += _lerp(parameter.grid, self._deltas[j], theta[j])
        for i, (dependent, interpolator) in self._tensor:
            total[i] += interpolator([theta[j] for j in dependent])[0]
        return total[:, 0], total[:, 1]

    def predicted(self, theta: Sequence[float] | np.ndarray, fractions: np.ndarray) -> np.ndarray:
        """Predicted tokens/s/GPU of every row for grid values ``theta`` and per-row overhead
        fractions ``fractions``."""
        a, k = self.response(theta)
        return self.data.tokens_per_gpu_step / (a + fractions * k)


def _set(point: tuple[float, ...], j: int, value: float) -> tuple[float, ...]:
    return point[:j] + (value,) + point[j + 1:]


def _lerp(grid: Sequence[float], values: np.ndarray, x: float) -> np.ndarray:
    """Linear interpolation of ``values`` (grid along axis -2 or 0) at ``x`` (clamped)."""
    grid_arr = np.asarray(grid)
    x = min(max(float(x), grid_arr[0]), grid_arr[-1])
    i = int(np.clip(np.searchsorted(grid_arr, x, side="right") - 1, 0, len(grid_arr) - 2))
    w = (x - grid_arr[i]) / (grid_arr[i + 1] - grid_arr[i])
    if values.ndim == 3:
        return values[:, i] * (1 - w) + values[:, i + 1] * w
    return values[i] * (1 - w) + values[i + 1] * w
