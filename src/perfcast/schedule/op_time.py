"""Seconds of one operator record on one GPU or one parallel group.

Compute ops go to a kernel backend (``perfcast.kernels``); collectives go to the algorithm
NCCL would pick on the tiers their group actually crosses (``perfcast.comm.select``), placed
by ``Strategy.placement_order`` (``comm.placement.dimension_strides``; default Megatron-LM
'tp-cp-ep-dp-pp'). Dense groups use sizes tp, cp, dp, pp; expert groups are carved as etp, ep,
edp, pp in the same order (Megatron-Core's expert rank generator: tp→etp, dp→edp, cp folded).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from perfcast.arrays import all_scalars
from perfcast.graph.fp8_casts import gemm_format, gemm_in_fp8
from perfcast.graph.ops import (
    LOW_LATENCY_ALGORITHM,
    AttentionOp,
    CommOp,
    ComputeOp,
    GemmOp,
    Group,
    MemoryOp,
)
from perfcast.kernels.backend import KernelBackend
from perfcast.kernels.scaled_gemm import scaled_gemm_time_ratio
from perfcast.memo import ArrayContentMemo, LastPairTable, PerObjectMemo
from perfcast.specs.hardware import Precision, SystemSpec
from perfcast.specs.strategy import Strategy


def compute_op_time_s(op: ComputeOp, system: SystemSpec, strategy: Strategy,
                      backend: KernelBackend):
    """Seconds for ``op`` (all its ``count`` repetitions) on one GPU."""
    gpu = system.gpu
    if isinstance(op, GemmOp):
        precision = gemm_precision(op, strategy)
        ratio = scaled_gemm_time_ratio(backend, strategy.fp8_recipe, precision)
        return ratio * op.count * backend.gemm_time_s(gpu, op.m, op.n, op.k, op.batch,
                                                      precision, gemm_pass=op.phase.value,
                                                      grouped=op.grouped_kernel)
    if isinstance(op, AttentionOp):
        precision = attention_precision(strategy)
        backward = op.phase.value != "forward"
        if not op.fused:  # eager attention only (imported on first use)
            from perfcast.kernels.unfused_attention import unfused_attention_time_s

            return op.count * unfused_attention_time_s(
                backend, gpu, op.batch, op.heads, op.seq_q, op.seq_kv, op.head_dim_qk,
                op.head_dim_v, backward, precision, op.dropout)
        return op.count * backend.attention_time_s(
            gpu, op.batch, op.heads, op.seq_q, attention_kernel_keys(op, gpu), op.head_dim_qk,
            op.head_dim_v, op.kernel_causal, backward, precision,
            kernel=strategy.attention_kernel)
    if isinstance(op, MemoryOp):
        return op.count * backend.memory_bound_time_s(gpu, op.bytes_moved)
    raise TypeError(f"not a compute op: {op!r}")


def attention_kernel_keys(op: AttentionOp, gpu):
    """Keys per query the fused kernel processes: a sliding window at key-block granularity
    (``kernels.tiles.sliding_window_keys_visited`` with the generation's flash-attention blocks,
    ``calibration/kernel_analytical.yaml``), else the op's ``kernel_seq_kv``."""
    if op.window is None or op.window >= op.seq_kv:
        return op.kernel_seq_kv
    from perfcast.calibration.kernel_analytical import load_kernel_analytical
    from perfcast.kernels.tiles import sliding_window_keys_visited

    blocks = load_kernel_analytical().for_generation(gpu.generation).attention
    return sliding_window_keys_visited(op.window, op.seq_kv, blocks.block_q, blocks.block_kv)
def gemm_precision(op: GemmOp, strategy: Strategy) -> Precision:
    """Format ``op`` runs in: the FP8 recipe's when the recipe casts it, else fp16/bf16."""
    if strategy.precision == "fp8" and gemm_in_fp8(op, strategy.precision, strategy.fp8_recipe):
        return gemm_format(strategy.fp8_recipe)
    return attention_precision(strategy)


def attention_precision(strategy: Strategy) -> Precision:
    """16-bit format of attention (and of GEMMs kept out of FP8): fp16 or bf16."""
    return "fp16" if strategy.precision == "fp16" else "bf16"


def group_size_and_stride(group: Group, strategy: Strategy) -> tuple[int, int]:
    """Size of ``group`` and the rank distance between its members (placement order).
    Array-friendly; scalar strategies take a memoized path (a step asks for the same few)."""
    table = _last_groups.table(strategy, None)  # the same strategy object as the last call
    if table:
        return table[group]
    sizes = (strategy.placement_order, strategy.tp, strategy.cp, strategy.dp, strategy.pp,
             strategy.expert_tp, strategy.ep, strategy.expert_dp, strategy.cp_a2a_size,
             getattr(strategy, "tp2d_rows", 1))
    if all_scalars(*sizes[1:]):
        table.update(_groups(*sizes))
    else:
        table.update(_group_table(*sizes))
        for value in table.values():  # the next calls share the arrays
            for part in value:
                if isinstance(part, np.ndarray):
                    part.flags.writeable = False
    return table[group]


_last_groups = LastPairTable()
"""The group table of the last ``group_size_and_stride`` strategy (``memo.LastPairTable``,
second key unused): a forecast asks for the groups of one strategy object ~30 times, the bulk
search of one block (frozen, its sizes read-only arrays) ~10 times (identity, not hashing)."""


@lru_cache(maxsize=4096)
def _groups(order: str, tp: int, cp: int, dp: int, pp: int, etp: int, ep: int, edp: int,
            cp_a2a: int = 1, tp_rows: int = 1):
    """``_group_table`` memoized for scalar sizes."""
    return _group_table(order, tp, cp, dp, pp, etp, ep, edp, cp_a2a, tp_rows)


def _group_table(order, tp, cp, dp, pp, etp, ep, edp, cp_a2a=1,
                 tp_rows=1) -> dict[Group, tuple]:
    """(size, stride) of every group: strides are the products of the sizes of the dimensions
    inside it in ``order`` (``comm.placement.dimension_strides``). The CP group splits into
    its inner all-to-all level (``cp_a2a`` adjacent CP ranks, Megatron-Core's hierarchical CP
    groups) and the ring across them (stride × cp_a2a). A 2D TP grid (``tp_rows`` rows) splits
    TP into rows of tp/tp_rows adjacent ranks and columns across them."""
    from perfcast.comm.placement import dimension_strides

    dense = dimension_strides(order, {"tp": tp, "cp": cp, "dp": dp, "pp": pp})
    expert = dimension_strides(order, {"tp": etp, "ep": ep, "dp": edp, "pp": pp})
    return {
        Group.TP: (tp, dense["tp"]),
        Group.TP_ROW: (tp // tp_rows, dense["tp"]),
        Group.TP_COL: (tp_rows, dense["tp"] * (tp // tp_rows)),
        Group.CP: (cp, dense["cp"]),
        Group.CP_A2A: (cp_a2a, dense["cp"]),
        Group.CP_RING: (cp // cp_a2a, dense["cp"] * cp_a2a),
        Group.DP: (dp, dense["dp"]),
        Group.DP_CP: (dp * cp, np.where(np.asarray(cp) > 1,
                                         np.minimum(dense["dp"], dense["cp"]), dense["dp"])[()]),
        Group.PP: (pp, dense["pp"]),
        Group.EP: (ep, expert["ep"]),
        Group.EDP: (edp, expert["dp"]),
    }


def _system_collective_s(system: SystemSpec, kind: str, size_bytes: float, size: int,
                         stride: int, algorithm: str | None) -> float:
    """One collective's seconds on ``system`` (scalar)."""
    return float(_group_collective_s(system, kind, size_bytes, size, stride, algorithm))


_collective_memo = PerObjectMemo(_system_collective_s, maxsize=8192)
"""Scalar collectives memoized per system (a step repeats the same few), the system found by
identity before equality (``perfcast.memo``)."""


def _dispatch_bytes(op: CommOp, system: SystemSpec, size, stride):
    """``op.size_bytes``, deduplicated per destination node for a DeepEP-style dispatch."""
    if op.fanout <= 1:
        return op.size_bytes
    from perfcast.comm.dispatch import node_dedup_factor
    from perfcast.comm.placement import num_domains

    return op.size_bytes * node_dedup_factor(op.fanout, num_domains(system, size, stride),
                                             *op.route_groups)


def comm_op_time_s(op: CommOp, system: SystemSpec, strategy: Strategy):
    """Seconds for ``op`` (all repetitions) with its forced algorithm, else the one NCCL would
    pick on its group; DeepEP low-latency dispatches by ``comm.dispatch``.

    Array-friendly: group sizes and ``op.size_bytes`` may be numpy arrays (the bulk search);
    scalars take the memoized path. A group of one costs 0."""
    size, stride = group_size_and_stride(op.group, strategy)
    if op.algorithm == LOW_LATENCY_ALGORITHM:
        from perfcast.comm.dispatch import low_latency_all_to_all_time_s

        return op.count * low_latency_all_to_all_time_s(op.size_bytes, system, size)
    size_bytes = _dispatch_bytes(op, system, size, stride)
    if all_scalars(size, stride, size_bytes):
        if size <= 1:
            return 0.0
        return op.count * _collective_memo(system)(op.collective.value, float(size_bytes),
                                                   int(size), int(stride), op.algorithm)
    return op.count * _array_collective_s(system, op.collective.value, size_bytes, size,
                                          stride, op.algorithm)


def _group_collective_s(system: SystemSpec, kind: str, size_bytes, size, stride,
                        algorithm: str | None):
    """``comm.group_collective_time_s`` (array-friendly)."""
    from perfcast.comm import group_collective_time_s

    return group_collective_time_s(kind, size_bytes, system, size, stride, algorithm)


_array_collective_s = ArrayContentMemo(_group_collective_s, maxsize=1024)
"""Array collectives remembered by their sizes' contents: the bulk search's blocks of one pp
share their rows, and each recompute choice asks for the same data-parallel collectives
(``memo.ArrayContentMemo``; Llama-3.1-405B x 16,384 in one process: 513 distinct of 5,860
asked; at most 1,024 kept, each at most 4,096 values: 32 MiB)."""
