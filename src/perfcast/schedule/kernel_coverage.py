"""Which ops of a step a measured kernel table does not cover (timed analytically instead).

A measured backend (``kernels.measured.MeasuredBackend``) times each op from the table where
the op's shape lies among measured points of its GPU, kind, precision and pass, and falls
back to the analytical model per op elsewhere. Like SimuMax's ``system.miss_efficiency``
(shared/reference/measured_kernels/simumax_kernels_README.md), the forecast says which ops
fell back. Unfused attention is timed through GEMM and memory-bound calls of other shapes
and is not checked here.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from perfcast.graph.ops import AttentionOp, ComputeOp, GemmOp, MemoryOp, Phase
from perfcast.graph.stage import StageGraph
from perfcast.schedule.op_time import attention_precision, gemm_precision
from perfcast.specs.hardware import GPUSpec
from perfcast.specs.strategy import Strategy


def op_falls_back(op: ComputeOp, gpu: GPUSpec, strategy: Strategy, backend) -> bool:
    """True when ``backend`` times ``op`` analytically: outside its table's points."""
    if isinstance(op, GemmOp):
        outside = backend.outside_table(gpu, "gemm", gemm_precision(op, strategy),
                                        gemm_pass=op.phase.value, m=op.m, n=op.n, k=op.k,
                                        batch=op.batch)
    elif isinstance(op, AttentionOp):
        if not op.fused:
            return False
        outside = backend.outside_table(
            gpu, "attention", attention_precision(strategy), causal=op.kernel_causal,
            backward=op.phase != Phase.FORWARD, batch=op.batch, num_heads=op.heads,
            seq_q=op.seq_q, seq_kv=op.kernel_seq_kv, head_dim_qk=op.head_dim_qk)
    elif isinstance(op, MemoryOp):
        outside = backend.outside_table(gpu, "memory", bytes_moved=op.bytes_moved)
    else:
        return False
    return bool(np.any(outside))


def table_fallback_ops(graphs: Iterable[StageGraph], gpu: GPUSpec, strategy: Strategy,
                       backend) -> tuple[str, ...]:
    """'name (kind)' of every distinct op of ``graphs`` that ``backend``'s table does not
    cover, in graph order; () for a backend without a table (no ``outside_table``)."""
    if not hasattr(backend, "outside_table"):
        return ()
    names: dict[str, None] = {}
    for graph in graphs:
        ops = [op for group in graph.layers for op in group.compute] + list(graph.extra_compute)
        for op in ops:
            label = f"{op.name} ({op.kind.value})"
            if label not in names and op_falls_back(op, gpu, strategy, backend):
                names[label] = None
    return tuple(names)
