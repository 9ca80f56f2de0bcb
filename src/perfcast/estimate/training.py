"""``estimate_training``: forecast one training step of a transformer on a cluster. Pure.

Pipeline: operator graph per stage (``graph.stage``) → kernel and collective times
(``schedule.stage_time``) → data-parallel exposure (``schedule.data_parallel``) → pipeline
critical path (``schedule.pipeline``) → optimizer → calibrated per-step overhead
(``calibration/training_overheads.yaml``) → report with a breakdown that sums to the step.
"""

from __future__ import annotations

from perfcast.calibration.training_overheads import TrainingOverheads, load_training_overheads
from perfcast.estimate.training_report import StepBreakdown, TrainingReport
from perfcast.graph.flops import model_flops_per_token, recompute_flops_per_token
from perfcast.graph.layer import ACT_BYTES
from perfcast.graph.ops import Collective, CommOp, Group, Phase
from perfcast.graph.param_sharding import layers_per_stage, stage_params
from perfcast.graph.stage import stage_graph
from perfcast.kernels.backend import KernelBackendName, get_backend
from perfcast.memory.estimate import estimate_memory
from perfcast.schedule.data_parallel import data_parallel_time
from perfcast.schedule.op_time import comm_op_time_s
from perfcast.schedule.optimizer import optimizer_time_s
from perfcast.schedule.orders import device_stage_work, schedule_plan
from perfcast.schedule.pipeline import pipeline_step_time_s, schedule_chunks
from perfcast.schedule.stage_time import stage_time
from perfcast.specs.compat import num_micro_batches
from perfcast.specs.hardware import SystemSpec
from perfcast.specs.model import ModelSpec
from perfcast.specs.strategy import Strategy
from perfcast.specs.workload import Workload


def _p2p_time_s(model: ModelSpec, system: SystemSpec, strategy: Strategy, seq_length: int):
    """One activation send/recv between stages: b·(s/cp)·h·2 bytes (/tp with SP)."""
    tokens = strategy.micro_batch_size * seq_length / strategy.cp
    if strategy.sequence_parallel:
        tokens /= strategy.tp
    op = CommOp("pp_send_recv", Phase.FORWARD, Group.PP, Collective.SEND_RECV,
                ACT_BYTES * tokens * model.hidden_size)
    return comm_op_time_s(op, system, strategy)


def estimate_training(
    model: ModelSpec,
    system: SystemSpec,
    strategy: Strategy,
    workload: Workload,
    kernel_backend: KernelBackendName | str = KernelBackendName.ROOFLINE,
    overheads: TrainingOverheads | None = None,
) -> TrainingReport:
    """Step time, throughput, MFU and a breakdown for one training step (no side effects).

    ``overheads`` replaces the shipped per-generation calibration (for fitting it).
    """
    memory = estimate_memory(model, system, strategy, workload)  # also validates the inputs
    backend = get_backend(kernel_backend)
    m = num_micro_batches(workload, strategy)
    s = workload.seq_length
    per_stage = []
    seen: dict[tuple, tuple] = {}
    for stage in range(strategy.pp):
        params = stage_params(model, strategy, stage)
        # Stages with the same layer mix and the same embedding/head role cost the same.
        key = (params.num_layers, params.num_moe_layers, stage == 0, stage == strategy.pp - 1)
        if key not in seen:
            graph = stage_graph(model, strategy, s, stage)
            times = stage_time(graph, system, strategy, backend)
            dp = data_parallel_time(params, times, system, strategy)
            seen[key] = (times, dp)
        times, dp = seen[key]
        per_stage.append((times, dp, params))

    passes = tuple(times.passes(dp.exposed_per_micro_batch_s) for times, dp, _ in per_stage)
    pipeline_s = pipeline_step_time_s(strategy.schedule, passes, m, strategy.vpp)
    work = _device_stage_work(strategy, m)
    busy = [sum(w * p.total_s for w, p in zip(row, passes, strict=True)) for row in work]
    critical = max(range(strategy.pp), key=lambda d: busy[d])

    def on_critical(field: str, source: int = 0) -> float:
        """A StageTime (source 0) or DataParallelTime (1) field, summed over the critical
        device's micro-batches of each stage."""
        return sum(w * getattr(per_stage[i][source], field) for i, w in enumerate(work[critical]))

    p2p = _p2p_time_s(model, system, strategy, s) if strategy.pp > 1 else 0.0
    chunks = schedule_chunks(strategy.schedule, strategy.vpp)
    # Fill and drain cross each of the p−1 boundaries forward and backward (v times more
    # boundaries per chunk with interleaving, each v times shorter in compute but not in bytes).
    pp_comm = 2 * (strategy.pp - 1) * p2p * chunks
    dp_exposed = max(stage_dp.exposed_step_s for _, stage_dp, _ in per_stage)
    optimizer_s = max(optimizer_time_s(p, system, strategy, backend) for _, _, p in per_stage)
    calib = (overheads or load_training_overheads()).for_generation(system.gpu.generation)
    compute_like = pipeline_s + pp_comm + dp_exposed + optimizer_s
    other = calib.step_overhead_s + calib.compute_overhead_fraction * compute_like

    breakdown = StepBreakdown(
        compute_gemm_s=on_critical("gemm_s"),
        compute_attention_s=on_critical("attention_s"),
        compute_memory_bound_s=on_critical("memory_bound_s"),
        recompute_s=on_critical("recompute_s"),
        tp_comm_s=on_critical("tp_comm_s"),
        cp_comm_s=on_critical("cp_comm_s"),
        ep_comm_s=on_critical("ep_comm_s"),
        pp_comm_s=pp_comm,
        dp_comm_s=dp_exposed + on_critical("exposed_per_micro_batch_s", 1),
        pipeline_bubble_s=pipeline_s - busy[critical],
        optimizer_s=optimizer_s,
        other_s=other,
    )
    step = compute_like + other
    model_flops = model_flops_per_token(model, s)
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
        bubble_fraction=pipeline_s / busy[critical] - 1.0,
        memory=memory,
        kernel_backend=str(getattr(backend, "name", kernel_backend)),
        stage_passes=passes,
        p2p_s=p2p,
        assumptions=(
            "model FLOPs per token = 6*N_active_matmul + causal attention (3 passes)",
            "MFU against the dense BF16 peak of the GPU",
            f"kernel backend {getattr(backend, 'name', kernel_backend)}; collectives alpha-beta",
            "DP gradient reduction overlapped with the last micro-batch's backward",
            "TP and EP collectives exposed; CP exchange overlapped with attention",
        ),
    )


def _device_stage_work(strategy: Strategy, m: int) -> tuple[tuple[float, ...], ...]:
    """[device][stage] micro-batches of work; m on the diagonal for one-directional schedules
    (skips building the plan's routes in the common case)."""
    if strategy.schedule != "dualpipe":
        return tuple(tuple(float(m) if d == i else 0.0 for i in range(strategy.pp))
                     for d in range(strategy.pp))
    return device_stage_work(schedule_plan("dualpipe", strategy.pp, m))


def _recomputed_fraction(model: ModelSpec, strategy: Strategy) -> float:
    """Share of all layers whose forward is recomputed in full (for HFU)."""
    recomputed = sum(strategy.recomputed_layers(n)
                     for n in layers_per_stage(model.num_hidden_layers, strategy.pp))
    return recomputed / model.num_hidden_layers
