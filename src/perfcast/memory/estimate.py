"""``estimate_memory``: peak memory per GPU for each pipeline stage of a training run."""

from __future__ import annotations

from dataclasses import replace

from perfcast.calibration.memory_overheads import MemoryOverheads, load_memory_overheads
from perfcast.graph.param_sharding import StageParams, stage_params
from perfcast.graph.params import allocated_vocab_size, count_params
from perfcast.memory import activations as A
from perfcast.memory.inflight import inflight_layer_units
from perfcast.memory.report import MemoryReport, StageMemory
from perfcast.memory.states import state_bytes
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


def num_process_groups(strategy: Strategy):
    """Process groups with more than one rank among tp, cp, dp, pp, ep (each holds NCCL
    buffers). Array-friendly."""
    return sum(size > 1 for size in (strategy.tp, strategy.cp, strategy.dp, strategy.pp,
                                      strategy.ep))


def stage_memory(model: ModelSpec, strategy: Strategy, params: StageParams, seq_length: int,
                 num_micro_batches, overheads: MemoryOverheads,
                 layer_activations: tuple | None = None) -> StageMemory:
    """Peak bytes per GPU of pipeline stage ``params.stage``: states, stored activations of
    the in-flight micro-batches, embedding/loss buffers and calibrated allowances.

    Array-friendly: ``params`` fields, ``num_micro_batches`` and the strategy's sizes may be
    numpy arrays (the bulk search); the result's fields are then arrays. ``layer_activations``
    passes a stage-mix's (per micro-batch, working set) bytes already computed for another stage.
    """
    stage, cal = params.stage, overheads
    s = seq_length / strategy.cp
    b = strategy.micro_batch_size
    opts = activation_options(model, strategy)
    states = state_bytes(params, strategy)
    per_mb, working = layer_activations or _stage_layer_activations(
        model, strategy, params.num_layers, params.num_moe_layers, s, b
    )
    units = inflight_layer_units(strategy.schedule, stage, strategy.pp, strategy.vpp,
                                 num_micro_batches)
    layer_acts = per_mb * units
    acts = layer_acts + working
    if stage == 0:
        acts += units * A.embedding_activation_bytes(model, s, b, opts)
    if stage == strategy.pp - 1:
        # Logits of the main head and of each MTP module's pass through the shared head.
        acts += (1 + params.num_mtp_layers) * A.output_activation_bytes(model, s, b, opts)
    other = (
        cal.cuda_context_bytes
        + num_process_groups(strategy) * cal.nccl_bytes_per_group
        + cal.allocator_fragmentation_fraction * (acts + states.grads)
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

    def one_stage(stage: int) -> StageMemory:
        params = stage_params(model, strategy, stage)
        mix = (params.num_layers, params.num_moe_layers)
        if mix not in per_mix:
            per_mix[mix] = _stage_layer_activations(
                model, strategy, *mix, workload.seq_length / strategy.cp,
                strategy.micro_batch_size)
        return stage_memory(model, strategy, params, workload.seq_length, m, cal, per_mix[mix])

    stages = tuple(one_stage(stage) for stage in range(strategy.pp))
    assumptions = (
        "Adam optimizer with fp32 master weights, momentum and variance (12 B/param)",
        f"main gradients in {strategy.grad_reduce_dtype}",
        "16-bit activations; Korthikanti et al. 2022 Table 2 generalized to the model's shapes",
        f"pipeline schedule {strategy.schedule}, {m} micro-batches per step",
        "other = CUDA context + NCCL buffers per group + allocator fragmentation "
        "(calibration/memory_overheads.yaml)",
    )
    return MemoryReport(
        model=model.name,
        system=system.name,
        gpu=system.gpu.name,
        params_total=counts.total,
        params_active=counts.active,
        capacity_bytes=system.gpu.hbm_capacity_bytes,
        num_micro_batches=m,
        stages=stages,
        assumptions=assumptions,
    )
