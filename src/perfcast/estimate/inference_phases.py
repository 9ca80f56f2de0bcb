"""Time of one serving step (prefill, decode or mixed) through every layer, with a breakdown.

A step of ``tokens`` tokens with attention ``passes`` (``estimate.inference_ops``) costs, per
pipeline stage, its layers' op times (``estimate.inference_kernels``), their TP all-reduces and
EP all-to-alls (alpha-beta, ``schedule.op_time.comm_op_time_s``: latency-bound at small
batch), the LM head on the last stage, and calibrated host overheads per step and per layer
(``calibration/inference_overheads.yaml``). A decode step replayed as a CUDA/HIP graph pays no
host overhead but, where the context sets it (engine-simulated steps, ``estimate.serving``),
the device time at every dependent-kernel boundary (``graph_gap_s``,
``calibration/graph_replay.yaml``). One batch crosses the stages in turn, so a step
takes the sum of its stages plus (pp − 1) activation sends (Narayanan et al. 2021 §2.2).

Offloaded bytes (FlexGen, Sheng et al. 2023 §4) cross PCIe (and NVMe) every step; the copy
overlaps with compute, so the step takes max(GPU time, I/O time) and the report charges the
excess to ``offload_s``.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import cast

import numpy as np

from perfcast.arrays import Floats
from perfcast.calibration.fp8_block_kernels import Fp8GemmSlowdown
from perfcast.calibration.inference_overheads import InferenceOverhead
from perfcast.calibration.kernel_roofline import GenerationKernelCalibration
from perfcast.catalog.host_io import HostIO
from perfcast.comm.one_shot import one_shot_all_reduce_time_s
from perfcast.comm.select import group_collective_time_s
from perfcast.estimate import inference_kernels as K
from perfcast.estimate.inference_ops import AttentionPass, head_step_ops, step_layer_ops
from perfcast.graph.layer import ACT_BYTES
from perfcast.graph.ops import Collective, CommOp, GemmOp, Group, Phase
from perfcast.graph.param_sharding import is_moe_layer, stage_layer_ranges
from perfcast.kernels.backend import KernelBackend
from perfcast.schedule.op_time import comm_op_time_s
from perfcast.specs.hardware import SystemSpec
from perfcast.specs.inference import InferencePrecision, Offload
from perfcast.specs.model import ModelSpec
from perfcast.specs.strategy import Strategy


@dataclass(frozen=True)
class ServingContext:
    """Everything fixed across the steps of one forecast."""

    model: ModelSpec
    system: SystemSpec
    strategy: Strategy
    precision: InferencePrecision
    backend: KernelBackend
    params: GenerationKernelCalibration
    overhead: InferenceOverhead
    dequant_efficiency: float
    gqa_kv_read_exponent: float
    attention_dp: bool
    offload: Offload
    host_io: HostIO
    weights_bytes_per_gpu: float
    """Weights one GPU uses per step (heaviest stage), for offload traffic."""
    cuda_graphs: bool = False
    """Decode steps replayed as CUDA graphs: no per-layer or per-step host overhead."""
    tp_all_reduce: str = "custom"
    """``custom``: the engine's one-shot all-reduce when faster than NCCL; ``nccl``: NCCL's
    all-reduce only (engine profile, ``catalog.inference_engines``)."""
    mla_decode_head_block: int | None = None
    """Query heads per read of the MLA latent in decode (``EngineConfig``; None = one read)."""
    mla_decode_weights: str = "split"
    """MLA decode projections: ``split`` (W_UK, W_UV per query) or ``absorbed`` into the query
    and output projections (``EngineConfig.mla_decode_weights``,
    ``inference_ops.absorbed_mla_decode_ops``); prefill steps always run the split form."""
    attention_dp_gather: str = "in_tp_all_reduce"
    """How attention-DP ranks gather their tokens for the MLP (``EngineConfig``):
    ``nccl_all_gather`` adds a TP all-gather a layer; ``in_tp_all_reduce`` charges none."""
    graph_kernel_gap_s: float = 0.0
    """Device seconds per dependent-kernel boundary of a replayed graph (graphed decode steps;
    ``calibration/graph_replay.yaml`` by GPU vendor)."""
    eager_host_s_per_op: float = 0.0
    """Host seconds to issue one op of an eager (not graphed) step: an engine whose forward runs
    as PyTorch modules from Python (``EngineConfig.eager_launch`` ``python``) takes
    ``calibration/host_launch.yaml`` ``host_s_per_op``; 0 = no host floor (``eager_host_floor_s``)."""
    fp8_gemm_slowdown: Fp8GemmSlowdown = Fp8GemmSlowdown()
    """Multipliers on the seconds of FP8-weight GEMMs for the engine's block-FP8 kernel class
    (``EngineConfig.fp8_block_kernels``, ``calibration.fp8_block_kernels``); 1 = tuned kernels."""


@dataclass(frozen=True)
class StepTime:
    """Seconds of one step by category (sums to ``total_s``); fields may be numpy arrays."""

    gemm_s: Floats
    attention_s: Floats
    memory_bound_s: Floats
    tp_comm_s: Floats
    ep_comm_s: Floats
    pp_comm_s: Floats
    offload_s: Floats
    overhead_s: Floats

    @property
    def total_s(self) -> Floats:
        return sum((getattr(self, f.name) for f in fields(self)), 0.0)

    def mean(self) -> StepTime:
        """Every field averaged over its steps (a float each)."""
        return StepTime(**{f.name: float(np.mean(getattr(self, f.name))) for f in fields(self)})

    def scaled(self, factor: float) -> StepTime:
        return StepTime(**{f.name: getattr(self, f.name) * factor for f in fields(self)})

    def plus(self, other: StepTime) -> StepTime:
        return StepTime(**{f.name: getattr(self, f.name) + getattr(other, f.name)
                           for f in fields(self)})

    def to_dict(self) -> dict[str, float]:
        """Named parts without the ``_s`` suffix."""
        return {f.name.removesuffix("_s"): float(np.mean(getattr(self, f.name)))
                for f in fields(self)}


def _layer_parts(ctx: ServingContext, tokens: Floats, passes: tuple[AttentionPass, ...],
                 moe: bool, prefill: bool = False) -> dict[str, Floats]:
    """Seconds of one layer by category."""
    absorbed = ctx.mla_decode_weights == "absorbed" and not prefill
    ops = step_layer_ops(ctx.model, ctx.strategy, tokens, passes, moe, ctx.attention_dp,
                         mla_absorbed=absorbed,
                         dp_all_gather=ctx.attention_dp_gather == "nccl_all_gather")
    gpu, params, bw = ctx.system.gpu, ctx.params, ctx.overhead.bandwidth_efficiency
    gemm = sum(K.table_gemm_time_s(op, gpu, ctx.backend, ctx.precision, K.gemm_time_s(
        op, gpu, params, ctx.precision, bw, ctx.dequant_efficiency))
        * _kernel_class_factor(op, ctx.fp8_gemm_slowdown)
        for op in ops.compute if isinstance(op, GemmOp))
    memory = sum(K.memory_op_time_s(op, gpu, params, bw)
                 for op in ops.compute if not isinstance(op, GemmOp))
    attention = 0.0
    for p in ops.attention:
        if p.decode:
            attention = attention + K.decode_attention_time_s(
                ctx.model, ctx.strategy, p, gpu, params, ctx.precision.kv_cache, bw,
                ctx.attention_dp, ctx.gqa_kv_read_exponent, ctx.mla_decode_head_block)
        else:
            attention = attention + K.prefill_attention_time_s(
                ctx.model, ctx.strategy, p, gpu, ctx.backend, ctx.precision, ctx.attention_dp)
    tp = sum(tp_comm_time_s(op, ctx) for op in ops.comm if op.group == Group.TP)
    ep = sum(comm_op_time_s(op, ctx.system, ctx.strategy) for op in ops.comm if op.group == Group.EP)
    return {"gemm_s": gemm, "attention_s": attention, "memory_bound_s": memory,
            "tp_comm_s": tp, "ep_comm_s": ep}


def _kernel_class_factor(op: GemmOp, slowdown: Fp8GemmSlowdown) -> float:
    """Time multiplier of ``op`` under the engine's block-FP8 kernel class: the routed experts'
    grouped GEMMs (``expert_*``, the fused-MoE kernel) and every other FP8-weight linear
    (``fp8_eligible``: not the router or LM head) take their class's factor
    (``calibration/fp8_block_kernels.yaml``: AMD's AITER blog, March 2025)."""
    if not op.fp8_eligible:
        return 1.0
    return slowdown.routed_experts if op.name.startswith("expert_") else slowdown.dense


def layer_kernel_count(ctx: ServingContext, tokens: Floats, passes: tuple[AttentionPass, ...],
                       moe: bool) -> float:
    """Kernels one layer of a decode step launches: one per compute op (GEMM, memory-bound op)
    and collective repetition, and one per attention pass (``inference_ops.step_layer_ops``)."""
    ops = step_layer_ops(ctx.model, ctx.strategy, tokens, passes, moe, ctx.attention_dp,
                         mla_absorbed=ctx.mla_decode_weights == "absorbed",
                         dp_all_gather=ctx.attention_dp_gather == "nccl_all_gather")
    return float(sum(op.count for op in ops.compute) + sum(op.count for op in ops.comm)
                 + len(ops.attention))


def graph_gap_s(ctx: ServingContext, tokens: Floats, passes: tuple[AttentionPass, ...],
                layers: range) -> float:
    """Device time at the kernel boundaries of ``layers`` in a replayed graph: kernels × the
    vendor's gap per dependent kernel (``calibration.graph_replay``, mechanism there)."""
    if ctx.graph_kernel_gap_s <= 0:
        return 0.0
    model = ctx.model
    counts = {moe: layer_kernel_count(ctx, tokens, passes, moe)
              for moe in {is_moe_layer(model, layer) for layer in layers}}
    kernels = sum(counts[is_moe_layer(model, layer)] for layer in layers)
    return kernels * ctx.graph_kernel_gap_s


def eager_host_floor_s(ctx: ServingContext, tokens: Floats,
                       passes: tuple[AttentionPass, ...]) -> float:
    """Host seconds to issue one eager step: ops × ``eager_host_s_per_op``.

    An eager step is issued op by op by the host thread (PyTorch eager: the Python module call,
    the dispatcher and cudaLaunchKernel, ~10 µs an op, ``calibration/host_launch.yaml``
    ``host_s_per_op`` and its sources); the GPU cannot finish the step before the host has
    issued its last kernel, so the step takes at least this long (``host_bound_s``: the max).
    Ops are those of the op graph: every layer's compute ops, collectives and attention passes
    (``layer_kernel_count``) plus the final norm and LM head; with ``passes`` empty the
    attention kernels are left out (priced apart, ``serving_step_cost``)."""
    if ctx.eager_host_s_per_op <= 0:
        return 0.0
    model = ctx.model
    layers = range(model.num_hidden_layers)
    counts = {moe: layer_kernel_count(ctx, tokens, passes, moe)
              for moe in {is_moe_layer(model, layer) for layer in layers}}
    ops = sum(counts[is_moe_layer(model, layer)] for layer in layers)
    ops += len(head_step_ops(model, ctx.strategy, 1.0))
    return ops * ctx.eager_host_s_per_op


def tp_comm_time_s(op: CommOp, ctx: ServingContext) -> float:
    """A TP collective of a serving step: the faster of the ring model and, for all-reduce
    inside the NVLink domain, the one-shot all-reduce serving engines use
    (``comm.one_shot``). An engine on plain NCCL (``tp_all_reduce == "nccl"``) gets NCCL's
    own algorithm/protocol choice and latency model, launch included (``comm.select``,
    shared/reference/collectives.md §3 and §5a: 43.8 µs for a 32 KiB all-reduce on 8×A100)."""
    if ctx.tp_all_reduce == "nccl" and op.collective == Collective.ALL_REDUCE \
            and ctx.strategy.tp > 1:
        # scalar for a scalar size (arrays only on the array paths, as for the other ops)
        return cast(float, op.count * group_collective_time_s(
            Collective.ALL_REDUCE, op.size_bytes, ctx.system, ctx.strategy.tp))
    ring = comm_op_time_s(op, ctx.system, ctx.strategy)
    if op.collective != Collective.ALL_REDUCE or ctx.strategy.tp <= 1:
        return ring
    one_shot = op.count * one_shot_all_reduce_time_s(op.size_bytes, ctx.system, ctx.strategy.tp)
    return np.minimum(ring, one_shot)


def _kv_bytes_read(ctx: ServingContext, passes: tuple[AttentionPass, ...], layers: int):
    """KV-cache bytes one GPU reads in a step over ``layers`` layers."""
    per_token = K.kv_bytes_per_token_per_layer(ctx.model, ctx.strategy, ctx.precision.kv_cache,
                                               ctx.attention_dp)
    return layers * per_token * sum(p.num_seqs * np.asarray(p.seq_kv, dtype=float) for p in passes)


def _offload_io_s(ctx: ServingContext, tokens: Floats, passes: tuple[AttentionPass, ...],
                  layers: int) -> Floats:
    """PCIe/NVMe seconds of one step: offloaded weights, KV read, activations out and back."""
    o, io = ctx.offload, ctx.host_io
    kv = _kv_bytes_read(ctx, passes, layers)
    act = 2 * ACT_BYTES * tokens * ctx.model.hidden_size * layers
    host = (ctx.weights_bytes_per_gpu * (o.weights_cpu + o.weights_disk)
            + kv * (o.kv_cpu + o.kv_disk) + act * (o.activations_cpu + o.activations_disk))
    disk = (ctx.weights_bytes_per_gpu * o.weights_disk + kv * o.kv_disk
            + act * o.activations_disk)
    return np.maximum(host / io.pcie_bandwidth_Bps, disk / io.nvme_bandwidth_Bps)


def stage_step_times(ctx: ServingContext, tokens: Floats, passes: tuple[AttentionPass, ...],
                     logits_tokens: Floats, prefill: bool) -> list[StepTime]:
    """Time of the step on each pipeline stage (no send/recv)."""
    model, strategy = ctx.model, ctx.strategy
    cache: dict[bool, dict[str, Floats]] = {}
    stages = []
    for index, layers in enumerate(stage_layer_ranges(model.num_hidden_layers, strategy.pp)):
        parts: dict[str, Floats] = {"gemm_s": 0.0, "attention_s": 0.0, "memory_bound_s": 0.0,
                                    "tp_comm_s": 0.0, "ep_comm_s": 0.0}
        for layer in layers:
            moe = is_moe_layer(model, layer)
            if moe not in cache:
                cache[moe] = _layer_parts(ctx, tokens, passes, moe, prefill)
            parts = {k: parts[k] + cache[moe][k] for k in parts}
        if index == strategy.pp - 1:
            for op in head_step_ops(model, strategy, logits_tokens):
                key = "gemm_s" if isinstance(op, GemmOp) else "memory_bound_s"
                parts[key] = parts[key] + (
                    K.table_gemm_time_s(op, ctx.system.gpu, ctx.backend, ctx.precision,
                                        K.gemm_time_s(op, ctx.system.gpu, ctx.params,
                                                      ctx.precision,
                                                      ctx.overhead.bandwidth_efficiency))
                    if isinstance(op, GemmOp) else
                    K.memory_op_time_s(op, ctx.system.gpu, ctx.params,
                                       ctx.overhead.bandwidth_efficiency))
        kernels = parts["gemm_s"] + parts["attention_s"] + parts["memory_bound_s"]
        graphed = ctx.cuda_graphs and not prefill
        overhead: Floats = (graph_gap_s(ctx, tokens, passes, layers) if graphed
                            else len(layers) * ctx.overhead.layer_overhead_s)
        if prefill:
            overhead = overhead + len(layers) * ctx.overhead.prefill_layer_overhead_s
            overhead = overhead + ctx.overhead.prefill_overhead_fraction * kernels
        gpu_time = kernels + parts["tp_comm_s"] + parts["ep_comm_s"] + overhead
        offload: Floats = 0.0
        if ctx.offload.any:
            offload = np.maximum(_offload_io_s(ctx, tokens, passes, len(layers)) - gpu_time, 0.0)
        stages.append(StepTime(**parts, pp_comm_s=0.0, offload_s=offload, overhead_s=overhead))
    return stages


def _step_overhead_s(ctx: ServingContext, prefill: bool) -> float:
    """Host time per step (sampling, scheduling, launches); none for a graphed decode step."""
    return 0.0 if (ctx.cuda_graphs and not prefill) else ctx.overhead.step_overhead_s


def pp_send_s(ctx: ServingContext, tokens: Floats) -> Floats:
    """One activation send between stages: tokens·h·2 bytes on the PP link."""
    op = CommOp("pp_send_recv", Phase.FORWARD, Group.PP, Collective.SEND_RECV,
                ACT_BYTES * tokens * ctx.model.hidden_size)
    seconds = comm_op_time_s(op, ctx.system, ctx.strategy)
    return seconds if np.ndim(seconds) else float(seconds)


def step_time(ctx: ServingContext, tokens: Floats, passes: tuple[AttentionPass, ...],
              logits_tokens: Floats, prefill: bool = False) -> StepTime:
    """One step of one batch through all stages: sum of stages + (pp − 1) sends + step overhead.
    Array-friendly in ``tokens`` and ``logits_tokens`` (``estimate.serving_step_cost`` tabulates
    it on grids)."""
    stages = stage_step_times(ctx, tokens, passes, logits_tokens, prefill)
    total = stages[0]
    for stage in stages[1:]:
        total = total.plus(stage)
    pp = ctx.strategy.pp
    send = (pp - 1) * pp_send_s(ctx, tokens) if pp > 1 else 0.0
    return StepTime(
        gemm_s=total.gemm_s, attention_s=total.attention_s, memory_bound_s=total.memory_bound_s,
        tp_comm_s=total.tp_comm_s, ep_comm_s=total.ep_comm_s, pp_comm_s=send,
        offload_s=total.offload_s, overhead_s=total.overhead_s + _step_overhead_s(ctx, prefill))


def host_bound_s(ctx: ServingContext, step_s: Floats, tokens: Floats,
                 passes: tuple[AttentionPass, ...], graphed: bool) -> Floats:
    """A step of ``step_s`` GPU seconds lengthened to the host's issue time where that is
    longer (``eager_host_floor_s``); a replayed graph is one launch, no floor."""
    if graphed or ctx.eager_host_s_per_op <= 0:
        return step_s
    return np.maximum(step_s, eager_host_floor_s(ctx, tokens, passes))


def bottleneck_stage_time(ctx: ServingContext, tokens: float, passes: tuple[AttentionPass, ...],
                          logits_tokens: float, prefill: bool = False) -> StepTime:
    """The slowest stage's step (plus one send and the step overhead): with pp micro-batches
    in flight, each stage works on a different one and the slowest sets the pace."""
    stages = stage_step_times(ctx, tokens, passes, logits_tokens, prefill)
    slowest = max(stages, key=lambda s: float(np.mean(s.total_s)))
    send = pp_send_s(ctx, tokens) if ctx.strategy.pp > 1 else 0.0
    return StepTime(
        gemm_s=slowest.gemm_s, attention_s=slowest.attention_s,
        memory_bound_s=slowest.memory_bound_s, tp_comm_s=slowest.tp_comm_s,
        ep_comm_s=slowest.ep_comm_s, pp_comm_s=send, offload_s=slowest.offload_s,
        overhead_s=slowest.overhead_s + _step_overhead_s(ctx, prefill))
