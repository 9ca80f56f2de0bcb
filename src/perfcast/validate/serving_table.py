"""Serving response table: each inference row's TTFT and TPOT as a cheap function of the
serving overheads, so that a fit and its cross-validation folds need no forecast per trial.

Every scored metric is a function of a forecast's TTFT and TPOT (``inference_rows.METRICS``;
e2e latency = TTFT + (out − 1)·TPOT, throughputs from those). For fixed non-linear parameters
(HBM ``bandwidth_efficiency``, ``gqa_kv_read_exponent``, the row's dequantization
efficiency), the four host overheads enter affinely (``estimate.inference_phases``: step and
per-layer seconds are added, the prefill fraction multiplies the prefill kernels):

    q = q₀(nl) + c_step·step_overhead_s + c_layer·layer_overhead_s
        + c_prefill_layer·prefill_layer_overhead_s + q_kernels(nl)·prefill_overhead_fraction

for q in (TTFT, TPOT). q₀ and q₀ + q_kernels come from two forecasts at each grid point of
the non-linear parameters; the three counts c from three forecasts with one overhead each.
The bandwidth share is gridded for every row; the GQA exponent and the dequantization
efficiency only for rows they move, each as a 2-D (bandwidth × parameter) deviation added
to the bandwidth curve (they act on different ops — KV reads, weight reads — whose times
add). Values between grid points are interpolated linearly; the fit's held-out forecasts
use full forecasts (tests/test_calibration_fit.py bounds the table's deviation from them).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np

from perfcast.calibration.bundle import Calibration
from perfcast.calibration.inference_overheads import InferenceOverhead, InferenceOverheads
from perfcast.validate.inference_compare import report_quantity
from perfcast.validate.inference_rows import InferenceCase, metric_quantity

BANDWIDTH_GRID = tuple(round(0.4 + 0.05 * i, 2) for i in range(13))
GQA_GRID = tuple(round(0.1 * i, 1) for i in range(11))
"""Exponent grid: 0.1 steps, so g^x of a wide group (Falcon-180B: g = 29) interpolates within
2% of the full forecast (tests/test_calibration_fit.py) at exponents between 0.8 and 0.9."""
DEQUANT_GRID = tuple(round(0.2 + 0.1 * i, 1) for i in range(9))
LINEAR = ("step_overhead_s", "layer_overhead_s", "prefill_layer_overhead_s")
LINEAR_PROBE = 1e-4
"""Seconds of one overhead in the probes that measure its count."""


def _probe(base: InferenceOverheads, bandwidth: float, gqa: float, dequant: float,
           fraction: float = 0.0, linear: str | None = None) -> InferenceOverheads:
    block = InferenceOverhead(step_overhead_s=0.0, layer_overhead_s=0.0,
                              prefill_layer_overhead_s=0.0, prefill_overhead_fraction=fraction,
                              bandwidth_efficiency=bandwidth, source="probe")
    if linear is not None:
        block = block.model_copy(update={linear: LINEAR_PROBE})
    return base.model_copy(update={
        "generations": {"default": block}, "gqa_kv_read_exponent": gqa,
        "dequant_bandwidth_efficiency": {"int8": dequant, "int4": dequant}})


class ServingTable:
    """TTFT/TPOT of every row as a function of the serving overheads (module docstring)."""

    def __init__(self, cases: Sequence[InferenceCase], calibration: Calibration,
                 estimator: Callable) -> None:
        self.cases = tuple(cases)
        self.generation = tuple(c.system.gpu.generation for c in cases)
        base = calibration.inference_overheads
        g0, d0 = GQA_GRID[len(GQA_GRID) // 2], DEQUANT_GRID[len(DEQUANT_GRID) // 2]
        memo: dict = {}

        def quantities(i: int, **probe) -> np.ndarray:
            key = (i, tuple(sorted(probe.items())))
            if key not in memo:
                cal = calibration.replace(serving_overheads=_probe(base, **probe))
                report = estimator(self.cases[i].model, self.cases[i].system,
                                   self.cases[i].strategy, **self.cases[i].options,
                                   calibration=cal)
                memo[key] = (report, np.array([report.ttft_s, report.tpot_s]))
            return memo[key][1]

        n, nb = len(cases), len(BANDWIDTH_GRID)
        self.curve = np.zeros((n, nb, 2, 2))  # row, bandwidth, (q0, q0+kernels), (ttft, tpot)
        self.counts = np.zeros((n, len(LINEAR), 2))
        self.gqa = np.zeros((n, nb, len(GQA_GRID), 2, 2))
        self.dequant = np.zeros((n, nb, len(DEQUANT_GRID), 2, 2))
        self.reports = []
        for i in range(n):
            def at(bw, gqa=g0, dq=d0, fraction=0.0, linear=None, i=i):
                return quantities(i, bandwidth=bw, gqa=gqa, dequant=dq, fraction=fraction,
                                  linear=linear)
            for b, bw in enumerate(BANDWIDTH_GRID):
                self.curve[i, b] = [at(bw), at(bw, fraction=1.0)]
            centre = BANDWIDTH_GRID[-1]
            for j, name in enumerate(LINEAR):
                self.counts[i, j] = (at(centre, linear=name) - at(centre)) / LINEAR_PROBE
            for grid, store, key in ((GQA_GRID, self.gqa, "gqa"), (DEQUANT_GRID, self.dequant,
                                                                   "dq")):
                ends = [at(centre, **{key: v}) for v in (grid[0], grid[-1])]
                if all(np.array_equal(e, at(centre)) for e in ends):
                    continue
                for b, bw in enumerate(BANDWIDTH_GRID):
                    for k, v in enumerate(grid):
                        store[i, b, k] = [at(bw, **{key: v}) - at(bw),
                                          at(bw, fraction=1.0, **{key: v})
                                          - at(bw, fraction=1.0)]
            self.reports.append(memo[(i, tuple(sorted(dict(
                bandwidth=centre, gqa=g0, dequant=d0, fraction=0.0, linear=None).items())))][0])
        self.measured = np.array([c.measured for c in cases], float)
        self._quantity = [metric_quantity(c.metric, c.unit) for c in cases]

    def times(self, blocks: Sequence[dict[str, float]], gqa: float, dequant: Sequence[float]
              ) -> np.ndarray:
        """(n, 2) TTFT and TPOT of every row: ``blocks[i]`` is row i's overhead block,
        ``dequant[i]`` its dequantization efficiency."""
        bw = np.array([b["bandwidth_efficiency"] for b in blocks])
        frac = np.array([b["prefill_overhead_fraction"] for b in blocks])
        linear = np.array([[b[name] for name in LINEAR] for b in blocks])
        rows = np.arange(len(blocks))
        ib, wb = _index(BANDWIDTH_GRID, bw)
        curve = _mix(self.curve, rows, ib, wb)  # (n, 2, 2)
        ig, wg = _index(GQA_GRID, np.full(len(blocks), gqa))
        curve = curve + _mix2(self.gqa, rows, ib, wb, ig, wg)
        idq, wdq = _index(DEQUANT_GRID, np.asarray(dequant, float))
        curve = curve + _mix2(self.dequant, rows, ib, wb, idq, wdq)
        q0, kernels = curve[:, 0], curve[:, 1] - curve[:, 0]
        return q0 + kernels * frac[:, None] + np.einsum("nj,njq->nq", linear, self.counts)

    def predicted(self, blocks, gqa, dequant) -> np.ndarray:
        """Each row's metric in its unit, from the interpolated TTFT/TPOT."""
        times = self.times(blocks, gqa, dequant)
        out = np.empty(len(self.cases))
        for i, report in enumerate(self.reports):
            name, factor = self._quantity[i]
            patched = replace(report, ttft_s=float(times[i, 0]), tpot_s=float(times[i, 1]))
            out[i] = report_quantity(patched, name) * factor
        return out


def _index(grid: Sequence[float], x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    g = np.asarray(grid)
    x = np.clip(x, g[0], g[-1])
    i = np.clip(np.searchsorted(g, x, side="right") - 1, 0, len(g) - 2)
    return i, (x - g[i]) / (g[i + 1] - g[i])


def _mix(values: np.ndarray, rows, i, w) -> np.ndarray:
    wb = w.reshape(-1, *([1] * (values.ndim - 2)))
    return values[rows, i] * (1 - wb) + values[rows, i + 1] * wb


def _mix2(values: np.ndarray, rows, ib, wb, ip, wp) -> np.ndarray:
    """Bilinear: along the bandwidth axis (index ib, weight wb), then the parameter axis."""
    low = _mix(values[rows, ib], rows, ip, wp)
    high = _mix(values[rows, ib + 1], rows, ip, wp)
    w = wb.reshape(-1, 1, 1)
    return low * (1 - w) + high * w
