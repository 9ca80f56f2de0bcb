"""Fit the device time per kernel boundary of a replayed graph (``graph_replay.yaml``).

Mechanism and use: ``perfcast.calibration.graph_replay``. One parameter per GPU vendor,
``kernel_gap_s[vendor]``, fitted on the vendor's decode-latency rows (TPOT, ITL, decode latency
per token, per-user decode rate) that the gap reaches: rows forecast through a graphed decode
step (engine-simulated serving rows, ``estimate.serving``, and static rows of an engine whose
decode step replays a graph).

Method. A row's forecast is a smooth, nearly affine function of the gap (each graphed decode
step gains kernels × gap), so it is simulated once per node of ``NODES_S`` (every vendor at
the node: a row depends only on its own GPU's vendor, so one pass serves every vendor) and
log(predicted) is interpolated linearly between nodes (``GapTable``). Per vendor the gap
minimises the mean |log(predicted / measured)| of the vendor's rows (``LOSS_TEXT``): a median-
type estimator, so rows far off for reasons the gap does not describe (early-2025 engines'
slower kernels, dstack rows 35-60% too fast) do not pull it, where the soft-L1 least squares of
the other fits did (held-out decode MAPE 18.1% against 17.1% with this loss, inference.csv
2026-11-24). On the piecewise-linear table the objective is piecewise linear in the gap, so its
exact minimum lies at a node or where one row's residual crosses zero; every such point is
evaluated (``_l1_minimum``). Standard error: the spread of the minimum over ``BOOTSTRAP``
resamples of the rows (seeded; rows of one source are correlated, so it understates, and the
leave-one-source-out range written beside it is the honest spread). A vendor with fewer than
``MIN_ROWS_PER_VENDOR`` rows takes the value fitted on every vendor's rows pooled (flagged
``fallback``). The table is built once under a base calibration;
``fit_graph_replay(table, exclude_source=S)`` is the refit without source S, which is what every
fold of ``cross_validate_inference`` forecasts S with (the base's other constants, the serving
overheads, are those of the full fit: their refit per fold moves eager and prefill steps, not
the graphed decode step the gap prices).
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
from perfcast.validate.least_squares_fit import ParameterEstimate
from perfcast.validate.serving_rows import ServingCase

NODES_S: Final[tuple[float, ...]] = (0.0, 1.0e-6, 2.0e-6, 3.0e-6, 4.5e-6, 6.0e-6)
"""Gaps each row is simulated at (the fit range is [first, last]); between nodes log(predicted)
is linear in the gap to within about 1% of a row's forecast (inference.csv, 2026-11-24: at most
1.65% with nodes 0, 1.5, 3, 6 µs against direct simulation every 0.5 µs; checked by
tests/test_fit_graph_replay.py)."""
BOOTSTRAP: Final = 200
"""Row resamples behind the standard error (seed ``SEED``)."""
SEED: Final = 0
LOSS_TEXT: Final = ("mean |log(predicted/measured)|, exact minimum on the piecewise-linear gap "
                    f"table; standard error: {BOOTSTRAP} row-bootstrap resamples")
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
        trial = base.replace(graph_replay=gaps, serving_overheads=base.inference_overheads)
        cache = ServingReportCache(partial(estimate_serving, calibration=trial))
        estimator = partial(estimate_inference, calibration=trial)
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


def _l1_minimum(nodes: np.ndarray, residuals: np.ndarray) -> float:
    """Gap minimising the mean |residual| of rows whose residual is linear in the gap on each
    segment between ``nodes`` (``residuals``: rows × nodes, at the nodes): the smallest of the
    objective's minimisers, all of which lie at a node or at a row's zero crossing."""
    low, high = residuals[:, :-1], residuals[:, 1:]
    with np.errstate(divide="ignore", invalid="ignore"):
        share = low / (low - high)  # where each row's residual crosses zero on each segment
    inside = np.isfinite(share) & (share > 0) & (share < 1)
    span = np.diff(nodes)
    candidates = np.concatenate([nodes, (nodes[:-1] + share * span)[inside]])
    i = np.clip(np.searchsorted(nodes, candidates, side="right") - 1, 0, len(nodes) - 2)
    w = (candidates - nodes[i]) / span[i]
    values = (1.0 - w) * residuals[:, i] + w * residuals[:, i + 1]
    cost = np.mean(np.abs(values), axis=0)
    best = np.flatnonzero(cost <= cost.min() * (1 + 1e-12))
    return float(candidates[best].min())


def _fit(table: GapTable, rows: np.ndarray, name: str) -> ParameterEstimate:
    """One gap on ``rows`` (mask) with its bootstrap standard error (module docstring)."""
    nodes = np.asarray(table.nodes_s)
    residuals = table.log_predicted[rows] - table.log_measured[rows][:, None]
    value = _l1_minimum(nodes, residuals)
    draws = np.random.default_rng(SEED).integers(0, len(residuals),
                                                 (BOOTSTRAP, len(residuals)))
    spread = np.std([_l1_minimum(nodes, residuals[d]) for d in draws], ddof=1)
    return ParameterEstimate(
        name, value, float(spread) if len(residuals) > 1 else None,
        bool(value <= nodes[0] or value >= nodes[-1]), float(nodes[0]), float(nodes[-1]))


def fit_graph_replay(table: GapTable, exclude_source: str | None = None) -> GraphReplayFit:
    """Per-vendor gaps on ``table``'s rows of every source but ``exclude_source``."""
    mask = table.source_ids != exclude_source
    counts = Counter(table.vendors[mask].tolist())
    pooled = _fit(table, mask, f"kernel_gap_s[{POOLED}]") if mask.any() else None
    estimates: list[ParameterEstimate] = []
    entries: dict[Vendor, VendorKernelGap] = {}
    fallback = []
    present = set(table.vendors.tolist()) | set(table.base.vendors)
    for vendor in (v for v in VENDORS if v in present):
        n = counts.get(vendor, 0)
        name = f"kernel_gap_s[{vendor}]"
        if n >= MIN_ROWS_PER_VENDOR:
            est = _fit(table, mask & (table.vendors == vendor), name)
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
