"""Fit the device time per kernel boundary of a replayed graph (``graph_replay.yaml``).

Mechanism and use: ``perfcast.calibration.graph_replay``. One parameter per GPU vendor,
``kernel_gap_s[vendor]``, fitted on the vendor's decode-latency rows (TPOT, ITL, decode latency
per token, per-user decode rate) that the gap reaches: rows forecast through a graphed decode
step (engine-simulated serving rows, ``estimate.serving``, and static rows of an engine whose
decode step replays a graph).

Method. A row's forecast is a smooth, nearly affine function of the gap (each graphed decode
step gains kernels × gap), so it is simulated once per node of ``NODES_S`` (every vendor at
the node: a row depends only on its own GPU's vendor, so one pass serves every vendor) and
log(predicted) is interpolated linearly between nodes (``GapTable``). Per vendor
``least_squares_fit.solve`` (bounded, soft-L1 on log(predicted/measured), standard error from
the Jacobian) fits the gap on those rows; a vendor with fewer than ``MIN_ROWS_PER_VENDOR`` rows
takes the value fitted on every vendor's rows pooled (flagged ``fallback``). The table is
built once under a base calibration; ``fit_graph_replay(table, exclude_source=S)`` is the
refit without source S, which is what every fold of ``cross_validate_inference`` forecasts S
with (the base's other constants, the serving overheads, are those of the full fit: their
refit per fold moves eager and prefill steps, not the graphed decode step the gap prices).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Final, get_args

import numpy as np

from perfcast.calibration.bundle import Calibration
from perfcast.calibration.graph_replay import GraphReplayCalibration, VendorKernelGap
from perfcast.specs.hardware import Vendor
from perfcast.validate.inference_rows import InferenceCase
from perfcast.validate.least_squares_fit import Bounded, ParameterEstimate, solve
from perfcast.validate.serving_rows import ServingCase

NODES_S: Final[tuple[float, ...]] = (0.0, 1.0e-6, 2.0e-6, 3.0e-6, 4.5e-6, 6.0e-6)
"""Gaps each row is simulated at (the fit range is [first, last]); between nodes log(predicted)
is linear in the gap to within about 1% of a row's forecast (inference.csv, 2026-11-24: at most
1.65% with nodes 0, 1.5, 3, 6 µs against direct simulation every 0.5 µs; checked by
tests/test_fit_graph_replay.py)."""
START_S: Final = 1.0e-6
UNIT_S: Final = 1.0e-6
"""The solver works in microseconds."""
DECODE_METRICS: Final = ("tpot", "itl", "decode_latency_per_token", "decode_tokens_per_s_per_user")
MIN_ROWS_PER_VENDOR: Final = 5
POOLED: Final = "pooled"
VENDORS: Final[tuple[Vendor, ...]] = get_args(Vendor)


def uniform_gaps(gap_s: float) -> GraphReplayCalibration:
    """Every vendor at ``gap_s`` (one node of the table)."""
    entry = VendorKernelGap(kernel_gap_s=gap_s, fit_rows=0, source="table node")
    return GraphReplayCalibration(vendors=dict.fromkeys(VENDORS, entry))


@dataclass(frozen=True)
class GapTable:
    """log(predicted) of every decode row the gap reaches, at each node of ``nodes_s``."""

    row_ids: tuple[str, ...]
    source_ids: np.ndarray
    vendors: np.ndarray
    log_measured: np.ndarray
    log_predicted: np.ndarray
    """rows × nodes."""
    nodes_s: tuple[float, ...]
    base: GraphReplayCalibration
    """The calibration the table's vendors fall back to when no row of theirs is left."""

    def log_predicted_at(self, gap_s: float, rows: np.ndarray) -> np.ndarray:
        """log(predicted) of ``rows`` (mask) at ``gap_s``, linear between nodes."""
        nodes = np.asarray(self.nodes_s)
        i = int(np.clip(np.searchsorted(nodes, gap_s) - 1, 0, len(nodes) - 2))
        w = (gap_s - nodes[i]) / (nodes[i + 1] - nodes[i])
        table = self.log_predicted[rows]
        return (1.0 - w) * table[:, i] + w * table[:, i + 1]


def build_gap_table(cases: Sequence[InferenceCase | ServingCase], base: Calibration,
                    nodes_s: Sequence[float] = NODES_S) -> GapTable:
    """Forecast the decode rows of ``cases`` at every node under ``base`` (module docstring)."""
    from perfcast.estimate.inference import estimate_inference
    from perfcast.estimate.serving import estimate_serving
    from perfcast.validate.inference_compare import (
        InferenceRowResult,
        compare_case,
        compare_serving_case,
    )
    from perfcast.validate.serving_compare import ServingReportCache

    decode = [c for c in cases if c.metric in DECODE_METRICS and c.measured > 0]
    columns: list[dict[str, float]] = []
    for node in nodes_s:
        gaps = uniform_gaps(node)
        cache = ServingReportCache(partial(estimate_serving, overheads=base.inference_overheads,
                                           graph_replay=gaps))
        estimator = partial(estimate_inference, calibration=base.replace(graph_replay=gaps))
        results = (compare_serving_case(c, cache) if isinstance(c, ServingCase)
                   else compare_case(c, estimator) for c in decode)
        columns.append({r.row_id: r.predicted for r in results
                        if isinstance(r, InferenceRowResult)})
    kept = [c for c in decode if all(c.row_id in col for col in columns)
            and columns[0][c.row_id] != columns[-1][c.row_id]]  # rows the gap reaches
    return GapTable(
        row_ids=tuple(c.row_id for c in kept),
        source_ids=np.array([c.source_id for c in kept], dtype=object),
        vendors=np.array([c.system.gpu.vendor for c in kept], dtype=object),
        log_measured=np.log(np.array([c.measured for c in kept], float)),
        log_predicted=np.log(np.array([[col[c.row_id] for col in columns] for c in kept],
                                      float).reshape(len(kept), len(nodes_s))),
        nodes_s=tuple(nodes_s), base=base.graph_gaps)


@dataclass(frozen=True)
class GraphReplayFit:
    """Fitted gaps (SI), the calibration they make, rows per vendor, pooled-fit vendors."""

    parameters: tuple[ParameterEstimate, ...]
    calibration: GraphReplayCalibration
    rows_used: int
    rows_by_vendor: dict[str, int]
    fallback_vendors: tuple[str, ...]

    def value_s(self, vendor: str) -> float:
        return next(p.value for p in self.parameters if p.name == f"kernel_gap_s[{vendor}]")


def _solve(table: GapTable, rows: np.ndarray, name: str) -> ParameterEstimate:
    nodes = table.nodes_s

    def residuals(x: np.ndarray) -> np.ndarray:
        return table.log_predicted_at(float(x[0]) * UNIT_S, rows) - table.log_measured[rows]

    (found,), _ = solve(residuals, [Bounded(name, START_S / UNIT_S, nodes[0] / UNIT_S,
                                            nodes[-1] / UNIT_S)])
    return ParameterEstimate(name, found.value * UNIT_S, None if found.standard_error is None
                             else found.standard_error * UNIT_S, found.at_bound,
                             found.low * UNIT_S, found.high * UNIT_S)


def fit_graph_replay(table: GapTable, exclude_source: str | None = None) -> GraphReplayFit:
    """Per-vendor gaps on ``table``'s rows of every source but ``exclude_source``."""
    mask = table.source_ids != exclude_source
    counts = Counter(table.vendors[mask].tolist())
    pooled = _solve(table, mask, f"kernel_gap_s[{POOLED}]") if mask.any() else None
    estimates: list[ParameterEstimate] = []
    entries: dict[Vendor, VendorKernelGap] = {}
    fallback = []
    present = set(table.vendors.tolist()) | set(table.base.vendors)
    for vendor in (v for v in VENDORS if v in present):
        n = counts.get(vendor, 0)
        name = f"kernel_gap_s[{vendor}]"
        if n >= MIN_ROWS_PER_VENDOR:
            est = _solve(table, mask & (table.vendors == vendor), name)
            estimates.append(est)
            text = f"fitted on {n} {vendor} decode-latency rows"
        elif pooled is not None:
            fallback.append(vendor)
            est = ParameterEstimate(name, pooled.value, pooled.standard_error, pooled.at_bound,
                                    pooled.low, pooled.high)
            text = (f"no {vendor} rows enough ({n} < {MIN_ROWS_PER_VENDOR}): the fit on every "
                    f"vendor's {int(mask.sum())} decode-latency rows pooled")
        else:
            continue
        entries[vendor] = VendorKernelGap(kernel_gap_s=est.value, fit_rows=n, source=text)
    if pooled is not None:
        estimates.append(pooled)
    calibration = GraphReplayCalibration(vendors=entries) if entries else table.base
    return GraphReplayFit(tuple(estimates), calibration, int(mask.sum()),
                          dict(sorted(counts.items())), tuple(fallback))
