"""``estimate_training``: forecast one training step of a transformer on a cluster. Pure.

Pipeline: operator graph per stage (``graph.stage``) → kernel and collective times
(``schedule.stage_time``) → data-parallel exposure (``schedule.data_parallel``) → pipeline
critical path (``schedule.pipeline``) → optimizer → calibrated per-step overhead
(``calibration/training_overheads.yaml``) → report with a breakdown that sums to the step.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace

import numpy as np

from perfcast.arrays import Floats
from perfcast.calibration.bundle import Calibration, load_calibration
from perfcast.calibration.training_overheads import TrainingOverhead, TrainingOverheads
from perfcast.estimate.stand_ins import calibration_stand_ins
from perfcast.estimate.training_report import StepBreakdown, TrainingReport
from perfcast.graph.flops import (
    dropped_token_flops_per_token,
    model_flops_per_token,
    recompute_flops_per_token,
)
from perfcast.graph.layer import ACT_BYTES
from perfcast.graph.op_sac import op_sac_recompute_flops_per_token
from perfcast.graph.ops import Collective, CommOp, Group, Phase
from perfcast.graph.param_sharding import (
    count_moe_layers,
    stage_params,
    strategy_stage_layers,
)
from perfcast.graph.stage import moe_load_imbalance, stage_graph, with_learned_imbalance
from perfcast.kernels.backend import DEFAULT_KERNEL_BACKEND, KernelBackend, KernelBackendName, get_backend
from perfcast.memory.estimate import estimate_memory, offloaded_activation_bytes
from perfcast.schedule.activation_offload import offload_exposed_s
from perfcast.schedule.data_parallel import data_parallel_time
from perfcast.schedule.ep_overlap import unpaired_pass_share
from perfcast.schedule.kernel_coverage import table_fallback_ops
from perfcast.schedule.op_time import comm_op_time_s
from perfcast.schedule.optimizer import optimizer_time_s
from perfcast.schedule.pipeline import (
    CLOSED_FORM_SCHEDULES,
    pipeline_time_s,
    schedule_chunks,
    simulated_pipeline_time_s,
)
from perfcast.schedule.stage_time import stage_time
from perfcast.schedule.timeline import PassTimes
from perfcast.specs.compat import num_micro_batches
from perfcast.specs.hardware import SystemSpec
from perfcast.specs.model import ModelSpec
from perfcast.specs.strategy import Strategy
from perfcast.specs.workload import Workload


def p2p_time_s(model: ModelSpec, system: SystemSpec, strategy: Strategy, seq_length: int):
    """One activation send/recv between stages: b·(s/cp)·h·2 bytes (/tp with SP).
    Array-friendly."""
    tokens = strategy.micro_batch_size * seq_length / strategy.cp
    if strategy.sequence_parallel:
        tokens = tokens / strategy.tp
    op = CommOp("pp_send_recv", Phase.FORWARD, Group.PP, Collective.SEND_RECV,
                ACT_BYTES * tokens * model.hidden_size)
    return comm_op_time_s(op, system, strategy)


def pipeline_comm_time_s(model: ModelSpec, system: SystemSpec, strategy: Strategy,
                         seq_length: int):
    """Exposed stage-to-stage activation transfers per step (array-friendly).

    Fill and drain cross each of the p−1 boundaries forward and backward (v times more
    boundaries per chunk with interleaving, 2 with ZB-V's two chunks; each shorter in compute
    but not in bytes): 2·(p−1)·chunks transfers exposed.
    """
    if strategy.pp == 1:
        return 0.0
    chunks = schedule_chunks(strategy.schedule, strategy.vpp)
    return 2 * (strategy.pp - 1) * p2p_time_s(model, system, strategy, seq_length) * chunks


def stage_kinds(model: ModelSpec, strategy: Strategy) -> list[int]:
    """For each pipeline stage, the index of its kind in ``distinct_stages`` order."""
    keys: dict[tuple, int] = {}
    out = []
    pp = strategy.pp
    for stage, layers in enumerate(strategy_stage_layers(model, strategy)):
        bf16 = (sum(strategy.bf16_layer(i, model.num_hidden_layers) for i in layers)
                if strategy.num_layers_at_start_in_bf16 or strategy.num_layers_at_end_in_bf16
                else 0)
        key = (len(layers), count_moe_layers(model, layers), bf16, stage == 0,
               stage == pp - 1)
        out.append(keys.setdefault(key, len(keys)))
    return out


def distinct_stages(model: ModelSpec, strategy: Strategy) -> list[tuple[int, int]]:
    """(first stage index, number of stages) of each kind of pipeline stage, in stage order.

    Stages with the same layer mix and the same embedding/head role cost the same time and
    hold the same states; the first of a kind holds the most in-flight micro-batches.
    """
    return _distinct(stage_kinds(model, strategy))


def _distinct(kinds: list[int]) -> list[tuple[int, int]]:
    """(first stage index, number of stages) of each kind in ``stage_kinds`` output."""
    return [(kinds.index(k), kinds.count(k)) for k in range(max(kinds) + 1)]


@dataclass(frozen=True)
class StepParts:
    """The parts of one step shared by ``estimate_training`` and the bulk search (seconds;
    floats, or numpy arrays over many strategies)."""

    stage_totals_s: list
    """Per-micro-batch time of each distinct stage (compute, exposed comm, FSDP exposure)."""
    pipeline_s: Floats
    pp_comm_s: Floats
    dp_exposed_s: Floats
    optimizer_s: Floats
    other_s: Floats

    @property
    def step_time_s(self) -> Floats:
        return self.pipeline_s + self.pp_comm_s + self.dp_exposed_s + self.optimizer_s + self.other_s


def assemble_step(model: ModelSpec, system: SystemSpec, strategy: Strategy, seq_length: int,
                  num_micro_batches, stages: list, stage_counts: list[int],
                  backend: KernelBackend, calib: TrainingOverhead,
                  stage_passes: tuple[PassTimes, ...] = ()) -> StepParts:
    """Step time from the distinct stages' ``(StageTime, DataParallelTime, StageParams)``:
    pipeline critical path, exposed P2P, exposed DP, optimizer (the slowest stage's) and the
    calibrated overhead ``step_overhead_s + compute_overhead_fraction · kernel time on the
    critical path``.

    The pipeline phase is the closed form for GPipe / 1F1B / interleaved (array-friendly: the
    bulk search passes numpy arrays) and the event simulation of ``stage_passes`` (one
    ``PassTimes`` per stage) for the zero-bubble and bidirectional schedules; without
    ``stage_passes`` (the bulk search) those take ``pipeline_work_bound_s``, a lower bound
    on the step that the search re-scores.
    """
    totals = [times.total_s + dp.exposed_per_micro_batch_s for times, dp, _ in stages]
    if strategy.schedule in CLOSED_FORM_SCHEDULES:
        pipeline_s = pipeline_time_s(totals, num_micro_batches, strategy.schedule, strategy.vpp,
                                     stage_counts)
    elif not stage_passes:
        # the bulk search's zero-bubble / DualPipe bound (imported here: not on a single
        # forecast's path, which simulates the schedule)
        from perfcast.schedule.pipeline_bound import pipeline_work_bound_s

        kinds = stage_kinds(model, strategy)  # distinct stages back in stage order
        forward = [stages[k][0].forward_s for k in kinds]
        weight_grad = [stages[k][0].wgrad_s for k in kinds]
        input_grad = [totals[k] - f - wg for k, f, wg in zip(kinds, forward, weight_grad,
                                                             strict=True)]
        pipeline_s = pipeline_work_bound_s(forward, input_grad, weight_grad, num_micro_batches,
                                           strategy.schedule)
    else:
        pipeline_s = simulated_pipeline_time_s(strategy.schedule, stage_passes,
                                               num_micro_batches, strategy.vpp)
    pp_comm = pipeline_comm_time_s(model, system, strategy, seq_length)
    dp_exposed = functools.reduce(np.maximum, [dp.exposed_step_s for _, dp, _ in stages])
    optimizer_s = functools.reduce(
        np.maximum, [optimizer_time_s(p, system, strategy, backend) for _, _, p in stages])
    # The calibrated overhead stretches kernels only (gaps, sustained clocks, SM contention),
    # not exposed collectives: the critical (first slowest) stage's kernel share of the
    # pipeline time, plus the optimizer's kernels.
    slowest, kernel_share = totals[0], stages[0][0].compute_s / totals[0]
    for (times, _, _), total in zip(stages[1:], totals[1:], strict=True):
        slower = total > slowest
        kernel_share = np.where(slower, times.compute_s / total, kernel_share)
        slowest = np.maximum(slowest, total)
    kernel_path_s = pipeline_s * kernel_share + optimizer_s
    other = calib.step_overhead_s + calib.compute_overhead_fraction * kernel_path_s
    return StepParts(stage_totals_s=totals, pipeline_s=pipeline_s, pp_comm_s=pp_comm,
                     dp_exposed_s=dp_exposed, optimizer_s=optimizer_s, other_s=other)


def estimate_training(
    model: ModelSpec,
    system: SystemSpec,
    strategy: Strategy,
    workload: Workload,
    kernel_backend: KernelBackendName | str | KernelBackend = DEFAULT_KERNEL_BACKEND,
    calibration: Calibration | None = None,
) -> TrainingReport:
    """Step time, throughput, MFU and a breakdown for one training step (no side effects).

    ``calibration`` (``perfcast.calibration.bundle``) replaces the shipped calibration: the
    per-generation overheads, overlap shares and derived attention kernels (a user's
    ``perfcast calibrate`` output, or a fitting trial), host-launch priors included.
    """
    memory = estimate_memory(model, system, strategy, workload)  # also validates the inputs
    cal = calibration or load_calibration()
    comm_overlap = cal.comm_overlap
    backend = cal.with_kernels(get_backend(kernel_backend))
    m = num_micro_batches(workload, strategy)
    s = workload.seq_length
    stage_kind = stage_kinds(model, strategy)
    kinds = _distinct(stage_kind)
    stages, graphs = [], []
    routed = with_learned_imbalance(strategy, cal.routing.dropless_load_imbalance.value)
    layer_memo: dict = {}  # stages share the times of identical layers
    for stage, _ in kinds:
        params = stage_params(model, strategy, stage)
        graphs.append(stage_graph(model, routed, s, stage))
        times = stage_time(graphs[-1], system, strategy, backend, comm_overlap,
                           cal.host_launch, layer_memo).with_unpaired_ep(
            unpaired_pass_share(strategy.schedule, strategy.pp, strategy.vpp, m))
        if strategy.cpu_offload_activation_layers or strategy.offload_modules:
            offloaded = offloaded_activation_bytes(model, strategy, params.num_layers,
                                                   params.num_moe_layers, s)
            times = replace(times, offload_s=float(offload_exposed_s(
                offloaded, system, times.forward_s, times.backward_compute_s)))
        dp_time = data_parallel_time(params, times, system, strategy, comm_overlap,
                                     cal.host_launch, num_micro_batches=m)
        stages.append((times, dp_time, params))
    per_stage = [stages[k] for k in stage_kind]
    # one strategy: the DP seconds are numbers here (arrays only in the bulk search)
    passes = tuple(times.passes(float(dp.exposed_per_micro_batch_s)) for times, dp, _ in per_stage)
    overheads = cal.training_overheads
    calib = overheads.for_generation(system.gpu.generation)
    parts = assemble_step(model, system, strategy, s, m, stages, [n for _, n in kinds], backend,
                          calib, passes)
    # The critical GPU: the one with the most work (its own stage m times, except DualPipe).
    # Each device's (stage, micro-batches) with work: zero terms add exactly nothing.
    work = _device_stage_work(strategy, m)
    totals = [p.total_s for p in passes]
    busy = [sum(w * totals[i] for i, w in row) for row in work]
    critical = max(range(strategy.pp), key=lambda d: busy[d])

    def on_critical(field: str, source: int = 0) -> float:
        """A StageTime (source 0) or DataParallelTime (1) field, summed over the critical
        device's micro-batches of each stage."""
        return sum(w * getattr(per_stage[i][source], field) for i, w in work[critical])

    breakdown = StepBreakdown(
        compute_gemm_s=on_critical("gemm_s"),
        compute_attention_s=on_critical("attention_s"),
        compute_memory_bound_s=on_critical("memory_bound_s"),
        recompute_s=on_critical("recompute_s"),
        tp_comm_s=on_critical("tp_comm_s"),
        cp_comm_s=on_critical("cp_comm_s"),
        ep_comm_s=on_critical("ep_comm_s"),
        host_s=on_critical("host_s"),
        pp_comm_s=float(parts.pp_comm_s),  # one strategy: scalars (numpy or Python)
        dp_comm_s=float(parts.dp_exposed_s + on_critical("exposed_per_micro_batch_s", 1)),
        pipeline_bubble_s=max(0.0, float(parts.pipeline_s - busy[critical])),  # ≥ 0 up to rounding
        optimizer_s=float(parts.optimizer_s),
        other_s=float(parts.other_s),
        offload_s=on_critical("offload_s"),
    )
    step = parts.step_time_s
    interval = _interval(cal, model, system, strategy, workload.tokens_per_step / float(step))
    model_flops = (model_flops_per_token(model, s)
                   - dropped_token_flops_per_token(model, strategy.moe_capacity_factor))
    if strategy.recompute == "selective" and "op_sac" in strategy.recompute_modules:
        hardware_flops = model_flops + op_sac_recompute_flops_per_token(model)
    else:
        hardware_flops = model_flops + recompute_flops_per_token(
            model, s, strategy.recompute, _recomputed_fraction(model, strategy))
    return TrainingReport(
        model=model.name,
        system=system.name,
        gpu=system.gpu.name,
        num_gpus=strategy.num_gpus,
        strategy=strategy,
        seq_length=s,
        global_batch_size=workload.global_batch_size,
        num_micro_batches=m,
        step_time_s=float(step),
        tokens_per_step=workload.tokens_per_step,
        model_flops_per_token=float(model_flops),
        hardware_flops_per_token=float(hardware_flops),
        peak_flops=system.gpu.peak_flops("bf16"),
        breakdown=breakdown,
        critical_stage=critical,
        bubble_fraction=max(0.0, float(parts.pipeline_s / busy[critical] - 1.0)),
        memory=memory,
        kernel_backend=str(getattr(backend, "name", kernel_backend)),
        calibration=replace(cal.training_status(system.gpu.generation),
                            stand_ins=calibration_stand_ins(backend, system.gpu)),
        interval=interval,
        stage_passes=passes,
        p2p_s=float(p2p_time_s(model, system, strategy, s)) if strategy.pp > 1 else 0.0,
        kernel_table_fallback_ops=table_fallback_ops(graphs, system.gpu, strategy, backend),
        assumptions=(
            "model FLOPs per token = 6*N_active_matmul + causal attention (3 passes); "
            "MTP modules cost time but are not model FLOPs",
            "MFU against the dense BF16 peak of the GPU",
            f"kernel backend {getattr(backend, 'name', kernel_backend)}; collectives as NCCL picks them",
            ("DP gradient reduction overlapped with the last micro-batch's backward "
             "(interleaved schedule: each model chunk's after its last micro-batch)"
             if strategy.overlap_grad_reduce else
             "DP gradient reduction after the whole backward, not overlapped"),
            "TP/EP collectives exposed unless --tp-comm-overlap/--ep-overlap; CP under attention",
            *_layout_notes(strategy),
            *_calibration_notes(system, strategy, overheads),
            *_routing_notes(model, strategy, cal),
        ),
    )


def _routing_notes(model: ModelSpec, strategy: Strategy,
                   cal: Calibration) -> tuple[str, ...]:
    """The MoE load imbalance used (``graph.stage.moe_load_imbalance`` of the strategy the
    graphs were built with), for MoE runs; the learned default quotes its standard error."""
    if not model.is_moe:
        return ()
    routing = cal.routing
    value = moe_load_imbalance(with_learned_imbalance(
        strategy, routing.dropless_load_imbalance.value))
    if strategy.moe_router_force_load_balancing or strategy.ep == 1:
        why = "forced load balancing" if strategy.ep > 1 else "no expert parallelism"
    elif strategy.moe_load_imbalance is not None:
        why = "stated"
    else:
        why = f"dropless learned routing, calibration moe_routing.yaml: {routing.note()}"
    return (f"moe_load_imbalance {value:g}: the busiest EP rank routes {value:g}x the mean "
            f"tokens ({why}); a capacity factor caps it",)
def _layout_notes(strategy: Strategy) -> tuple[str, ...]:
    """Assumption lines for layouts no listed framework runs (2D TP), the CP exchange and an
    FP8 recipe that converts only part of the GEMMs (``Strategy.fp8_gemm_scope``)."""
    notes = []
    if strategy.precision == "fp8" and strategy.fp8_gemm_scope != "all":
        kept = ("the routed experts' grouped GEMMs" if strategy.fp8_gemm_scope == "linear"
                else "the linear layers")
        notes.append(f"fp8_gemm_scope {strategy.fp8_gemm_scope}: {strategy.fp8_recipe} GEMMs "
                     f"and casts only there; {kept} stay BF16 (graph/fp8_casts.py)")
    if strategy.tp2d_rows > 1:
        notes.append(f"2D TP-SP over a {strategy.tp2d_rows}x{strategy.tp2d_cols} grid "
                     "(graph.tensor_parallel_2d; Subramanian et al. 2024): no listed framework "
                     "(Megatron-Core, Megatron-LM, torchtitan, DeepSpeed, FSDP, llm-foundry) "
                     "runs it")
    if strategy.cp > 1:
        notes.append(f"CP exchange {strategy.cp_comm_type} (graph.context_parallel)")
    return tuple(notes)


def _calibration_notes(system: SystemSpec, strategy: Strategy,
                       overheads: TrainingOverheads) -> tuple[str, ...]:
    """Assumption lines for the host model, a power-capped GPU and an overhead fallback."""
    gpu = system.gpu
    notes = [f"host: eager ops issued from the CPU, CUDA graphs '{strategy.cuda_graphs}'; "
             "a pass takes max(GPU stream, host issue) per sync-free segment "
             "(calibration/host_launch.yaml)"]
    if (gpu.power_limit_W is not None and gpu.tdp_W is not None
            and gpu.matrix_clock_Hz is not None):
        notes.append(f"{gpu.name} capped at {gpu.power_limit_W:g} W of {gpu.tdp_W:g} W: "
                     f"sustained matrix clock {gpu.matrix_clock_Hz / 1e6:,.0f} MHz "
                     "(catalog/power.py)")
    if overheads.is_fallback(gpu.generation):
        notes.append(f"no training measurements for generation {gpu.generation!r}: the "
                     f"calibrated overhead is the pooled fit "
                     f"({overheads.for_generation(gpu.generation).compute_overhead_fraction:g}), "
                     "a fallback")
    return tuple(notes)


def _interval(cal: Calibration, model: ModelSpec, system: SystemSpec, strategy: Strategy,
              tokens_per_s: float):
    """80% band of tokens/s/GPU from the cross-validated residuals of comparable runs
    (``calibration.forecast_intervals``); None without bands."""
    bands = cal.intervals
    if bands is None:
        return None
    scale = "multi-node" if strategy.num_gpus > system.gpus_per_node else "single-node"
    return bands.training.interval(system.gpu.generation, model.arch_type, scale,
                                   tokens_per_s / strategy.num_gpus, True, bands.level,
                                   bands.min_sources, bands.widen_factor)


def _device_stage_work(strategy: Strategy, m: int) -> list[list[tuple[int, float]]]:
    """[device] (stage, micro-batches) pairs with work: (d, m) alone for one-directional
    schedules (skips building the plan's routes in the common case)."""
    if strategy.schedule != "dualpipe":
        return [[(d, float(m))] for d in range(strategy.pp)]
    from perfcast.schedule.orders import device_stage_work, schedule_plan  # DualPipe only

    return [[(i, w) for i, w in enumerate(row) if w]
            for row in device_stage_work(schedule_plan("dualpipe", strategy.pp, m))]


def _recomputed_fraction(model: ModelSpec, strategy: Strategy) -> float:
    """Share of all layers whose forward is recomputed in full (for HFU)."""
    recomputed = sum(strategy.recomputed_layers(len(layers))
                     for layers in strategy_stage_layers(model, strategy))
    return recomputed / model.num_hidden_layers

