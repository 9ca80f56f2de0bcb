"""Time of one pipeline stage for one micro-batch: compute by kind, recompute, exposed comm.

Exposure rules per micro-batch (what Megatron-LM / PyTorch do by default):
- TP collectives sit between dependent GEMMs: fully exposed (Korthikanti et al. 2022 §4.2.2);
- CP K/V exchange runs under the attention kernel: exposed part max(0, comm − attention)
  (Liu et al. 2023, Ring Attention §3; Megatron-Core CP overlaps the P2P ring with compute);
- EP all-to-all dispatch/combine sits between router and experts: fully exposed;
- recompute: full = re-run the forward of the recomputed layers (with its TP collectives);
  selective = re-run the attention core forward (Korthikanti et al. 2022 §5).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from perfcast.graph.ops import AttentionOp, Group, OpKind, Phase
from perfcast.graph.stage import LayerGroup, StageGraph
from perfcast.kernels.backend import KernelBackend
from perfcast.schedule.op_time import comm_op_time_s, compute_op_time_s
from perfcast.specs.hardware import SystemSpec
from perfcast.specs.strategy import Strategy


@dataclass(frozen=True)
class StageTime:
    """Seconds of one stage for one micro-batch (forward + backward), by part."""

    forward_s: float
    backward_s: float
    compute_by_kind_s: dict[str, float] = field(default_factory=dict)
    """gemm / attention / memory_bound seconds (forward + backward, no recompute)."""
    recompute_s: float = 0.0
    exposed_comm_s: dict[str, float] = field(default_factory=dict)
    """Exposed collective seconds per group (tp, cp, ep)."""
    layer_forward_s: float = 0.0
    """Forward compute of one average layer (hides FSDP prefetch)."""
    layer_backward_s: float = 0.0
    backward_compute_s: float = 0.0
    """Backward compute alone (window for overlapping gradient reduction)."""

    @property
    def total_s(self) -> float:
        return self.forward_s + self.backward_s


def _group_times(group: LayerGroup, system, strategy, backend):
    by_kind = {OpKind.GEMM.value: 0.0, OpKind.ATTENTION.value: 0.0,
               OpKind.MEMORY_BOUND.value: 0.0}
    fwd = bwd = attn_fwd = attn_bwd = 0.0
    for op in group.compute:
        t = compute_op_time_s(op, system, strategy, backend)
        by_kind[op.kind.value] += t
        if op.phase == Phase.FORWARD:
            fwd += t
            if isinstance(op, AttentionOp):
                attn_fwd += t
        else:
            bwd += t
            if isinstance(op, AttentionOp):
                attn_bwd += t
    comm = {Group.TP.value: [0.0, 0.0], Group.CP.value: [0.0, 0.0], Group.EP.value: [0.0, 0.0]}
    for op in group.comm:
        t = comm_op_time_s(op, system, strategy)
        comm[op.group.value][0 if op.phase == Phase.FORWARD else 1] += t
    cp_f, cp_b = comm[Group.CP.value]
    exposed_fwd = {"tp": comm["tp"][0], "cp": max(0.0, cp_f - attn_fwd), "ep": comm["ep"][0]}
    exposed_bwd = {"tp": comm["tp"][1], "cp": max(0.0, cp_b - attn_bwd), "ep": comm["ep"][1]}
    return by_kind, fwd, bwd, attn_fwd, exposed_fwd, exposed_bwd


def _recompute_layers(strategy: Strategy, num_layers: int) -> int:
    if strategy.recompute != "full":
        return 0
    if strategy.recompute_num_layers is None:
        return num_layers
    return min(strategy.recompute_num_layers, num_layers)


def stage_time(graph: StageGraph, system: SystemSpec, strategy: Strategy,
               backend: KernelBackend) -> StageTime:
    """Forward and backward seconds of ``graph`` for one micro-batch on one GPU."""
    by_kind = {OpKind.GEMM.value: 0.0, OpKind.ATTENTION.value: 0.0,
               OpKind.MEMORY_BOUND.value: 0.0}
    exposed = {"tp": 0.0, "cp": 0.0, "ep": 0.0}
    forward = backward = recompute = backward_compute = layer_forward_compute = 0.0
    full_layers = _recompute_layers(strategy, graph.num_layers)
    remaining_recompute = full_layers
    for group in graph.layers:
        kinds, fwd, bwd, attn_fwd, exp_f, exp_b = _group_times(group, system, strategy, backend)
        n = group.count
        for key, value in kinds.items():
            by_kind[key] += n * value
        fwd_comm, bwd_comm = sum(exp_f.values()), sum(exp_b.values())
        for key in exposed:
            exposed[key] += n * (exp_f[key] + exp_b[key])
        forward += n * (fwd + fwd_comm)
        backward += n * (bwd + bwd_comm)
        backward_compute += n * bwd
        layer_forward_compute += n * fwd
        if strategy.recompute == "selective":
            recompute += n * attn_fwd
        elif remaining_recompute > 0:
            redo = min(n, remaining_recompute)
            remaining_recompute -= redo
            recompute += redo * (fwd + exp_f["tp"] + exp_f["ep"])
    for op in graph.extra_compute:
        t = compute_op_time_s(op, system, strategy, backend)
        by_kind[op.kind.value] += t
        if op.phase == Phase.FORWARD:
            forward += t
        else:
            backward += t
            backward_compute += t
    backward += recompute
    layers = max(graph.num_layers, 1)
    return StageTime(
        forward_s=forward,
        backward_s=backward,
        compute_by_kind_s=by_kind,
        recompute_s=recompute,
        exposed_comm_s=exposed,
        layer_forward_s=layer_forward_compute / layers,
        layer_backward_s=(backward_compute - _extra_backward(graph, system, strategy, backend)) / layers,
        backward_compute_s=backward_compute,
    )


def _extra_backward(graph, system, strategy, backend) -> float:
    return sum(compute_op_time_s(op, system, strategy, backend)
               for op in graph.extra_compute if op.phase != Phase.FORWARD)
