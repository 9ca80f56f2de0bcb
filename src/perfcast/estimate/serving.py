"""``estimate_serving``: forecast a serving benchmark (fixed concurrency, request rate or
offline) on an engine with continuous batching. Pure.

1. The engine profile (``catalog.serving_engines``) resolved for the GPU and engine version
   gives the scheduler: token budget per step, max running sequences, KV page size, memory
   fraction, CUDA-graph batch sizes, decode-attention kernel class.
2. The paged-KV memory model (``estimate.serving_memory``) says whether the model fits and how
   many tokens the KV pool holds per replica, out of the device memory the driver reports
   (``GPUSpec.usable_hbm_bytes``: what the engines read and split, 81,559 MiB on an "80 GB"
   H100); the engine's device tier is read off the same figure.
3. The per-step cost model (``estimate.inference_phases`` via ``estimate.serving_step_cost``)
   prices every step the scheduler simulation (``estimate.serving_sim``) runs; an engine with
   an overlap scheduler (SGLang, the TensorRT-LLM PyTorch executor, vLLM ≥ 0.14 async
   scheduling; not NIM's prebuilt TensorRT engines) hides the host
   time per step (``step_overhead_s``) behind the GPU step; a graphed decode step pays the
   GPU vendor's device time per dependent-kernel boundary (``calibration/graph_replay.yaml``:
   the next kernel of a replayed graph starts only once the previous one has drained; static
   engines keep their own fitted overheads instead); the TP all-reduces run the
   engine's own one-shot kernel or, where the engine switches it off on the platform (vLLM
   through 0.8.0 and SGLang before 0.4.4 on AMD GPUs), the RCCL/NCCL all-reduce with its
   launch latency (``EngineConfig.tp_all_reduce``, ``inference_phases.tp_comm_time_s``).
4. With pp > 1 a step crosses the stages in turn (``inference_phases.step_time``): latency as
   measured, throughput pessimistic where an engine keeps pp micro-batches in flight.
5. Requests are split evenly over the data-parallel replicas (dp = GPUs / (tp·pp)), each an
   independent engine (a router spreads load; throughput adds up).

Every calibration file the forecast reads (serving overheads, graph kernel gaps, host launch
priors, MoE routing imbalance, attention-kernel ratios) comes from the ``Calibration`` passed
in (``--calibration DIR``), the shipped bundle only when none is.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from functools import partial
from typing import Any, Literal, cast

from perfcast.calibration.bundle import Calibration, load_calibration
from perfcast.calibration.fp8_block_kernels import fp8_gemm_slowdown
from perfcast.calibration.host_launch import HostLaunchCalibration
from perfcast.calibration.inference_overheads import InferenceOverheads
from perfcast.catalog.serving_engines import EngineConfig, engine_config, engine_target
from perfcast.errors import InputError
from perfcast.estimate.inference import _check, _context
from perfcast.estimate.inference_phases import ServingContext
from perfcast.estimate.serving_memory import ServingMemory, serving_memory_paged
from perfcast.estimate.serving_report import RunStatistics, ServingReport, run_statistics
from perfcast.estimate.serving_sim import simulate
from perfcast.estimate.serving_step_cost import build_step_cost
from perfcast.graph.stage import with_learned_imbalance
from perfcast.kernels.backend import KernelBackendName, KernelBackendRef, get_backend
from perfcast.specs.hardware import SystemSpec
from perfcast.specs.inference import InferencePrecision, Offload
from perfcast.specs.model import ModelSpec
from perfcast.specs.serving import ServingWorkload
from perfcast.specs.strategy import Strategy


def replica_workload(w: ServingWorkload, replicas: int) -> ServingWorkload:
    """The share of the stream one of ``replicas`` engines sees (concurrency, rate, request
    and warm-up counts divided evenly, rounded up)."""
    if replicas == 1:
        return w
    update: dict[str, object] = {"num_requests": math.ceil(w.num_requests / replicas),
                                 "warmup_requests": math.ceil(w.warmup_requests / replicas)}
    if w.concurrency is not None:
        update["concurrency"] = math.ceil(w.concurrency / replicas)
    if w.request_rate_per_s is not None:
        update["request_rate_per_s"] = w.request_rate_per_s / replicas
    return w.model_copy(update=update)


def override_engine(config: EngineConfig, overrides: dict[str, object]) -> EngineConfig:
    """``config`` with user-set values (e.g. ``--max-num-batched-tokens``) replacing defaults;
    each replaced value's source says so. Switching chunked prefill on also switches to the
    engine's ``chunked_scheduler_policy`` unless the policy is set too."""
    unknown = set(overrides) - {f.name for f in fields(EngineConfig)} - {"sources", "engine"}
    if unknown:
        raise InputError("engine_overrides", sorted(unknown)[0], "not an engine setting")
    if overrides.get("chunked_prefill") is True and "scheduler_policy" not in overrides:
        overrides = {**overrides, "scheduler_policy": config.chunked_scheduler_policy}
    sources = tuple((k, "set by the user" if k in overrides else v) for k, v in config.sources)
    # names checked above; values typed by the CLI options that set them
    values = cast(dict[str, Any], overrides)
    return replace(config, **values, sources=sources)


def rank_token_budget(config: EngineConfig, tp: int) -> int:
    """Step token budget of one rank's scheduler under attention DP
    (``EngineConfig.attention_dp_rank_budget``: SGLang 0.4.3 ``chunked_prefill_size // 2``,
    SGLang ≥ 0.4.6 ``chunked_prefill_size // dp_size``, server_args.py of the released wheels;
    TensorRT-LLM max_num_tokens per rank)."""
    budget = config.token_budget_per_step
    if config.attention_dp_rank_budget == "half":
        return max(budget // 2, 1)
    if config.attention_dp_rank_budget == "split":
        return max(budget // tp, 1)
    return budget


def attention_dp_scheduler(config: EngineConfig, tp: int) -> EngineConfig:
    """The scheduler of a model replica under attention DP: each of the ``tp`` ranks runs its own
    scheduler over its own requests (TensorRT-LLM ``enable_attention_dp``: max_batch_size and
    max_num_tokens are per rank, e.g. "max_batch_size 896 per rank" in the DeepSeek-R1
    max-throughput recipe; SGLang ``--max-running-requests`` is per DP worker, frameworks.md
    §6), so the replica runs tp × the sequences, graphed batch and rank token budget
    (``rank_token_budget``) of one rank, and a request prefills at most one rank's budget per
    step. The MoE layers then see the tokens of all ranks (``inference_ops.step_layer_ops``)."""
    if tp <= 1:
        return config
    cap = config.mixed_step_graph_max_tokens
    rank_budget = rank_token_budget(config, tp)
    return replace(config, max_running_seqs=config.max_running_seqs * tp,
                   token_budget_per_step=rank_budget * tp, max_chunk_tokens=rank_budget,
                   cuda_graph_max_batch=config.cuda_graph_max_batch * tp,
                   mixed_step_graph_max_tokens=None if cap is None else cap * tp)


def default_kv_cache(engine: EngineConfig, weights: str,
                     activations: str) -> Literal["bf16", "fp16", "fp8"]:
    """KV-cache dtype when none is given: the engine's kv dtype 'auto' keeps what the checkpoint
    declares (``EngineConfig.fp8_checkpoint_kv_cache``: FP8 for NIM's ModelOpt FP8 checkpoints),
    else the 16-bit activation type (frameworks.md §5-7 ``--kv-cache-dtype auto``)."""
    if weights == "fp8" and engine.fp8_checkpoint_kv_cache == "fp8":
        return "fp8"
    return "fp16" if activations == "fp16" else "bf16"


def eager_host_s_per_op(engine: EngineConfig, host: HostLaunchCalibration) -> float:
    """Host seconds an op of an eager step costs the engine (``EngineConfig.eager_launch``):
    ``host.host_s_per_op`` (``host_launch.yaml`` of the forecast's ``Calibration``) for a
    Python (PyTorch eager) forward, 0 for a native runtime."""
    return host.host_s_per_op.value if engine.eager_launch == "python" else 0.0


def gqa_exponent(engine: EngineConfig, overheads: InferenceOverheads) -> float:
    """KV reads per KV head: once (grouped kernels, x = 0) or per query head (the fitted
    exponent of 2023 masked-MHA kernels, ``inference_overheads.yaml``)."""
    return 0.0 if engine.decode_attention_kernel == "grouped" else overheads.gqa_kv_read_exponent


@dataclass(frozen=True)
class ServingSetup:
    """What a serving forecast of one deployment needs before it simulates: the engine
    scheduler, the paged-KV memory split, and the per-step cost context (steps 1–3 of the
    module docstring). ``estimate_serving`` and the deployment search
    (``serving_search``) both start from it, so they price steps with the same physics."""

    config: EngineConfig
    """Scheduler of one model replica (attention DP: all tp ranks together)."""
    memory: ServingMemory
    ctx: ServingContext
    """Step-cost context of one replica."""


def serving_setup(
    model: ModelSpec,
    system: SystemSpec,
    strategy: Strategy,
    *,
    engine: str = "vllm",
    engine_version: str | None = None,
    precision: str = "bf16",
    kv_precision: str | None = None,
    weight_precision: str | None = None,
    attention_dp: bool = False,
    engine_overrides: dict[str, object] | None = None,
    kernel_backend: KernelBackendRef = KernelBackendName.ROOFLINE,
    calibration: Calibration | None = None,
) -> ServingSetup:
    """Engine config, memory and step-cost context of one deployment (no side effects).

    Every calibration file comes from ``calibration`` (``perfcast calibrate --out DIR``; None:
    the shipped bundle): the serving overheads (``inference_overheads.yaml``), the graph
    kernel gaps (``graph_replay.yaml``), the host time per eager op (``host_launch.yaml``), the
    dropless MoE routing imbalance (``moe_routing.yaml``, ``graph.stage.with_learned_imbalance``)
    and the derived attention-kernel ratios (``attention_kernels.yaml``, applied to
    ``kernel_backend`` by ``Calibration.with_kernels``). ``kernel_backend``: a registered name
    or a backend instance (e.g. ``MeasuredBackend`` over a user's ``--kernel-table``)."""
    # device tiers and the KV pool both follow the memory the driver reports (vLLM
    # ``gpu_memory_utilization`` x torch.cuda.mem_get_info total; TensorRT-LLM
    # free_gpu_memory_fraction of cudaMemGetInfo free; SGLang mem_fraction_static and its tier
    # table of the device total in MiB): the catalog's ``usable_hbm_bytes`` (81,559 MiB on an
    # "80 GB" H100), not the vendor's decimal capacity
    device_bytes = system.gpu.usable_hbm_bytes
    config = engine_config(engine, device_bytes, engine_version,
                           engine_target(system.gpu, model, attention_dp))
    if engine_overrides:
        config = override_engine(config, engine_overrides)
    weights = weight_precision or precision
    # the strings are checked against the precision names by pydantic here
    prec = InferencePrecision.model_validate(dict(
        weights=weights, activations=precision,
        kv_cache=kv_precision or default_kv_cache(config, weights, precision)))
    _check(model, system, strategy, prec, attention_dp)
    bundle = calibration or load_calibration()
    cal = bundle.inference_overheads
    memory = serving_memory_paged(model, device_bytes, strategy, prec, config,
                                  attention_dp=attention_dp)
    if attention_dp:
        config = attention_dp_scheduler(config, strategy.tp)
    # the bundle's dropless learned-routing imbalance where the strategy states none
    routed = with_learned_imbalance(strategy, bundle.routing.dropless_load_imbalance.value)
    ctx = _context(model, system, routed, prec, attention_dp, Offload(),
                   bundle.with_kernels(get_backend(kernel_backend)), cal,
                   memory.weights_bytes)
    ctx = replace(ctx, gqa_kv_read_exponent=gqa_exponent(config, cal),
                  tp_all_reduce=config.tp_all_reduce,
                  mla_decode_head_block=config.mla_decode_head_block,
                  mla_decode_weights=config.mla_decode_weights,
                  attention_dp_gather=config.attention_dp_gather,
                  graph_kernel_gap_s=bundle.graph_gaps.kernel_gap_s(system.gpu.vendor),
                  eager_host_s_per_op=eager_host_s_per_op(config, bundle.host_launch_priors),
                  fp8_gemm_slowdown=fp8_gemm_slowdown(config.fp8_block_kernels, prec.weights))
    if config.overlap_scheduler:  # host scheduling/sampling hidden behind the GPU step
        ctx = replace(ctx, overhead=ctx.overhead.model_copy(update={"step_overhead_s": 0.0}))
    return ServingSetup(config=config, memory=memory, ctx=ctx)


def estimate_serving(
    model: ModelSpec,
    system: SystemSpec,
    strategy: Strategy | None,
    workload: ServingWorkload,
    *,
    engine: str = "vllm",
    engine_version: str | None = None,
    precision: str = "bf16",
    kv_precision: str | None = None,
    weight_precision: str | None = None,
    attention_dp: bool = False,
    engine_overrides: dict[str, object] | None = None,
    kernel_backend: KernelBackendRef = KernelBackendName.ROOFLINE,
    calibration: Calibration | None = None,
) -> ServingReport:
    """Simulate ``workload`` served by ``engine`` (no side effects; module docstring), priced
    with ``calibration`` and ``kernel_backend`` (``serving_setup``)."""
    strategy = strategy or Strategy(num_gpus=1)
    setup = serving_setup(
        model, system, strategy, engine=engine, engine_version=engine_version,
        precision=precision, kv_precision=kv_precision, weight_precision=weight_precision,
        attention_dp=attention_dp, engine_overrides=engine_overrides,
        kernel_backend=kernel_backend, calibration=calibration)
    config, memory, ctx = setup.config, setup.memory, setup.ctx
    replicas = strategy.dp
    share = replica_workload(workload, replicas)
    max_seqs = memory.max_concurrent_seqs(workload.context_tokens)
    fits = max_seqs >= 1
    report = partial(
        ServingReport, model=model.name, system=system.name, gpu=system.gpu.name, engine=engine,
        engine_version=engine_version, strategy=strategy, workload=workload, replicas=replicas,
        concurrency_per_replica=share.concurrency, memory=memory, fits=fits,
        max_concurrent_seqs=max_seqs)
    if not fits:
        return report(**RunStatistics.not_run().field_values())
    running = min(max_seqs, share.concurrency or share.num_requests)
    cost = build_step_cost(ctx, config, running, workload.context_tokens)
    draws = share.arrival_draws if share.mode == "request_rate" else 1
    runs = [run_statistics(simulate(share.model_copy(update={"seed": share.seed + k}), cost,
                                    config, memory.kv_pool_tokens, memory.kv_block_tokens),
                           share.warmup_requests) for k in range(draws)]
    return report(**RunStatistics.mean_of(runs).field_values())
