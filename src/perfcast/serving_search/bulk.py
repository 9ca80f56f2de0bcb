"""Every deployment of a search as arrays, screened in one pass (``serving_search.screen``).

Aggregated: for every priced layout whose GPUs divide the total, replicas = GPUs / (tp·pp) and
concurrency = replicas × c for every level c. Disaggregated: for every pair (prefill layout P,
decode layout D) with the same formats, every x, y ≥ 1 with x·|P| + y·|D| = GPUs, and every
decode batch b up to what D's KV pool holds. The arrays hold indices into the layout tables, so
a million deployments cost a few numpy passes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from perfcast.serving_search.screen import LayoutTable, ScreenMetrics, closed_loop, disaggregated
from perfcast.serving_search.space import Deployment


@dataclass(frozen=True)
class ScreenedSet:
    """Deployments of one mode as index arrays, with their screened metrics."""

    mode: str
    decode_idx: np.ndarray
    """Index into the tables of the replica (aggregated) or decode instance layout."""
    level_idx: np.ndarray
    """Index into the table's levels: clients per replica or decode batch."""
    instances: np.ndarray
    prefill_idx: np.ndarray
    prefill_instances: np.ndarray
    metrics: ScreenMetrics

    def __len__(self) -> int:
        return len(self.decode_idx)

    def deployment(self, tables: list[LayoutTable], i: int) -> Deployment:
        """The ``i``-th deployment as a typed value."""
        table = tables[int(self.decode_idx[i])]
        per_instance = int(table.levels[int(self.level_idx[i])])
        n = int(self.instances[i])
        if self.mode == "aggregated":
            return Deployment("aggregated", table.layout, n, n * per_instance)
        return Deployment("disaggregated", table.layout, n, n * per_instance,
                          prefill=tables[int(self.prefill_idx[i])].layout,
                          prefill_instances=int(self.prefill_instances[i]))


def _tables_as_arrays(tables: list[LayoutTable]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(levels, decode seconds) as [layout, level] arrays, and each layout's highest level
    index that its KV pool holds (−1: none)."""
    levels = np.array([t.levels for t in tables], dtype=float).reshape(len(tables), -1)
    decode = np.array([t.decode_s for t in tables], dtype=float).reshape(levels.shape)
    max_seqs = np.array([t.max_seqs for t in tables], dtype=float)
    top = (levels <= max_seqs[:, None]).sum(axis=1) - 1
    return levels, decode, top


def _per_layout(tables: list[LayoutTable], name: str) -> np.ndarray:
    return np.array([float(getattr(t, name)) for t in tables])


def _decode_at(level_tab: np.ndarray, decode_tab: np.ndarray, rows: np.ndarray,
               running: np.ndarray) -> np.ndarray:
    """Decode step of ``running`` sequences on layout ``rows``: linear in log2(b) between the
    priced levels (powers of two from 1, ``space.concurrency_levels``)."""
    x = np.log2(np.maximum(running, 1.0))
    lo = np.minimum(np.floor(x).astype(np.int64), level_tab.shape[1] - 1)
    hi = np.minimum(lo + 1, level_tab.shape[1] - 1)
    w = np.clip(x - lo, 0.0, 1.0)
    return decode_tab[rows, lo] * (1.0 - w) + decode_tab[rows, hi] * w


def screen_aggregated(tables: list[LayoutTable], num_gpus: int, output_len: int) -> ScreenedSet:
    """Replicas of every layout that divides ``num_gpus`` and fits, at every level; clients
    beyond the KV pool queue (the running batch is the highest level the pool holds)."""
    level_tab, decode_tab, top = _tables_as_arrays(tables)
    gpus_tab = np.array([t.layout.gpus for t in tables], dtype=np.int64)
    usable = np.flatnonzero((num_gpus % np.maximum(gpus_tab, 1) == 0) & (top >= 0))
    levels = level_tab.shape[1] if len(tables) else 0
    d_idx = np.repeat(usable, levels)
    l_idx = np.tile(np.arange(levels), len(usable))
    clients = level_tab[d_idx, l_idx]
    running = np.minimum(clients, _per_layout(tables, "max_seqs")[d_idx])
    gpus = gpus_tab[d_idx].astype(float)
    metrics = closed_loop(_per_layout(tables, "prefill_s")[d_idx],
                          _per_layout(tables, "prefill_rate_per_s")[d_idx],
                          _decode_at(level_tab, decode_tab, d_idx, running), running, clients,
                          output_len, _per_layout(tables, "wait_steps")[d_idx], gpus)
    n = len(d_idx)
    return ScreenedSet("aggregated", d_idx, l_idx, num_gpus // gpus_tab[d_idx],
                       np.full(n, -1), np.zeros(n, dtype=np.int64), metrics)


def _pool_splits(p_gpus: int, d_gpus: int, num_gpus: int) -> list[tuple[int, int]]:
    """(x, y) ≥ 1 with x·p_gpus + y·d_gpus = num_gpus."""
    out = []
    for x in range(1, (num_gpus - d_gpus) // p_gpus + 1):
        rest = num_gpus - x * p_gpus
        if rest > 0 and rest % d_gpus == 0:
            out.append((x, rest // d_gpus))
    return out


def screen_disaggregated(tables: list[LayoutTable], num_gpus: int, output_len: int,
                         transfer_s) -> ScreenedSet:
    """Every xPyD split of ``num_gpus`` over fitting layouts of the same formats.
    ``transfer_s(prefill_table, decode_table)`` gives the KV transfer seconds of a pair."""
    level_tab, decode_tab, top = _tables_as_arrays(tables)
    fit = [i for i, t in enumerate(tables) if top[i] >= 0 and t.layout.gpus < num_gpus]
    rows: list[tuple[int, int, int, int]] = []
    moves: list[float] = []
    for p in fit:
        lp = tables[p].layout
        for d in fit:
            ld = tables[d].layout
            if (lp.precision, lp.kv_precision) != (ld.precision, ld.kv_precision):
                continue
            splits = _pool_splits(lp.gpus, ld.gpus, num_gpus)
            if splits:
                move = transfer_s(tables[p], tables[d])
                rows.extend((p, d, x, y) for x, y in splits)
                moves.extend([move] * len(splits))
    pairs = np.array(rows, dtype=np.int64).reshape(-1, 4)
    levels = level_tab.shape[1] if len(tables) else 0
    rep = np.repeat(pairs, levels, axis=0)
    transfer = np.repeat(np.array(moves, dtype=float), levels)
    l_idx = np.tile(np.arange(levels), len(pairs))
    p_idx, d_idx, x, y = rep.T
    keep = l_idx <= top[d_idx]
    p_idx, d_idx, x, y, l_idx, transfer = (a[keep] for a in (p_idx, d_idx, x, y, l_idx, transfer))
    metrics = disaggregated(_per_layout(tables, "prefill_s")[p_idx],
                            _per_layout(tables, "prefill_rate_per_s")[p_idx], transfer,
                            decode_tab[d_idx, l_idx], level_tab[d_idx, l_idx], x, y,
                            output_len, float(num_gpus))
    return ScreenedSet("disaggregated", d_idx, l_idx, y, p_idx, x, metrics)
