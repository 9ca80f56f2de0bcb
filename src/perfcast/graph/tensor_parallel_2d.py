"""2D tensor parallelism with sequence parallelism (2D TP-SP) over a rows x cols grid, tp = r·c.

The NERSC performance model (Subramanian et al. 2024, "Comprehensive Performance Modeling and
System Design Insights for Foundation Models", arXiv:2410.00273) compares Megatron's 1D TP with
2D TP, whose weight matrices are split over both grid dimensions (SUMMA-style, van de Geijn &
Watts 1997; Xu et al. 2021 "Optimus", arXiv:2104.05343), and with 2D TP plus sequence
parallelism. perfcast models the sequence-parallel 2D scheme below; its volumes are re-derived
here from that layout, not copied from the paper (which is not in shared/reference).

Layout, per layer and micro-batch, T tokens: the residual stream X [T, h] is split into
[T/c tokens, h/r features] blocks; a column-parallel weight W1 [h, f1] (QKV, MLP-in) into
[h/r, f1/c] blocks; a row-parallel weight W2 [f2, h] (out-projection, MLP-out) into
[f2/c, h/r] blocks. For each linear pair (attention, MLP), forward:

1. all-gather X over the c ranks of a row (tokens): 2 B · T·h/r gathered;
2. local GEMM [T, h/r] x [h/r, f1/c]; reduce-scatter over the r ranks of a column (sum over
   h, scatter tokens): 2 B · T·f1/c, leaving [T/r, f1/c] per rank;
3. attention only: all-gather K and V over the column (every query needs every key):
   2 B · T·2·kv·d/c; the core attention of a rank is heads/c with T/r queries against T keys;
4. all-gather the [T/r, f2/c] input of W2 over the column: 2 B · T·f2/c;
5. local GEMM [T, f2/c] x [f2/c, h/r]; reduce-scatter over the row: 2 B · T·h/r.

Each layer norm reduces its per-token statistics (sum, sum of squares; fp32) over the row:
an all-reduce of 2·4 B · T/c. Backward moves the same volumes (the gathers' reduce-scatters
and back). With r = 1 every column collective and the norm reduction vanish and steps 1 and 5
are Megatron's sequence-parallel all-gather and reduce-scatter of 2 B · T·h over tp: the 1 x t
grid is 1D TP with SP exactly. GEMM and attention FLOPs per rank are 1/tp of the layer's for
every grid, and every activation tensor is split tp ways as with 1D TP-SP (memory as 1D TP-SP,
plus the gathered K/V of step 3 while the attention runs, ``tp2d_buffer_bytes``).
"""

from __future__ import annotations

import numpy as np

from perfcast.graph.ops import Collective, CommOp, Group, Phase
from perfcast.specs.dtypes import ACTIVATION_BYTES
from perfcast.specs.model import ModelSpec

ACT_BYTES = ACTIVATION_BYTES
NORM_STAT_BYTES = 2 * 4
"""Per token: sum and sum of squares in fp32 for a norm over a split hidden dimension."""


def tp2d_comm_ops(model: ModelSpec, tokens, rows: int, cols: int) -> list[CommOp]:
    """Collectives of one dense layer, one micro-batch, forward and backward (module docstring);
    ``tokens`` = T of the micro-batch, rows x cols the grid. Row collectives run on
    ``Group.TP_ROW`` (the c ranks of a grid row: one hidden slice, all tokens), column ones on
    ``Group.TP_COL`` (the r ranks of a grid column: one token slice, all hidden slices)."""
    h, d = model.hidden_size, model.kv_channels
    a, kv = model.num_attention_heads, model.num_kv_heads
    qkv = (a + 2 * kv) * d
    mlp_in = (2 if model.is_gated_mlp else 1) * model.intermediate_size
    residual = ACT_BYTES * tokens * h / rows
    ops: list[CommOp] = []
    for phase in (Phase.FORWARD, Phase.BACKWARD_DGRAD):
        ops += [
            CommOp("tp2d_row_all_gather", phase, Group.TP_ROW, Collective.ALL_GATHER,
                   residual, count=2),
            CommOp("tp2d_row_reduce_scatter", phase, Group.TP_ROW, Collective.REDUCE_SCATTER,
                   residual, count=2),
        ]
        if rows == 1:
            continue
        column = [("qkv", Collective.REDUCE_SCATTER, qkv),
                  ("kv", Collective.ALL_GATHER, 2 * kv * d),
                  ("attn_out", Collective.ALL_GATHER, a * d),
                  ("mlp_in", Collective.REDUCE_SCATTER, mlp_in),
                  ("mlp_out", Collective.ALL_GATHER, model.intermediate_size)]
        ops += [CommOp(f"tp2d_col_{name}", phase, Group.TP_COL, kind,
                       ACT_BYTES * tokens * width / cols) for name, kind, width in column]
        ops.append(CommOp("tp2d_norm_stats", phase, Group.TP_COL, Collective.ALL_REDUCE,
                          NORM_STAT_BYTES * tokens / cols, count=model.norms_per_layer))
    return ops


def tp2d_buffer_bytes(model: ModelSpec, tokens, tp, rows):
    """Transient bytes per GPU of the K/V gathered over the grid column for the attention
    (step 3): 2 B · T · 2·kv·d / c with c = tp/rows; 0 for the 1D grid. Array-friendly."""
    cols = tp // rows
    kv_bytes = ACT_BYTES * tokens * 2 * model.num_kv_heads * model.kv_channels / cols
    out = np.where(np.asarray(rows) > 1, kv_bytes, 0.0)
    return float(out) if out.ndim == 0 else out
