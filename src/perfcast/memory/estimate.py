"""``estimate_memory``: peak memory per GPU for each pipeline stage of a training run."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from perfcast.arrays import Floats
from perfcast.calibration.memory_overheads import MemoryOverheads, load_memory_overheads
from perfcast.graph.context_parallel import cp_comm_buffer_bytes
from perfcast.graph.param_sharding import StageParams, stage_params
from perfcast.graph.params import allocated_vocab_size, count_params
from perfcast.graph.tensor_parallel_2d import tp2d_buffer_bytes
from perfcast.memory import activations as A
from perfcast.memory.cuda_graphs import cuda_graph_static_bytes
from perfcast.memory.inflight import inflight_layer_units
from perfcast.memory.report import MemoryReport, StageMemory
from perfcast.memory.states import StateBytes, state_bytes
from perfcast.schedule.activation_offload import offloaded_layers
from perfcast.specs.compat import (
    check_strategy_for_model,
    check_workload_for_strategy,
    num_micro_batches,
)
from perfcast.specs.hardware import SystemSpec
from perfcast.specs.model import ModelSpec
from perfcast.specs.strategy import Strategy
from perfcast.specs.workload import Workload


def activation_options(model: ModelSpec, strategy: Strategy) -> A.ActivationOptions:
    """The activation-relevant execution choices of ``strategy``."""
    return A.ActivationOptions(
        tp=strategy.tp,
        sequence_parallel=strategy.sequence_parallel,
        recompute=strategy.recompute,
        recompute_modules=tuple(getattr(strategy, "recompute_modules", ("core_attn",))),
        fp8_linear_inputs=strategy.precision == "fp8",
        fp8_moe_act_inputs=strategy.fp8_moe_act_inputs,
        offload_modules=tuple(getattr(strategy, "offload_modules", ())),
        flash_attention=strategy.flash_attention,
        expert_tp=strategy.expert_tp,
        vocab_size_padded=allocated_vocab_size(model, strategy),
    )


def _stage_layer_activations(model, strategy, num_layers, num_moe, s, b):
    """Stored activations of one micro-batch over a stage's layers (bytes), and the
    full-recompute working set.

    Full recompute stores only the inputs of ``strategy.recomputed_layers`` layers (Megatron's
    "block" method); the stage's other layers keep all their activations. Selective and none
    apply to every layer.
    """
    opts = activation_options(model, strategy)
    kept = replace(opts, recompute="none")
    reduced = (strategy.recomputed_layers(num_layers) if strategy.recompute == "full"
               else num_layers)
    moe_reduced = reduced * num_moe // max(num_layers, 1)
    dense_reduced = reduced - moe_reduced
    per_mb = (
        dense_reduced * A.layer_activation_bytes(model, s, b, opts, False)
        + (num_layers - num_moe - dense_reduced) * A.layer_activation_bytes(model, s, b, kept, False)
        + moe_reduced * A.layer_activation_bytes(model, s, b, opts, True)
        + (num_moe - moe_reduced) * A.layer_activation_bytes(model, s, b, kept, True)
    )
    working = A.recompute_working_bytes(model, s, b, opts, num_moe > 0)
    return per_mb, working


def offloaded_activation_bytes(model: ModelSpec, strategy, num_layers: int,
                               num_moe: int, seq_length: int) -> Floats:
    """Stored activation bytes of one micro-batch that CPU offloading keeps in host memory
    (``schedule.activation_offload``): the stage's average layer times the offloaded layers.
    Array-friendly: ``strategy`` is a ``Strategy`` or the bulk search's block of them."""
    s, b = seq_length / strategy.cp, strategy.micro_batch_size
    opts = activation_options(model, strategy)
    modules = ((num_layers - num_moe) * A.offloaded_module_bytes(model, s, b, opts, False)
               + num_moe * A.offloaded_module_bytes(model, s, b, opts, True))
    n = offloaded_layers(strategy, num_layers)
    if not np.any(n):
        return modules
    per_mb, _ = _stage_layer_activations(model, strategy, num_layers, num_moe, s, b)
    return modules + per_mb * n / num_layers


def _offload_staging_bytes(model: ModelSpec, strategy: Strategy, s, b):
    """One layer's fine-grained offloaded tensors stay on the GPU while being copied."""
    opts = activation_options(model, strategy)
    return max(A.offloaded_module_bytes(model, s, b, opts, moe) for moe in (False, model.is_moe))


def num_process_groups(strategy: Strategy):
    """Process groups with more than one rank among tp, cp, dp, pp, ep (each holds NCCL
    buffers). Array-friendly."""
    return sum(size > 1 for size in (strategy.tp, strategy.cp, strategy.dp, strategy.pp,
                                      strategy.ep))


@dataclass(frozen=True)
class LayerCommBuffers:
    """Receive buffers that live during one layer's attention/GEMMs, the same on every stage:
    the CP exchange (``graph.context_parallel``) and 2D-TP (``graph.tensor_parallel_2d``)."""

    cp_bytes: Floats
    tp2d_bytes: Floats

    @classmethod
    def of(cls, model: ModelSpec, strategy: Strategy, s: Floats, b: Floats) -> LayerCommBuffers:
        """Buffers at ``s`` tokens per CP rank and micro-batch size ``b``."""
        cp_bytes = cp_comm_buffer_bytes(model, s * b, strategy.tp, strategy.cp,
                                        strategy.cp_a2a_size, strategy.cp_kv_all_gather)
        torch_ring = getattr(strategy, "cp_torch_ring", False)
        if np.any(torch_ring):  # PyTorch's ring (graph.torch_context_parallel, on first use)
            from perfcast.graph.torch_context_parallel import torch_ring_buffer_bytes

            cp_bytes = np.where(torch_ring, torch_ring_buffer_bytes(
                model, s * b, strategy.tp, strategy.cp), cp_bytes)[()]
        return cls(
            cp_bytes=cp_bytes,
            tp2d_bytes=tp2d_buffer_bytes(model, s * b, strategy.tp,
                                         getattr(strategy, "tp2d_rows", 1)),
        )


def stage_memory(model: ModelSpec, strategy: Strategy, params: StageParams, seq_length: int,
                 num_micro_batches, overheads: MemoryOverheads,
                 layer_activations: tuple | None = None,
                 opts: A.ActivationOptions | None = None,
                 buffers: LayerCommBuffers | None = None,
                 states: StateBytes | None = None) -> StageMemory:
    """Peak bytes per GPU of pipeline stage ``params.stage``: states, stored activations of
    the in-flight micro-batches, embedding/loss buffers and calibrated allowances.

    Array-friendly: ``params`` fields, ``num_micro_batches`` and the strategy's sizes may be
    numpy arrays (the bulk search); the result's fields are then arrays. ``layer_activations``
    passes a stage-mix's (per micro-batch, working set) bytes already computed for another stage,
    ``opts`` the strategy's ``activation_options`` already built for another stage,
    ``buffers`` the per-layer communication buffers already computed for another stage,
    ``states`` the ``state_bytes`` of another stage holding the same parameters.
    """
    stage, cal = params.stage, overheads
    s = seq_length / strategy.cp
    b = strategy.micro_batch_size
    opts = activation_options(model, strategy) if opts is None else opts
    states = state_bytes(params, strategy) if states is None else states
    per_mb, working = layer_activations or _stage_layer_activations(
        model, strategy, params.num_layers, params.num_moe_layers, s, b
    )
    units = inflight_layer_units(strategy.schedule, stage, strategy.pp, strategy.vpp,
                                 num_micro_batches)
    # Whole offloaded layers (cpu_offloading); fine-grained offloaded tensors are already out
    # of ``per_mb`` and stage one layer's worth on the GPU.
    whole = (per_mb * offloaded_layers(strategy, params.num_layers) / params.num_layers
             if params.num_layers else 0.0)
    layer_acts = (per_mb - whole) * units
    if getattr(strategy, "offload_modules", ()):
        layer_acts = layer_acts + _offload_staging_bytes(model, strategy, s, b)
    # The CP exchange's receive buffers live during one layer's attention (graph.context_parallel).
    buffers = LayerCommBuffers.of(model, strategy, s, b) if buffers is None else buffers
    acts = layer_acts + working + buffers.cp_bytes + buffers.tp2d_bytes
    if stage == 0:
        acts += units * A.embedding_activation_bytes(model, s, b, opts)
    if stage == strategy.pp - 1:
        # Logits of the main head and of each MTP module's pass through the shared head.
        acts += (1 + params.num_mtp_layers) * A.output_activation_bytes(model, s, b, opts)
    graphs = cuda_graph_static_bytes(model, strategy, params.num_layers,
                                     params.num_moe_layers, s, units)
    other = (
        cal.cuda_context_bytes
        + num_process_groups(strategy) * cal.nccl_bytes_per_group
        + cal.allocator_fragmentation_fraction * (acts + states.grads)
        + graphs
    )
    return StageMemory(
        stage=stage,
        num_layers=params.num_layers,
        params=params.total,
        embedding_params=params.embedding,
        weights_bytes=states.weights,
        grads_bytes=states.grads,
        optimizer_bytes=states.optimizer,
        activations_bytes=acts,
        layer_activations_bytes=layer_acts,
        inflight_micro_batches=units,
        other_bytes=other,
        cuda_graph_bytes=graphs,
    )


def dualpipe_device_memory(own: StageMemory, mirror: StageMemory, device: int) -> StageMemory:
    """One DualPipe device: it holds stage i and stage p − 1 − i (DeepSeek-V3 report §3.2.1,
    Table 2: parameters 2×, activations p + 1 stage-micro-batches). States of both stages add;
    the p + 1 in-flight micro-batches split over the two stages, so the layer activations are
    the mean of the two stages' (each counted at p + 1), and so are the CUDA graphs' static
    buffers (one per in-flight micro-batch); embedding/loss buffers and the recompute
    working set add; CUDA context and NCCL buffers exist once (the larger allowance)."""
    if own.stage == mirror.stage:
        return own
    extras = (own.activations_bytes - own.layer_activations_bytes
              + mirror.activations_bytes - mirror.layer_activations_bytes)
    layer_acts = (own.layer_activations_bytes + mirror.layer_activations_bytes) / 2
    graphs = float(own.cuda_graph_bytes + mirror.cuda_graph_bytes) / 2  # as layer activations
    return StageMemory(
        stage=device,
        num_layers=own.num_layers + mirror.num_layers,
        params=own.params + mirror.params,
        embedding_params=own.embedding_params + mirror.embedding_params,
        weights_bytes=own.weights_bytes + mirror.weights_bytes,
        grads_bytes=own.grads_bytes + mirror.grads_bytes,
        optimizer_bytes=own.optimizer_bytes + mirror.optimizer_bytes,
        activations_bytes=layer_acts + extras,
        layer_activations_bytes=layer_acts,
        inflight_micro_batches=own.inflight_micro_batches,
        other_bytes=max(own.other_bytes - float(own.cuda_graph_bytes),
                        mirror.other_bytes - float(mirror.cuda_graph_bytes)) + graphs,
        cuda_graph_bytes=graphs,
    )


def estimate_memory(
    model: ModelSpec,
    system: SystemSpec,
    strategy: Strategy,
    workload: Workload,
    overheads: MemoryOverheads | None = None,
) -> MemoryReport:
    """Peak bytes per GPU of every pipeline stage (weights, gradients, optimizer, activations,
    other), and whether the worst stage fits in HBM. Pure: no side effects."""
    check_strategy_for_model(model, strategy)
    check_workload_for_strategy(workload, strategy)
    cal = overheads or load_memory_overheads()
    counts = count_params(model)
    m = num_micro_batches(workload, strategy)
    per_mix: dict[tuple[int, int], tuple] = {}  # stages with one layer mix share activations
    per_params: dict[tuple, StateBytes] = {}  # and stages with equal parameters (but the
    # stage index, which ``state_bytes`` does not read), their states
    opts = activation_options(model, strategy)
    buffers = LayerCommBuffers.of(model, strategy, workload.seq_length / strategy.cp,
                                  strategy.micro_batch_size)

    def one_stage(stage: int) -> StageMemory:
        params = stage_params(model, strategy, stage)
        mix = (params.num_layers, params.num_moe_layers)
        if mix not in per_mix:
            per_mix[mix] = _stage_layer_activations(
                model, strategy, *mix, workload.seq_length / strategy.cp,
                strategy.micro_batch_size)
        same = tuple(v for k, v in vars(params).items() if k != "stage")
        if same not in per_params:
            per_params[same] = state_bytes(params, strategy)
        return stage_memory(model, strategy, params, workload.seq_length, m, cal, per_mix[mix],
                            opts, buffers, per_params[same])

    stages = tuple(one_stage(stage) for stage in range(strategy.pp))
    if strategy.schedule == "dualpipe":
        stages = tuple(dualpipe_device_memory(stages[i], stages[strategy.pp - 1 - i], i)
                       for i in range(strategy.pp))
    assumptions: tuple[str, ...] = (
        "Adam optimizer with fp32 master weights, momentum and variance (12 B/param)",
        f"main gradients in {strategy.grad_reduce_dtype}",
        "16-bit activations; Korthikanti et al. 2022 Table 2 generalized to the model's shapes",
        f"pipeline schedule {strategy.schedule}, {m} micro-batches per step",
        "other = CUDA context + NCCL buffers per group + allocator fragmentation "
        "(calibration/memory_overheads.yaml)",
    )
    if strategy.cuda_graphs != "none":
        assumptions += (f"CUDA graphs '{strategy.cuda_graphs}': 4 static hidden-state buffers "
                        "per captured region and in-flight micro-batch, in other (assumed; "
                        "memory/cuda_graphs.py)",)
    return MemoryReport(
        model=model.name,
        system=system.name,
        gpu=system.gpu.name,
        params_total=counts.total,
        params_active=counts.active,
        capacity_bytes=system.gpu.usable_hbm_bytes,
        num_micro_batches=m,
        stages=stages,
        assumptions=assumptions,
    )
