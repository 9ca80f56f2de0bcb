"""Time of one pipeline stage for one micro-batch: compute by kind, recompute, exposed comm.

Exposure rules per micro-batch (``schedule.overlap.exposed_comm_s``: max(comm − window,
s·min(comm, window)), s the cost of overlapping):
- TP collectives sit between dependent GEMMs: fully exposed (Korthikanti et al. 2022 §4.2.2);
  with ``tp_comm_overlap`` (Megatron ``--tp-comm-overlap``, Transformer Engine userbuffers:
  the all-gather / reduce-scatter is split into chunks pipelined with the GEMM that consumes
  or produces them; Wang et al. 2023 "Overlap communication with dependent computation via
  decomposition", ASPLOS) the window is the layer's GEMM time of the same pass;
- CP K/V exchange of the ring (``--cp-comm-type p2p``) runs under the attention kernel:
  window = attention of the same pass (Liu et al. 2023, Ring Attention §3; Megatron-Core CP
  overlaps the P2P ring with compute); the blocking K/V all-gather (``all_gather``) and the
  Ulysses all-to-alls (``a2a``, between projection and attention, Jacobs et al. 2023 §3.1)
  are exposed in full (``graph.context_parallel``);
  like data-parallel collectives it is issued on its own stream between kernels and each
  block is consumed by the next attention step, so its overlapped seconds cost the fitted
  ``stream_overlap_exposed_fraction`` (``schedule.overlap``) rather than the SM share alone;
  PyTorch's ring (``--cp-implementation torch``) gathers all K/V at once and waits for them
  at the second ring step: window = the first step's attention, 1/P of the pass's
  (``graph.torch_context_parallel``);
- EP all-to-all dispatch/combine sits between router and experts: fully exposed; with
  ``ep_overlap`` (Megatron-Core ``--overlap-moe-expert-parallel-comm``) or the DualPipe
  schedule (DeepSeek-V3 §3.2.1) the all-to-alls of one micro-batch run beside the paired
  micro-batch's compute (``schedule.ep_overlap``: combined 1F1B node by node, DualPipe under
  the whole layer), at the same SM-contention cost as TP/DP overlap
  (``schedule.overlap.exposed_comm_s``);
- recompute: full = re-run the forward of the recomputed layers (with its TP, CP and EP
  collectives: the checkpointed layer calls its attention, exchange included, again);
  selective = re-run the forward ops of ``recompute_modules`` (``graph.recompute_modules``;
  the default core_attn = the attention core, Korthikanti et al. 2022 §5, with its CP
  exchange; ``op_sac`` = torchtitan per-op SAC, every memory-bound op and every second
  matmul, ``graph.op_sac``, with the forward TP all-gathers that feed them).

Host time (``schedule.host_time``): each pass of a layer takes Σ over its segments between
device-host syncs of max(GPU stream, host issue time) plus the syncs; the excess over the GPU
stream is the exposed host time (``host_forward_s``/``host_backward_s``), which a recomputed
forward pays again.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from perfcast.calibration.comm_overlap import CommOverlapCalibration
from perfcast.calibration.host_launch import HostLaunchCalibration, load_host_launch
from perfcast.graph.ops import AttentionOp, GemmOp, Group, MemoryOp, Phase
from perfcast.graph.recompute_modules import forward_recompute_share, recomputed_op_names
from perfcast.graph.stage import LayerGroup, StageGraph
from perfcast.kernels.backend import KernelBackend
from perfcast.schedule.ep_overlap import (
    ExpertSeconds,
    defers_wgrad,
    ep_overlap_exposed_s,
    routed_expert_op,
)
from perfcast.schedule.host_time import (
    HostScope,
    Segment,
    op_segments,
    pass_time_s,
    with_extra_gpu_s,
)
from perfcast.schedule.op_time import comm_op_time_s, compute_op_time_s
from perfcast.schedule.overlap import (
    compute_slowdown,
    exposed_comm_s,
    stream_overlap_slowdown,
    tp_overlap_hideable_fraction,
)
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
    selective_recompute_s: float
    """Forward seconds re-run in backward by selective recompute (``recompute_modules``)."""
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
    host_forward_s: float = 0.0
    """Exposed host seconds of the forward: pass time with host issue and syncs minus the GPU
    stream (``schedule.host_time``)."""
    host_backward_s: float = 0.0
    """Exposed host seconds of the backward."""
    ep_unpaired_forward_s: float = 0.0
    """EP seconds a forward with no paired micro-batch exposes beyond ``ep_forward_s``
    (warm-up passes under EP overlap, ``schedule.ep_overlap.unpaired_pass_share``)."""
    ep_unpaired_backward_s: float = 0.0
    """EP seconds a backward with no paired micro-batch exposes beyond ``ep_backward_s``."""


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
    host_s: float = 0.0
    """Exposed host (launch and sync) seconds of the stage, recompute included (part of
    ``total_s``, not of ``compute_s``)."""
    offload_s: float = 0.0
    """Exposed host copies of offloaded activations (``schedule.activation_offload``)."""
    ep_unpaired_forward_s: float = 0.0
    """EP seconds the stage's forward exposes beyond ``ep_comm_s``'s share when no other
    micro-batch pairs with it (``LayerTime.ep_unpaired_forward_s`` summed)."""
    ep_unpaired_backward_s: float = 0.0
    """The same for the backward."""

    def with_unpaired_ep(self, share):
        """This stage time with ``share`` of its passes unpaired under EP overlap (their
        all-to-alls exposed in full; ``schedule.ep_overlap.unpaired_pass_share``), spread
        over every micro-batch as the closed-form pipeline takes one time per micro-batch."""
        forward = share * self.ep_unpaired_forward_s
        extra = forward + share * self.ep_unpaired_backward_s
        return replace(self, ep_comm_s=self.ep_comm_s + extra, forward_s=self.forward_s + forward,
                       ep_unpaired_forward_s=0.0, ep_unpaired_backward_s=0.0)

    def passes(self, extra_input_grad_s: float = 0.0) -> PassTimes:
        """F, B (input gradient: the rest of the backward, with recompute and
        ``extra_input_grad_s``) and W of one micro-batch; they sum to ``total_s`` + extra."""
        input_grad = self.total_s - self.forward_s - self.wgrad_s + extra_input_grad_s
        return PassTimes(self.forward_s, input_grad, self.wgrad_s)

    @property
    def compute_s(self) -> float:
        """Kernel seconds (GEMM, attention, memory-bound, recompute), no exposed comm."""
        return self.gemm_s + self.attention_s + self.memory_bound_s + self.recompute_s

    @property
    def total_s(self) -> float:
        return (self.gemm_s + self.attention_s + self.memory_bound_s + self.recompute_s
                + self.tp_comm_s + self.cp_comm_s + self.ep_comm_s + self.host_s
                + self.offload_s)


CP_GROUPS = {Group.CP: Group.CP, Group.CP_A2A: Group.CP, Group.CP_RING: Group.CP}
"""Context-parallel groups, all reported as CP time."""
TP_GROUPS = {Group.TP_ROW: Group.TP, Group.TP_COL: Group.TP}
"""2D TP grid groups, reported (and exposed) as TP time."""


def _overlaps_ep(strategy) -> bool:
    return bool(getattr(strategy, "overlaps_ep", getattr(strategy, "ep_overlap", False)))


@dataclass(frozen=True)
class LayerOpSeconds:
    """GPU seconds of one layer's ops for one micro-batch, summed before any overlap: what
    ``layer_time`` derives its exposure from. Strategies that differ only in overlap choices
    (``tp_comm_overlap``, ``ep_overlap``) share it (the bulk search times it once for them)."""

    kind_s: dict[type, float]
    """Seconds per op class (GemmOp, AttentionOp, MemoryOp)."""
    by_pass: dict[tuple[type, bool], float]
    """Seconds per (op class, forward?)."""
    wgrad_s: float
    selective_s: float
    """Forward seconds of the ops ``recompute_modules`` re-runs."""
    comm_s: dict[tuple[Group, bool], float]
    """Collective seconds per (TP/CP/EP group, forward?), before overlap."""
    tp_gather_forward_s: float
    """Forward TP all-gather seconds (sequence parallelism), before overlap: torchtitan's
    op-SAC re-runs them for its recomputed matmuls (``all_gather_into_tensor`` is not in its
    save list; the reduce-scatter is)."""
    cp_blocking_s: dict[bool, float]
    """Per pass: CP exchange seconds that cannot overlap attention (all-gather, all-to-all)."""
    cp_first_step_s: dict[bool, float]
    """Per pass: CP exchange seconds that overlap only the first ring step's attention
    (``CommOp.first_ring_step_only``)."""
    issued: dict[bool, tuple[tuple[str, float, float], ...]]
    """Per pass (forward?): (name, count, GPU seconds) of each op in issue order, collectives
    with 0 GPU seconds (``schedule.host_time``)."""
    forward_s: float
    """Forward compute seconds (sum of ``by_pass`` over the forward entries)."""
    backward_s: float
    """Backward compute seconds (sum of ``by_pass`` over the backward entries)."""
    issued_kernel_s: dict[bool, float]
    """Per pass: sum of the ``issued`` GPU seconds in issue order."""
    compute_s: tuple[float, ...] = ()
    """Seconds of each of the group's compute ops, in ``group.compute`` order (the bulk
    search's per-module recompute seconds, ``selective_forward_s``)."""
    experts: ExpertSeconds = ExpertSeconds(0.0, 0.0, 0.0)
    """Seconds of the routed experts' ops (``routed_expert_op``), the compute between
    dispatch and combine that paired EP overlap hides behind (``schedule.ep_overlap``)."""
    _segments: dict[tuple[bool, str, bool], list[Segment]] = field(
        default_factory=dict, compare=False, repr=False)
    """``op_segments`` per (forward?, CUDA-graph scope, sync before MoE), built on first use."""

    @property
    def moe(self) -> bool:
        """A MoE layer (its forward issues a router)."""
        return any(name == "router" for name, _, _ in self.issued[True])

    def kernel_s(self, forward: bool) -> float:
        """GPU seconds of the pass's kernels (collectives excluded), summed in issue order."""
        return self.issued_kernel_s[forward]

    def segments(self, forward: bool, cuda_graphs: str, sync_before_moe: bool) -> list[Segment]:
        """The pass's ops as host segments (``schedule.host_time.op_segments``), memoized:
        layers differing only in overlap choices share them."""
        key = (forward, cuda_graphs, sync_before_moe)
        if key not in self._segments:
            self._segments[key] = op_segments(self.issued[forward], cuda_graphs, sync_before_moe)
        return self._segments[key]


def layer_op_seconds(group: LayerGroup, system, strategy, backend,
                     op_time=compute_op_time_s, comm_time=comm_op_time_s) -> LayerOpSeconds:
    """Every op of ``group`` timed once (``op_time``: ``compute_op_time_s`` or a memo of it;
    collectives by ``comm_time``: ``comm_op_time_s`` or a memo of it) and summed by kind, pass
    and group."""
    kind_s: dict[type, float] = {GemmOp: 0.0, AttentionOp: 0.0, MemoryOp: 0.0}
    by_pass: dict[tuple[type, bool], float] = {
        (kind, forward): 0.0 for kind in (GemmOp, AttentionOp, MemoryOp) for forward in (True, False)}
    wgrad = 0.0
    expert = {phase: 0.0 for phase in Phase}
    issued: dict[bool, list] = {True: [], False: []}
    times = []
    for op in group.compute:
        t = op_time(op, system, strategy, backend)
        times.append(t)
        phase = op.phase
        forward = phase == Phase.FORWARD
        if routed_expert_op(op):
            expert[phase] = expert[phase] + t
        issued[forward].append((op.name, op.count, t))
        kind = type(op)
        kind_s[kind] += t
        by_pass[(kind, forward)] += t
        if phase == Phase.BACKWARD_WGRAD:
            wgrad = wgrad + t
    # Timed whatever the granularity (the bulk search times layers once per layer key);
    # ``assemble_stage_time`` charges it only under selective recompute.
    selective = selective_forward_s(group, getattr(strategy, "recompute_modules", ("core_attn",)),
                                    times)
    comm = {(g, forward): 0.0 for g in (Group.TP, Group.CP, Group.EP) for forward in (True, False)}
    cp_blocking = {True: 0.0, False: 0.0}
    cp_first_step = {True: 0.0, False: 0.0}
    gather = 0.0
    for comm_op in group.comm:
        forward = comm_op.phase == Phase.FORWARD
        seconds = comm_time(comm_op, system, strategy)
        if comm_op.group in CP_GROUPS and not comm_op.overlappable:
            cp_blocking[forward] += seconds
        elif comm_op.group in CP_GROUPS and comm_op.first_ring_step_only:
            cp_first_step[forward] += seconds
        else:
            group_key = CP_GROUPS.get(comm_op.group, TP_GROUPS.get(comm_op.group, comm_op.group))
            comm[(group_key, forward)] += seconds
        issued[comm_op.phase == Phase.FORWARD].append((comm_op.name, comm_op.count, 0.0))
        if forward and comm_op.name == "tp_all_gather":
            gather = gather + seconds
    return LayerOpSeconds(
        kind_s=kind_s, by_pass=by_pass, wgrad_s=wgrad, selective_s=selective, comm_s=comm,
        tp_gather_forward_s=gather, cp_blocking_s=cp_blocking, cp_first_step_s=cp_first_step,
        issued={k: tuple(v) for k, v in issued.items()},
        forward_s=sum(t for (_, forward), t in by_pass.items() if forward),
        backward_s=sum(t for (_, forward), t in by_pass.items() if not forward),
        issued_kernel_s={k: sum(t for _, _, t in v) for k, v in issued.items()},
        compute_s=tuple(times),
        experts=ExpertSeconds(expert[Phase.FORWARD], expert[Phase.BACKWARD_DGRAD],
                              expert[Phase.BACKWARD_WGRAD]))


def selective_forward_s(group: LayerGroup, modules, op_seconds) -> float:
    """Forward seconds of ``group``'s compute ops that selective recompute of ``modules``
    re-runs: sum of share x seconds over the forward ops (``forward_recompute_share``;
    ``op_seconds`` aligned with ``group.compute``). For Megatron-Core modules, whose operator
    sets are disjoint but for 'moe' (``graph.recompute_modules.MODULE_OPS``), it is additive
    over the modules of a set (``search.bulk`` times each module once)."""
    redo = recomputed_op_names(modules)
    selective = 0.0
    for op, t in zip(group.compute, op_seconds, strict=True):
        if op.phase == Phase.FORWARD:
            share = forward_recompute_share(op, modules, redo, group.op_sac_shares)
            if share:
                selective = selective + share * t
    return selective


def recompute_comm_s(modules, ep_forward_s, cp_forward_s):
    """Exposed forward collectives that selective recompute of ``modules`` re-runs:
    recomputing the whole MoE layer ('moe') re-runs its forward dispatch and combine, the
    attention core ('core_attn') under context parallelism its K/V exchange. Additive over
    the modules of a set."""
    return (ep_forward_s if "moe" in modules else 0.0) + (
        cp_forward_s if "core_attn" in modules else 0.0)


def _first_step_exposed_s(comm_s: float, attention_s: float, strategy, slowdown: float):
    """Exposed seconds of CP exchanges waited for at the ring's second step: their window is
    the first step's attention, 1/P of the pass's, P = cp / a2a ranks of the ring (equal
    steps under load-balanced causal chunks; ``graph.torch_context_parallel``)."""
    if comm_s == 0.0:
        return 0.0
    ring = strategy.cp // strategy.cp_a2a_size
    return exposed_comm_s(comm_s, attention_s / ring, slowdown)


def layer_time(group: LayerGroup, system, strategy, backend,
               overlap: CommOverlapCalibration | None = None,
               host: HostLaunchCalibration | None = None,
               op_time=compute_op_time_s, seconds: LayerOpSeconds | None = None) -> LayerTime:
    """Seconds of one layer of ``group`` for one micro-batch, by part (``overlap`` and ``host``
    replace the shipped overlap and host-launch calibrations, for fitting them; ``op_time``
    is ``compute_op_time_s`` or a memo of it, as the bulk search passes; ``seconds`` is the
    layer's ``layer_op_seconds`` when the caller has it already)."""
    if seconds is None:
        seconds = layer_op_seconds(group, system, strategy, backend, op_time)
    kind_s, by_pass, comm = seconds.kind_s, seconds.by_pass, seconds.comm_s
    cp_blocking = seconds.cp_blocking_s
    wgrad, selective = seconds.wgrad_s, seconds.selective_s
    modules = getattr(strategy, "recompute_modules", ("core_attn",))
    fwd, bwd = seconds.forward_s, seconds.backward_s
    slow = compute_slowdown(system, overlap)
    tp_fwd, tp_bwd = comm[(Group.TP, True)], comm[(Group.TP, False)]
    if strategy.tp_comm_overlap:
        hideable = tp_overlap_hideable_fraction(overlap)
        tp_fwd = float(exposed_comm_s(tp_fwd, by_pass[(GemmOp, True)], slow, hideable))
        tp_bwd = float(exposed_comm_s(tp_bwd, by_pass[(GemmOp, False)], slow, hideable))
    ep_fwd, ep_bwd = comm[(Group.EP, True)], comm[(Group.EP, False)]
    unpaired_fwd = unpaired_bwd = 0.0
    if _overlaps_ep(strategy) and ep_fwd + ep_bwd > 0:
        share = float(ep_overlap_exposed_s(ep_fwd, ep_bwd, fwd, bwd, seconds.experts, slow,
                                           defers_wgrad(strategy),
                                           strategy.schedule == "dualpipe")) / (ep_fwd + ep_bwd)
        unpaired_fwd, unpaired_bwd = ep_fwd * (1.0 - share), ep_bwd * (1.0 - share)
        ep_fwd, ep_bwd = ep_fwd * share, ep_bwd * share
    cp_slow = stream_overlap_slowdown(overlap)
    cp_exposed = {
        forward: exposed_comm_s(comm[(Group.CP, forward)], by_pass[(AttentionOp, forward)],
                                cp_slow) + cp_blocking[forward]
        + _first_step_exposed_s(seconds.cp_first_step_s[forward],
                                by_pass[(AttentionOp, forward)], strategy, cp_slow)
        for forward in (True, False)}
    cp_forward, cp_backward = cp_exposed[True], cp_exposed[False]
    host_fwd, host_bwd = _exposed_host_s(
        strategy, seconds, host or load_host_launch(),
        {True: {HostScope.OTHER: tp_fwd, HostScope.MOE: ep_fwd, HostScope.ATTENTION: cp_forward},
         False: {HostScope.OTHER: tp_bwd, HostScope.MOE: ep_bwd,
                 HostScope.ATTENTION: cp_backward}})
    return LayerTime(
        gemm_s=kind_s[GemmOp], attention_s=kind_s[AttentionOp], memory_bound_s=kind_s[MemoryOp],
        forward_compute_s=fwd, backward_compute_s=bwd,
        attention_forward_s=by_pass[(AttentionOp, True)],
        # Recomputing the whole MoE layer re-runs its forward dispatch and combine too; the
        # attention core under context parallelism re-runs its K/V exchange; op-SAC re-runs
        # the forward TP all-gathers (exposed as the pass's TP collectives).
        selective_recompute_s=selective + recompute_comm_s(modules, ep_fwd, float(cp_forward)) + (
            tp_fwd * seconds.tp_gather_forward_s / comm[(Group.TP, True)]
            if "op_sac" in modules and comm[(Group.TP, True)] > 0 else 0.0),
        tp_forward_s=tp_fwd, tp_backward_s=tp_bwd,
        cp_s=float(cp_forward + cp_backward),
        ep_forward_s=ep_fwd, ep_backward_s=ep_bwd,
        wgrad_s=wgrad, cp_forward_s=float(cp_forward),
        host_forward_s=host_fwd, host_backward_s=host_bwd,
        ep_unpaired_forward_s=unpaired_fwd, ep_unpaired_backward_s=unpaired_bwd,
    )


def _exposed_host_s(strategy: Strategy, seconds: LayerOpSeconds, host: HostLaunchCalibration,
                    comm_s: dict[bool, dict]) -> tuple[float, float]:
    """Exposed host seconds of the forward and the backward of one layer from its ops as
    (name, count, GPU seconds) per pass (``seconds.issued``) and its exposed collectives per
    scope (``comm_s``): pass time with host issue and syncs (``schedule.host_time``) minus the
    GPU stream (kernels + exposed comm).

    A MoE layer with dropless routing (no capacity factor) syncs once in its forward unless
    its MoE block is CUDA-graphed (static, padded shapes)."""
    graphed_moe = strategy.cuda_graphs in ("moe", "full")
    syncs = 1.0 if seconds.moe and strategy.moe_capacity_factor is None and not graphed_moe \
        else 0.0
    out = []
    for forward in (True, False):
        gpu = seconds.kernel_s(forward) + sum(comm_s[forward].values())
        split = forward and syncs > 0
        segments = with_extra_gpu_s(seconds.segments(forward, strategy.cuda_graphs, split),
                                    comm_s[forward], split)
        # >= 0 by construction (each segment takes at least its GPU stream); the two sums
        # add the same seconds in different orders, so clamp their rounding (~1e-16 s)
        out.append(max(float(pass_time_s(segments, syncs if forward else 0.0, host) - gpu), 0.0))
    return out[0], out[1]


@dataclass(frozen=True)
class ExtraTime:
    """Seconds of a stage's non-layer ops (embedding, LM head, loss) for one micro-batch."""

    gemm_s: float
    memory_bound_s: float
    backward_s: float
    forward_s: float = 0.0
    """Forward part (in ``gemm_s`` + ``memory_bound_s``)."""
    wgrad_s: float = 0.0
    """Weight-gradient part of ``backward_s`` (the embedding's scatter-add, the head's wgrad)."""


def extra_time(ops, system: SystemSpec, strategy: Strategy, backend: KernelBackend) -> ExtraTime:
    """Seconds of the embedding / head ops ``ops`` (never recomputed), by part."""
    gemm = memory_bound = backward = forward = wgrad = 0.0
    for op in ops:
        t = compute_op_time_s(op, system, strategy, backend)
        if isinstance(op, GemmOp):
            gemm += t
        else:
            memory_bound += t
        if op.phase == Phase.FORWARD:
            forward += t
        else:
            backward += t
        if op.phase == Phase.BACKWARD_WGRAD:
            wgrad += t
    return ExtraTime(gemm_s=gemm, memory_bound_s=memory_bound, backward_s=backward,
                     forward_s=forward, wgrad_s=wgrad)


def assemble_stage_time(layers, extra: ExtraTime, strategy: Strategy) -> StageTime:
    """A stage's per-micro-batch time from ``layers`` — (count, LayerTime) pairs in stage
    order — and its ``extra`` ops, with the strategy's recomputation.

    Array-friendly: LayerTime/ExtraTime fields and ``strategy.recompute_num_layers`` may be
    numpy arrays (the bulk search evaluates many strategies at once); counts are integers.
    """
    gemm = attention = memory_bound = recompute = tp = cp = ep = host = 0.0
    unpaired_fwd = unpaired_bwd = 0.0
    layer_fwd = layer_bwd = 0.0
    forward, wgrad = extra.forward_s, extra.wgrad_s
    num_layers = sum(n for n, _ in layers)
    to_recompute = strategy.recomputed_layers(num_layers)
    for n, lt in layers:
        gemm += n * lt.gemm_s
        attention += n * lt.attention_s
        memory_bound += n * lt.memory_bound_s
        tp += n * (lt.tp_forward_s + lt.tp_backward_s)
        cp += n * lt.cp_s
        ep += n * (lt.ep_forward_s + lt.ep_backward_s)
        unpaired_fwd = unpaired_fwd + n * lt.ep_unpaired_forward_s
        unpaired_bwd = unpaired_bwd + n * lt.ep_unpaired_backward_s
        layer_fwd += n * lt.forward_compute_s
        layer_bwd += n * lt.backward_compute_s
        forward += n * (lt.forward_compute_s + lt.tp_forward_s + lt.cp_forward_s + lt.ep_forward_s
                        + lt.host_forward_s)
        host = host + n * (lt.host_forward_s + lt.host_backward_s)
        wgrad += n * lt.wgrad_s
        if strategy.recompute == "selective":
            recompute += n * lt.selective_recompute_s
        redo = np.minimum(n, to_recompute)
        to_recompute -= redo
        recompute += redo * (lt.forward_compute_s + lt.tp_forward_s + lt.cp_forward_s
                             + lt.ep_forward_s)
        host = host + redo * lt.host_forward_s
    layers_or_one = max(num_layers, 1)
    return StageTime(
        gemm_s=gemm + extra.gemm_s, attention_s=attention,
        memory_bound_s=memory_bound + extra.memory_bound_s, recompute_s=recompute,
        tp_comm_s=tp, cp_comm_s=cp, ep_comm_s=ep,
        layer_forward_s=layer_fwd / layers_or_one, layer_backward_s=layer_bwd / layers_or_one,
        backward_compute_s=layer_bwd + extra.backward_s, forward_s=forward, wgrad_s=wgrad,
        host_s=host, ep_unpaired_forward_s=unpaired_fwd, ep_unpaired_backward_s=unpaired_bwd,
    )


def stage_time(graph: StageGraph, system: SystemSpec, strategy: Strategy,
               backend: KernelBackend, overlap: CommOverlapCalibration | None = None,
               host: HostLaunchCalibration | None = None,
               layer_memo: dict | None = None) -> StageTime:
    """Seconds of ``graph`` for one micro-batch on one GPU, by part.

    ``layer_memo`` (a dict the caller keeps for one system, strategy, backend and calibration,
    e.g. over the stages of one forecast) shares the ``layer_time`` of layer groups holding the
    same op tuples (``graph.stage`` builds one set per kind of layer) between stages: a layer's
    time does not depend on how many such layers the stage holds (``LayerGroup.count``), so
    the pipeline's stages time each kind of layer once. Keyed by identity (hashing the ops
    would cost as much as timing them); each entry keeps its tuples alive and is checked
    against them, so a reused ``id`` never matches another layer."""
    layers = []
    for group in graph.layers:
        parts = (group.moe, group.compute, group.comm, group.op_sac_shares)
        key = tuple(map(id, parts))
        hit = None if layer_memo is None else layer_memo.get(key)
        if hit is not None and all(a is b for a, b in zip(hit[0], parts, strict=True)):
            seconds = hit[1]
        else:
            seconds = layer_time(group, system, strategy, backend, overlap, host)
            if layer_memo is not None:
                layer_memo[key] = (parts, seconds)
        layers.append((group.count, seconds))
    return assemble_stage_time(layers, extra_time(graph.extra_compute, system, strategy, backend),
                               strategy)
