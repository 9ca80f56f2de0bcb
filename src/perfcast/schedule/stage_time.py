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

from perfcast.graph.ops import AttentionOp, GemmOp, Group, MemoryOp, Phase
from perfcast.graph.stage import LayerGroup, StageGraph
from perfcast.kernels.backend import KernelBackend
from perfcast.schedule.op_time import comm_op_time_s, compute_op_time_s
from perfcast.schedule.timeline import PassTimes
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
    wgrad_s: float
    """Weight-gradient compute (``Phase.BACKWARD_WGRAD`` ops)."""
    cp_forward_s: float
    """Exposed CP seconds of the forward."""


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
    forward_s: float
    """Forward pass of the stage: forward compute + exposed forward TP/CP/EP comm (part of
    ``total_s``)."""
    wgrad_s: float
    """Weight-gradient compute of the stage (part of ``total_s``; zero-bubble schedules defer it,
    Qi et al. 2023 §2). The input-gradient pass is ``total_s − forward_s − wgrad_s``."""

    def passes(self, extra_input_grad_s: float = 0.0) -> PassTimes:
        """F, B (input gradient: the rest of the backward, with recompute and
        ``extra_input_grad_s``) and W of one micro-batch; they sum to ``total_s`` + extra."""
        input_grad = self.total_s - self.forward_s - self.wgrad_s + extra_input_grad_s
        return PassTimes(self.forward_s, input_grad, self.wgrad_s)

    @property
    def total_s(self) -> float:
        return (self.gemm_s + self.attention_s + self.memory_bound_s + self.recompute_s
                + self.tp_comm_s + self.cp_comm_s + self.ep_comm_s)


def _layer_time(group: LayerGroup, system, strategy, backend) -> LayerTime:
    kind_s = {GemmOp: 0.0, AttentionOp: 0.0, MemoryOp: 0.0}
    fwd = bwd = attn_fwd = attn_bwd = wgrad = 0.0
    for op in group.compute:
        t = compute_op_time_s(op, system, strategy, backend)
        kind_s[type(op)] += t
        is_attention = isinstance(op, AttentionOp)
        wgrad += t if op.phase == Phase.BACKWARD_WGRAD else 0.0
        if op.phase == Phase.FORWARD:
            fwd, attn_fwd = fwd + t, attn_fwd + (t if is_attention else 0.0)
        else:
            bwd, attn_bwd = bwd + t, attn_bwd + (t if is_attention else 0.0)
    comm = {(g, forward): 0.0 for g in (Group.TP, Group.CP, Group.EP) for forward in (True, False)}
    for op in group.comm:
        comm[(op.group, op.phase == Phase.FORWARD)] += comm_op_time_s(op, system, strategy)
    cp_forward = max(0.0, comm[(Group.CP, True)] - attn_fwd)
    return LayerTime(
        gemm_s=kind_s[GemmOp], attention_s=kind_s[AttentionOp], memory_bound_s=kind_s[MemoryOp],
        forward_compute_s=fwd, backward_compute_s=bwd, attention_forward_s=attn_fwd,
        tp_forward_s=comm[(Group.TP, True)], tp_backward_s=comm[(Group.TP, False)],
        cp_s=cp_forward + max(0.0, comm[(Group.CP, False)] - attn_bwd),
        ep_forward_s=comm[(Group.EP, True)], ep_backward_s=comm[(Group.EP, False)],
        wgrad_s=wgrad, cp_forward_s=cp_forward,
    )


def stage_time(graph: StageGraph, system: SystemSpec, strategy: Strategy,
               backend: KernelBackend) -> StageTime:
    """Seconds of ``graph`` for one micro-batch on one GPU, by part."""
    gemm = attention = memory_bound = recompute = tp = cp = ep = 0.0
    layer_fwd = layer_bwd = forward = wgrad = 0.0
    to_recompute = strategy.recomputed_layers(graph.num_layers)
    for group in graph.layers:
        lt, n = _layer_time(group, system, strategy, backend), group.count
        gemm += n * lt.gemm_s
        attention += n * lt.attention_s
        memory_bound += n * lt.memory_bound_s
        tp += n * (lt.tp_forward_s + lt.tp_backward_s)
        cp += n * lt.cp_s
        ep += n * (lt.ep_forward_s + lt.ep_backward_s)
        layer_fwd += n * lt.forward_compute_s
        layer_bwd += n * lt.backward_compute_s
        forward += n * (lt.forward_compute_s + lt.tp_forward_s + lt.cp_forward_s + lt.ep_forward_s)
        wgrad += n * lt.wgrad_s
        if strategy.recompute == "selective":
            recompute += n * lt.attention_forward_s
        redo = min(n, to_recompute)
        to_recompute -= redo
        recompute += redo * (lt.forward_compute_s + lt.tp_forward_s + lt.ep_forward_s)
    extra_bwd = 0.0
    for op in graph.extra_compute:
        t = compute_op_time_s(op, system, strategy, backend)
        if isinstance(op, GemmOp):
            gemm += t
        else:
            memory_bound += t
        if op.phase != Phase.FORWARD:
            extra_bwd += t
        else:
            forward += t
        if op.phase == Phase.BACKWARD_WGRAD:
            wgrad += t
    layers = max(graph.num_layers, 1)
    return StageTime(
        gemm_s=gemm, attention_s=attention, memory_bound_s=memory_bound, recompute_s=recompute,
        tp_comm_s=tp, cp_comm_s=cp, ep_comm_s=ep,
        layer_forward_s=layer_fwd / layers, layer_backward_s=layer_bwd / layers,
        backward_compute_s=layer_bwd + extra_bwd, forward_s=forward, wgrad_s=wgrad,
    )
