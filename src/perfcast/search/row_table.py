"""The size rows of one pipeline size, crossed with their row options, and the layer keys
they name (``search.enumerate``'s building blocks).

A ``RowTable`` holds the rows (tp, cp, ep, etp, micro-batch, CP exchange, 2D TP rows, CP
all-to-all ranks) of one pp and sequence-parallel mode, each repeated per TP comm overlap, MoE
option and CUDA-graph scope. Blocks that keep the same rows (``RowTable.rows``: interleaved or
not, sharded or not, with or without EP overlap) share one set of read-only arrays: a
DeepSeek-V3 search on 1,024 GPUs has ~1,000 blocks over a few dozen selections, which held
~5.6 GiB as one copy per block.

``LayerKeyIndex`` numbers the layer keys in order of first use; it looks a row up by its
integer codes before building its ``LayerKey`` (3.8 M lookups for 1.1 M keys in that search).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from perfcast.search.framework_rules import interleaved_micro_batches_ok
from perfcast.search.space import CUDA_GRAPH_SCOPES, DISPATCHERS, LayerKey
from perfcast.specs.strategy import CP_COMM_TYPES
from perfcast.specs.workload import Workload

if TYPE_CHECKING:
    from perfcast.search.enumerate import MoeOptions


@dataclass
class LayerKeyIndex:
    """The layer keys of a space being enumerated, numbered in order of first use."""

    keys: dict[LayerKey, int] = field(default_factory=dict)
    by_row: dict[tuple, int] = field(default_factory=dict)
    """(row codes, sequence parallel, precision choice) -> key number: the row's ``LayerKey``
    is built once (rows of different pp share it)."""

    def index(self, row: tuple[int, ...], sp: bool, prec: tuple[str, ...]) -> int:
        """Number of the ``LayerKey`` of ``RowTable`` row ``row`` (``layer_key``)."""
        found = self.by_row.get((row, sp, prec))
        if found is None:
            found = self.keys.setdefault(layer_key(row, sp, *prec), len(self.keys))
            self.by_row[(row, sp, prec)] = found
        return found


def micro_batches(workload: Workload, mbs, dp):
    """Micro-batches per step of each row (global batch / (micro-batch x dp))."""
    return workload.global_batch_size // (mbs * dp)


_BLOCK_COLUMNS = (("tp_comm_overlap", "overlap"), ("ep_overlap", "ep_overlap"),
                  ("dispatcher", "dispatcher"), ("tp", "tp"), ("cp", "cp"), ("ep", "ep"),
                  ("etp", "etp"), ("micro_batch_size", "mbs"), ("cp_comm", "cp_comm"),
                  ("cp_a2a", "cp_a2a"), ("tp2d_rows", "tp2d_rows"), ("cuda_graphs", "graphs"))
"""(``StrategyBlock`` field, ``RowTable`` column) of the per-row arrays."""


def select_rows(tables: dict[bool, RowTable], sp: bool, interleaved: bool, sharded: bool,
                 no_ep_overlap: bool) -> SelectedRows | None:
    """``RowTable.rows`` of the table of sequence-parallel mode ``sp``."""
    return tables[sp].rows(interleaved, sharded, no_ep_overlap)


def _shared(array: np.ndarray) -> np.ndarray:
    """``array``, read-only: several blocks hold it."""
    array.flags.writeable = False
    return array


@dataclass(frozen=True)
class SelectedRows:
    """A ``RowTable``'s rows kept by one selection (``RowTable.rows``)."""

    sizes: dict[str, np.ndarray]
    """``StrategyBlock`` field -> its per-row array."""
    keys: dict[tuple[str, str], np.ndarray]
    """As ``RowTable.keys``, for the kept rows."""


@dataclass(frozen=True)
class RowTable:
    """Size rows (tp, cp, ep, etp, micro-batch, CP exchange code, 2D TP rows, CP all-to-all
    ranks) of one pp and one
    sequence-parallel mode, each repeated per TP comm overlap setting, per MoE option
    (dispatcher, EP overlap) and per CUDA-graph scope, as (rows, 1, 1) arrays, with their
    layer keys."""

    tp: np.ndarray
    cp: np.ndarray
    ep: np.ndarray
    etp: np.ndarray
    mbs: np.ndarray
    cp_comm: np.ndarray
    tp2d_rows: np.ndarray
    cp_a2a: np.ndarray
    overlap: np.ndarray
    dispatcher: np.ndarray
    ep_overlap: np.ndarray
    graphs: np.ndarray
    """CUDA-graph scope per row, an index into ``CUDA_GRAPH_SCOPES``."""
    keys: dict[tuple[str, str], np.ndarray]
    """(precision, FP8 recipe, FP8 GEMM scope) -> layer key index per row."""
    interleaves: np.ndarray
    has_dp: np.ndarray

    def __len__(self) -> int:
        return len(self.interleaves)

    def rows(self, interleaved: bool, sharded: bool, no_ep_overlap: bool) -> SelectedRows | None:
        """The rows an interleaved schedule (micro-batches a multiple of pp), a sharded
        optimizer (a DP group to shard over) and a block without EP overlap keep, as the
        block's arrays; None where no row is left. Blocks that select alike share these
        arrays (a search holds ~1,000 blocks over a few such selections)."""
        mask = self.interleaves.copy() if interleaved else np.ones(len(self), bool)
        if sharded:
            mask &= self.has_dp
        if no_ep_overlap:
            mask &= ~self.ep_overlap.ravel()
        if not mask.any():
            return None
        sizes = {name: _shared(getattr(self, column)[mask]) for name, column in _BLOCK_COLUMNS}
        return SelectedRows(sizes, {k: _shared(v[mask]) for k, v in self.keys.items()})

    @classmethod
    def build(cls, rows, sp: bool, overlaps, moe: MoeOptions, precisions, scopes, pp: int,
              n: int, workload: Workload, layer_keys: LayerKeyIndex) -> RowTable:
        # 2D TP rows (row[6] > 1) need sequence parallelism and run without TP overlap.
        chosen = [(*row, int(o), d, int(eo), g) for row in rows if row[0] > 1 or not sp
                  if row[6] == 1 or sp for o in overlaps if row[6] == 1 or not o
                  for d, eo in moe.of(row[2]) for g in scopes]
        table = np.array(chosen, dtype=np.int64).reshape(-1, 12)
        (tp, cp, ep, etp, mbs, cp_comm, tp2d_rows, cp_a2a, overlap, dispatcher, ep_overlap,
         graphs) = (table[:, i].reshape(-1, 1, 1) for i in range(12))
        dp = n // (tp * pp * cp)
        keys = {prec: np.array([layer_keys.index(row, sp, prec) for row in chosen],
                               dtype=np.int64).reshape(-1, 1, 1)
                for prec in precisions}
        return cls(tp=tp, cp=cp, ep=ep, etp=etp, mbs=mbs, cp_comm=cp_comm, tp2d_rows=tp2d_rows,
                   cp_a2a=cp_a2a, overlap=overlap.astype(bool),
                   dispatcher=dispatcher, ep_overlap=ep_overlap.astype(bool), graphs=graphs,
                   keys=keys,
                   interleaves=interleaved_micro_batches_ok(
                       micro_batches(workload, mbs, dp), pp).ravel(),
                   has_dp=((dp * cp > 1) | ((tp * cp * dp) // (ep * etp) > 1)).ravel())



def layer_key(row: tuple[int, ...], sp: bool, precision: str, fp8_recipe: str,
               fp8_gemm_scope: str = "all") -> LayerKey:
    """The ``LayerKey`` of a ``RowTable`` row (tp, cp, ep, etp, micro-batch, CP exchange code,
    2D TP rows, CP all-to-all ranks, TP overlap, dispatcher index, EP overlap, CUDA-graph scope
    code) under ``precision``, ``fp8_recipe`` and ``fp8_gemm_scope``."""
    (tp, cp, ep, etp, mbs, cp_comm, tp2d_rows, cp_a2a, overlap, dispatcher, ep_overlap,
     graphs) = (int(v) for v in row)
    hierarchical = CP_COMM_TYPES[cp_comm] == "a2a+p2p" and cp > 1
    return LayerKey(tp=tp, cp=cp, ep=ep, etp=etp, micro_batch_size=mbs, sequence_parallel=sp,
                    precision=precision, tp_comm_overlap=bool(overlap), fp8_recipe=fp8_recipe,
                    moe_token_dispatcher=DISPATCHERS[dispatcher], ep_overlap=bool(ep_overlap),
                    cp_comm_type=CP_COMM_TYPES[cp_comm],
                    hierarchical_cp_a2a_size=cp_a2a if hierarchical else None,
                    tp2d_rows=tp2d_rows, cuda_graphs=CUDA_GRAPH_SCOPES[graphs],
                    fp8_gemm_scope=fp8_gemm_scope)
