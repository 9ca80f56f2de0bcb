"""Time of one pipeline stage for one micro-batch: compute by kind, recompute, exposed comm.

Exposure rules per micro-batch (what Megatron-LM / PyTorch do by default):
- TP collectives sit between dependent GEMMs: fully exposed (Korthikanti et al. 2022 §4.2.2);
- CP K/V exchange runs under the attention kernel: exposed part max(0, comm − attention)
  (Liu et al. 2023, Ring Attention §3; Megatron-Core CP overlaps the P2P ring with compute);
- EP all-to-all dispatch/combine sits between router and experts: fully exposed;
- recompute: full = re-run the forward of the recomputed layers (with its TP and EP
  collectives); selective = re-run the attention core forward (Korthikanti et al. 2022 §5).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from perfcast.graph.ops import AttentionOp, GemmOp, Group, MemoryOp, Phase
from perfcast.graph.stage import LayerGroup, StageGraph
from perfcast.kernels.backend import KernelBackend
from perfcast.schedule.op_time import comm_op_time_s, compute_op_time_s
from perfcast.specs.hardware import SystemSpec
from perfcast.specs.strategy import Strategy


@dataclass(frozen=True)
class LayerTime:
    """Seconds of one layer for one micro-batch."""

    gemm_s: float
    attention_s: float
    memory_bound_s: float
    forward_compute_s: float
    backward_compute_s: float
    attention_forward_s: float
    tp_forward_s: float
    tp_backward_s: float
    cp_s: float
    """Exposed CP seconds, forward + backward."""
    ep_forward_s: float
    ep_backward_s: float


@dataclass(frozen=True)
class StageTime:
    """Seconds of one stage for one micro-batch (forward + backward), by part."""

    gemm_s: float
    attention_s: float
    memory_bound_s: float
    recompute_s: float
    tp_comm_s: float
    cp_comm_s: float
    ep_comm_s: float
    layer_forward_s: float
    """Forward compute of one average layer (hides FSDP prefetch)."""
    layer_backward_s: float
    """Backward compute of one average layer."""
    backward_compute_s: float
    """Backward compute of the whole stage (window for overlapping gradient reduction)."""

    @property
    def total_s(self) -> float:
        return (self.gemm_s + self.attention_s + self.memory_bound_s + self.recompute_s
                + self.tp_comm_s + self.cp_comm_s + self.ep_comm_s)


def layer_time(group: LayerGroup, system, strategy, backend) -> LayerTime:
    """Seconds of one layer of ``group`` for one micro-batch, by part."""
    kind_s = {GemmOp: 0.0, AttentionOp: 0.0, MemoryOp: 0.0}
    fwd = bwd = attn_fwd = attn_bwd = 0.0
    for op in group.compute:
        t = compute_op_time_s(op, system, strategy, backend)
        kind_s[type(op)] += t
        is_attention = isinstance(op, AttentionOp)
        if op.phase == Phase.FORWARD:
            fwd, attn_fwd = fwd + t, attn_fwd + (t if is_attention else 0.0)
        else:
            bwd, attn_bwd = bwd + t, attn_bwd + (t if is_attention else 0.0)
    comm = {(g, forward): 0.0 for g in (Group.TP, Group.CP, Group.EP) for forward in (True, False)}
    for op in group.comm:
        comm[(op.group, op.phase == Phase.FORWARD)] += comm_op_time_s(op, system, strategy)
    return LayerTime(
        gemm_s=kind_s[GemmOp], attention_s=kind_s[AttentionOp], memory_bound_s=kind_s[MemoryOp],
        forward_compute_s=fwd, backward_compute_s=bwd, attention_forward_s=attn_fwd,
        tp_forward_s=comm[(Group.TP, True)], tp_backward_s=comm[(Group.TP, False)],
        cp_s=(max(0.0, comm[(Group.CP, True)] - attn_fwd)
              + max(0.0, comm[(Group.CP, False)] - attn_bwd)),
        ep_forward_s=comm[(Group.EP, True)], ep_backward_s=comm[(Group.EP, False)],
    )


@dataclass(frozen=True)
class ExtraTime:
    """Seconds of a stage's non-layer ops (embedding, LM head, loss) for one micro-batch."""

    gemm_s: float
    memory_bound_s: float
    backward_s: float


def extra_time(ops, system: SystemSpec, strategy: Strategy, backend: KernelBackend) -> ExtraTime:
    """Seconds of the embedding / head ops ``ops`` (never recomputed), by part."""
    gemm = memory_bound = backward = 0.0
    for op in ops:
        t = compute_op_time_s(op, system, strategy, backend)
        if isinstance(op, GemmOp):
            gemm += t
        else:
            memory_bound += t
        if op.phase != Phase.FORWARD:
            backward += t
    return ExtraTime(gemm_s=gemm, memory_bound_s=memory_bound, backward_s=backward)


def assemble_stage_time(layers, extra: ExtraTime, strategy: Strategy) -> StageTime:
    """A stage's per-micro-batch time from ``layers`` — (count, LayerTime) pairs in stage
    order — and its ``extra`` ops, with the strategy's recomputation.

    Array-friendly: LayerTime/ExtraTime fields and ``strategy.recompute_num_layers`` may be
    numpy arrays (the bulk search evaluates many strategies at once); counts are integers.
    """
    gemm = attention = memory_bound = recompute = tp = cp = ep = 0.0
    layer_fwd = layer_bwd = 0.0
    num_layers = sum(n for n, _ in layers)
    to_recompute = strategy.recomputed_layers(num_layers)
    for n, lt in layers:
        gemm += n * lt.gemm_s
        attention += n * lt.attention_s
        memory_bound += n * lt.memory_bound_s
        tp += n * (lt.tp_forward_s + lt.tp_backward_s)
        cp += n * lt.cp_s
        ep += n * (lt.ep_forward_s + lt.ep_backward_s)
        layer_fwd += n * lt.forward_compute_s
        layer_bwd += n * lt.backward_compute_s
        if strategy.recompute == "selective":
            recompute += n * lt.attention_forward_s
        redo = np.minimum(n, to_recompute)
        to_recompute -= redo
        recompute += redo * (lt.forward_compute_s + lt.tp_forward_s + lt.ep_forward_s)
    layers_or_one = max(num_layers, 1)
    return StageTime(
        gemm_s=gemm + extra.gemm_s, attention_s=attention,
        memory_bound_s=memory_bound + extra.memory_bound_s, recompute_s=recompute,
        tp_comm_s=tp, cp_comm_s=cp, ep_comm_s=ep,
        layer_forward_s=layer_fwd / layers_or_one, layer_backward_s=layer_bwd / layers_or_one,
        backward_compute_s=layer_bwd + extra.backward_s,
    )


def stage_time(graph: StageGraph, system: SystemSpec, strategy: Strategy,
               backend: KernelBackend) -> StageTime:
    """Seconds of ``graph`` for one micro-batch on one GPU, by part."""
    layers = [(group.count, layer_time(group, system, strategy, backend)) for group in graph.layers]
    return assemble_stage_time(layers, extra_time(graph.extra_compute, system, strategy, backend),
                               strategy)
