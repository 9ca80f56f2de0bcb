"""Seconds of one operator record on one GPU or one parallel group.

Compute ops go to a kernel backend (``perfcast.kernels``); collectives go to the two-tier
alpha-beta model (``perfcast.comm.hierarchical``) over the ranks their group actually spans
(``comm.placement``; rank order tp innermost, then cp, dp, pp; experts carved as etp, ep,
edp inside tp·cp·dp as in Megatron-Core).
"""

from __future__ import annotations

import numpy as np

from perfcast.graph.ops import AttentionOp, CommOp, ComputeOp, GemmOp, Group, MemoryOp
from perfcast.kernels.backend import KernelBackend
from perfcast.specs.hardware import SystemSpec
from perfcast.specs.strategy import Strategy


def compute_op_time_s(op: ComputeOp, system: SystemSpec, strategy: Strategy,
                      backend: KernelBackend):
    """Seconds for ``op`` (all its ``count`` repetitions) on one GPU."""
    gpu = system.gpu
    if isinstance(op, GemmOp):
        precision = "fp8" if strategy.precision == "fp8" and op.fp8_eligible else (
            "fp16" if strategy.precision == "fp16" else "bf16")
        return op.count * backend.gemm_time_s(gpu, op.m, op.n, op.k, op.batch, precision)
    if isinstance(op, AttentionOp):
        precision = "fp16" if strategy.precision == "fp16" else "bf16"
        backward = op.phase.value != "forward"
        return op.count * backend.attention_time_s(
            gpu, op.batch, op.heads, op.seq_q, op.kernel_seq_kv, op.head_dim_qk, op.head_dim_v,
            op.kernel_causal, backward, precision)
    if isinstance(op, MemoryOp):
        return op.count * backend.memory_bound_time_s(gpu, op.bytes_moved)
    raise TypeError(f"not a compute op: {op!r}")


def group_size_and_stride(group: Group, strategy: Strategy) -> tuple[int, int]:
    """Size of ``group`` and the rank distance between its members."""
    tp, cp, dp = strategy.tp, strategy.cp, strategy.dp
    etp, ep = strategy.expert_tp, strategy.ep
    return {
        Group.TP: (tp, 1),
        Group.CP: (cp, tp),
        Group.DP: (dp, tp * cp),
        Group.DP_CP: (dp * cp, tp),
        Group.PP: (strategy.pp, tp * cp * dp),
        Group.EP: (ep, etp),
        Group.EDP: (strategy.expert_dp, etp * ep),
    }[group]


def comm_op_time_s(op: CommOp, system: SystemSpec, strategy: Strategy):
    """Seconds for ``op`` (all repetitions) on its group's link (array-friendly: the group
    sizes and ``op.size_bytes`` may be numpy arrays; a group of one costs 0)."""
    from perfcast.comm import Collective, hierarchical_collective_time_s

    size, stride = group_size_and_stride(op.group, strategy)
    if np.ndim(size) == 0 and size <= 1:
        return 0.0
    kind = Collective(op.collective.value)
    seconds = hierarchical_collective_time_s(kind, op.size_bytes, system, size, stride)
    return op.count * (float(seconds) if np.ndim(seconds) == 0 else seconds)
