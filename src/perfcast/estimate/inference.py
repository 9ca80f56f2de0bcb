"""``estimate_inference``: forecast serving a model on a system. Pure.

Phases (Pope et al. 2022, "Efficiently Scaling Transformer Inference" §2):

* static batching: one prefill of b·s_in tokens (compute-bound; TTFT), then s_out − 1 decode
  steps of b tokens each, the KV length growing from s_in + 1 to s_in + s_out − 1 (TPOT is
  their mean); e2e = TTFT + (s_out − 1)·TPOT.
* continuous batching, steady state (Yu et al., Orca, 2022; chunked prefill per Agrawal et al.,
  Sarathi-Serve, 2024): b sequences in flight at mean KV length s_in + s_out/2; each step
  decodes b tokens and prefills the b·s_in/s_out prompt tokens of the requests that replace
  finished ones; TPOT = one mixed step, TTFT = ⌈s_in/chunk⌉ steps. Prefill overheads are
  charged on the prompt tokens' share of the step. (``estimate.serving`` simulates the
  request stream instead: queueing, admission and TTFT at a given concurrency.)
* with pp > 1 under continuous batching, pp micro-batches of b/pp keep every stage busy; the
  slowest stage sets a cycle of pp stage times per generated token.
* speculative decoding (Leviathan et al. 2023, Eq. 1): k draft steps and one target step that
  verifies k + 1 tokens yield (1 − α^(k+1))/(1 − α) tokens on average.

Replicas (dp = GPUs/(tp·pp)) multiply throughput; attention data parallelism splits the
sequences of a TP group for attention (DeepSeek-V3 serving; MLA caches are not split by TP).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import TypedDict, Unpack

import numpy as np

from perfcast.calibration.bundle import Calibration, load_calibration
from perfcast.calibration.inference_overheads import InferenceOverheads
from perfcast.catalog.host_io import host_io_for
from perfcast.catalog.inference_engines import MicroBatching, inference_engine
from perfcast.errors import InputError
from perfcast.estimate.inference_kernels import roofline_params
from perfcast.estimate.inference_memory import serving_memory
from perfcast.estimate.inference_ops import AttentionPass
from perfcast.estimate.inference_phases import (
    ServingContext,
    StepTime,
    bottleneck_stage_time,
    step_time,
)
from perfcast.estimate.inference_report import (
    CurvePoint,
    InferenceCurve,
    InferenceReport,
    SpeculationSummary,
)
from perfcast.estimate.stand_ins import calibration_stand_ins
from perfcast.graph.stage import with_learned_imbalance
from perfcast.kernels.backend import KernelBackendName, KernelBackendRef, get_backend
from perfcast.specs.compat import check_strategy_for_model
from perfcast.specs.hardware import SystemSpec
from perfcast.specs.inference import (
    InferencePrecision,
    InferenceWorkload,
    Offload,
    SpeculativeDecoding,
)
from perfcast.specs.model import ModelSpec
from perfcast.specs.strategy import Strategy


def expected_tokens_per_step(acceptance_rate: float, num_draft_tokens: int) -> float:
    """Expected tokens per target step with k drafts at acceptance α: (1 − α^(k+1))/(1 − α)
    (Leviathan, Kalman, Matias, "Fast Inference from Transformers via Speculative Decoding",
    ICML 2023, Eq. 1)."""
    a = acceptance_rate
    return (1.0 - a ** (num_draft_tokens + 1)) / (1.0 - a)


def _check(model: ModelSpec, system: SystemSpec, strategy: Strategy,
           precision: InferencePrecision, attention_dp: bool) -> None:
    check_strategy_for_model(model, strategy)
    gpu = system.gpu
    for fmt in {precision.activations, precision.kv_cache} - {"bf16", "fp16"}:
        if not gpu.supports(fmt):
            raise InputError("precision", fmt, f"gpu {gpu.name!r} has no {fmt} tensor cores")
    if attention_dp and strategy.tp == 1:
        raise InputError("attention_dp", True, "needs tp > 1 (attention is split over the TP group)")


def dequant_efficiency(overheads: InferenceOverheads, precision: InferencePrecision) -> float:
    """Bandwidth efficiency of a weight-only GEMM that upcasts its weights in the main loop
    (``inference_overheads.yaml``, fitted on int8/int4 weight-only rows). FP4 weights beside
    16-bit activations (MXFP4 W4A16: no FP4 MMA is used) take the 4-bit (int4) value: the same
    4-bit load-unpack-convert before a 16-bit MMA."""
    return overheads.dequant_bandwidth_efficiency.get(precision.dequant_class or "", 1.0)


def _context(model, system, strategy, precision, attention_dp, offload, backend,
             overheads: InferenceOverheads, weights_bytes: float,
             cuda_graphs: bool = False, tp_all_reduce: str = "custom",
             grouped_kv_reads: bool = False) -> ServingContext:
    """``grouped_kv_reads``: the engine's decode-attention kernel reads each KV head once per
    group (``catalog.inference_engines`` ``decode_attention_kernel: grouped``), so the fitted
    per-query-head read amplification (``gqa_kv_read_exponent``) does not apply."""
    return ServingContext(
        model=model, system=system, strategy=strategy, precision=precision, backend=backend,
        params=roofline_params(backend, system.gpu),
        overhead=overheads.for_generation(system.gpu.generation),
        dequant_efficiency=dequant_efficiency(overheads, precision),
        gqa_kv_read_exponent=0.0 if grouped_kv_reads else overheads.gqa_kv_read_exponent,
        attention_dp=attention_dp, offload=offload, host_io=host_io_for(system.gpu),
        weights_bytes_per_gpu=weights_bytes, cuda_graphs=cuda_graphs,
        tp_all_reduce=tp_all_reduce,
    )


def _paged_max_batch(model: ModelSpec, system: SystemSpec, strategy: Strategy,
                     precision: InferencePrecision, workload: InferenceWorkload) -> int:
    """Continuous batching allocates KV in pages (vLLM V1 defaults, ``estimate.serving_memory``):
    sequences of the workload's full length the KV pool holds beside weights and workspace."""
    from perfcast.catalog.serving_engines import engine_config
    from perfcast.estimate.serving_memory import serving_memory_paged

    capacity = system.gpu.hbm_capacity_bytes
    paged = serving_memory_paged(model, capacity, strategy, precision,
                                 engine_config("vllm", capacity))
    return paged.max_concurrent_seqs(workload.context_tokens)


def _prefill(ctx: ServingContext, batch: float, input_len: int) -> StepTime:
    passes = (AttentionPass(batch, input_len, input_len, causal=True),)
    return step_time(ctx, batch * input_len, passes, batch, prefill=True)


def _decode(ctx: ServingContext, batch: float, kv_lens, queries: int = 1,
            bottleneck: bool = False) -> StepTime:
    passes = (AttentionPass(batch, queries, kv_lens, causal=False),)
    timer = bottleneck_stage_time if bottleneck else step_time
    return timer(ctx, batch * queries, passes, batch * queries)


FT_LOCAL_BATCH_TOKENS = 1024
"""FasterTransformer halves an even local batch while it holds more than this many tokens
(``getLocalBatchSize``; catalog/data/frameworks/inference/fastertransformer.yaml)."""


def static_micro_batches(batch_size: int, seq_len: int, pp: int,
                         rule: MicroBatching = "fill") -> int:
    """Micro-batches a static batch of ``seq_len``-token sequences is split into over ``pp``
    stages. ``fill``: min(b, pp) (GPipe-style filling, Huang et al. 2019). ``local_batch``
    (FasterTransformer ``getLocalBatchSize``): the local batch is b/pp when pp divides b, else
    b, then halved while even and above 1024 tokens; micro-batches = b / local batch."""
    if pp == 1:
        return 1
    if rule == "fill":
        return min(batch_size, pp)
    local = batch_size // pp if batch_size % pp == 0 else batch_size
    while local * seq_len > FT_LOCAL_BATCH_TOKENS and local % 2 == 0:
        local //= 2
    return batch_size // local


def _static(ctx: ServingContext, w: InferenceWorkload, micro_batching: MicroBatching = "fill"
            ) -> tuple[StepTime, StepTime, float]:
    """Static batch; with pp > 1 each phase is split into m micro-batches
    (``static_micro_batches``: the prompt of ``input_len`` tokens, decode of one), a step taking
    (m + pp − 1) slowest-stage times (GPipe, Huang et al. 2019); one micro-batch crosses the
    stages in turn (the sum of the stages)."""
    pp = ctx.strategy.pp
    kv_lens = w.input_len + np.arange(1, max(w.output_len, 2), dtype=float)
    m_prefill = static_micro_batches(w.batch_size, w.input_len, pp, micro_batching)
    m_decode = static_micro_batches(w.batch_size, 1, pp, micro_batching)
    if m_prefill == 1:
        prefill = _prefill(ctx, w.batch_size, w.input_len)
    else:
        b = w.batch_size / m_prefill
        passes = (AttentionPass(b, w.input_len, w.input_len, causal=True),)
        prefill = bottleneck_stage_time(ctx, b * w.input_len, passes, b, prefill=True).scaled(
            m_prefill + pp - 1)
    if m_decode == 1:
        decode = _decode(ctx, w.batch_size, kv_lens).mean()
    else:
        decode = _decode(ctx, w.batch_size / m_decode, kv_lens, bottleneck=True).mean().scaled(
            m_decode + pp - 1)
    return prefill, decode, float(prefill.total_s)


def _continuous(ctx: ServingContext, w: InferenceWorkload) -> tuple[StepTime, StepTime, float]:
    pp = ctx.strategy.pp
    batch = w.batch_size / pp
    new_prompt_tokens = batch * w.input_len / w.output_len
    passes = (AttentionPass(batch, 1, w.input_len + w.output_len / 2, causal=False),
              AttentionPass(new_prompt_tokens / w.input_len, w.input_len, w.input_len, True))
    tokens = batch + new_prompt_tokens
    # prefill overheads on the prompt tokens' share of the step only; the decode share runs as
    # a CUDA graph when ``cuda_graphs`` (piecewise graphs, vLLM V1 FULL_AND_PIECEWISE)
    share = new_prompt_tokens / tokens
    decode_part = bottleneck_stage_time(ctx, tokens, passes, batch, prefill=False)
    prefill_part = bottleneck_stage_time(ctx, tokens, passes, batch, prefill=True)
    step = decode_part.scaled(1.0 - share).plus(prefill_part.scaled(share))
    cycle = step.scaled(pp)
    ttft = math.ceil(w.input_len / w.prefill_chunk_tokens) * float(cycle.total_s)
    return cycle, cycle, ttft


def estimate_inference(
    model: ModelSpec,
    system: SystemSpec,
    strategy: Strategy | None = None,
    *,
    batch_size: int = 1,
    input_len: int = 128,
    output_len: int = 128,
    precision: str = "bf16",
    kv_precision: str | None = None,
    weight_precision: str | None = None,
    batching: str = "static",
    prefill_chunk_tokens: int = 2048,
    attention_dp: bool = False,
    cuda_graphs: bool = False,
    static_engine: str | None = None,
    offload: Offload | None = None,
    speculative: SpeculativeDecoding | None = None,
    kernel_backend: KernelBackendRef = KernelBackendName.ROOFLINE,
    calibration: Calibration | None = None,
) -> InferenceReport:
    """TTFT, TPOT, throughput, memory and max batch of serving ``model`` (no side effects).

    ``precision`` is the activation/GEMM format (bf16, fp16, fp8, fp4); ``weight_precision``
    defaults to it (int8/int4 = weight-only); ``kv_precision`` defaults to 16-bit.
    ``cuda_graphs`` replays decode steps as CUDA graphs (no host overhead per layer or step).
    The device time per kernel boundary of a replayed graph (``calibration.graph_replay``,
    charged on engine-simulated graphed steps) is not charged here: measured 2026-11-24, with
    the gap refitted per fold, it moves the static/batch-1 CV from 14.30% to 14.43% and
    gpt-fast (the static engine that graphs its decode step) from 12.8% to 15.5% (forecasts
    already slightly slow: Inductor fuses the pointwise ops the op graph counts as kernels).
    ``static_engine`` names a static-batching engine profile (``catalog.inference_engines``:
    fastertransformer, gpt-fast, tensorrt-llm-0.5, tensorrt-llm-0.7): its TP all-reduce, decode
    CUDA graphs, pipeline micro-batching and decode-attention kernel (GQA KV read once per group
    or once per query head) apply; None = one-shot all-reduce when faster, micro-batches that
    fill the pipeline, graphs only when ``cuda_graphs``, the fitted per-query-head KV reads.
    ``strategy`` defaults to one GPU; ``calibration`` (``perfcast.calibration.bundle``)
    replaces the shipped calibration (its serving overheads, dropless MoE routing imbalance
    and derived attention-kernel ratios, ``Calibration.with_kernels``); ``kernel_backend``: a registered
    name or a backend instance (e.g. a ``MeasuredBackend`` over a user's kernel table).
    """
    strategy = strategy or Strategy(num_gpus=1)
    sixteen = "fp16" if precision == "fp16" else "bf16"
    # the strings are checked against the precision and batching names by pydantic here
    prec = InferencePrecision.model_validate(dict(
        weights=weight_precision or precision, activations=precision,
        kv_cache=kv_precision or sixteen))
    workload = InferenceWorkload.model_validate(dict(
        batch_size=batch_size, input_len=input_len, output_len=output_len, batching=batching,
        prefill_chunk_tokens=prefill_chunk_tokens))
    offload = offload or Offload()
    _check(model, system, strategy, prec, attention_dp)
    calibration = calibration or load_calibration()
    backend = calibration.with_kernels(get_backend(kernel_backend))
    cal = calibration.inference_overheads
    memory, max_batch, weights = serving_memory(model, system, strategy, prec, workload,
                                                attention_dp, offload, speculative)
    if workload.batching == "continuous" and not offload.any and not attention_dp:
        max_batch = _paged_max_batch(model, system, strategy, prec, workload)
    profile = inference_engine(static_engine) if static_engine else None
    # the calibration's dropless learned-routing imbalance where the strategy states none
    routed = with_learned_imbalance(strategy, calibration.routing.dropless_load_imbalance.value)
    ctx = _context(model, system, routed, prec, attention_dp, offload, backend, cal, weights,
                   cuda_graphs or bool(profile and profile.decode_cuda_graphs),
                   profile.tp_all_reduce if profile else "custom",
                   bool(profile and profile.decode_attention_kernel == "grouped"))
    micro_batching = profile.pipeline_micro_batches if profile else "fill"
    if workload.batching == "continuous":
        prefill, decode, ttft = _continuous(ctx, workload)
    else:
        prefill, decode, ttft = _static(ctx, workload, micro_batching)
    speculation = None
    if speculative is not None:
        decode, speculation = _speculative(ctx, workload, speculative, backend, cal)
    tpot = float(decode.total_s)
    report = InferenceReport(
        model=model.name, system=system.name, gpu=system.gpu.name, strategy=strategy,
        workload=workload, precision=prec, attention_dp=attention_dp, offload=offload,
        ttft_s=ttft, tpot_s=tpot, prefill=prefill, decode=decode, memory=memory,
        max_batch_size=max_batch, speculation=speculation,
        kernel_backend=str(getattr(backend, "name", kernel_backend)),
        calibration_default=cal.uses_default(system.gpu.generation),
        calibration=replace(calibration.inference_status(system.gpu.generation),
                            stand_ins=calibration_stand_ins(backend, system.gpu)),
        assumptions=(
            "prefill and decode from the operator graph; roofline kernels with calibrated "
            "efficiencies; alpha-beta collectives",
            "decode attention reads the whole KV cache once per step; weights streamed once",
            "MoE decode reads only the experts hit (uniform routing)",
            "continuous batching: steady state, chunked prefill mixed into decode steps",
            "offloaded bytes cross PCIe/NVMe every step, overlapped with compute",
        ) + ((f"engine profile {profile.name}: TP all-reduce {profile.tp_all_reduce}, decode "
              f"CUDA graphs {profile.decode_cuda_graphs}, pipeline micro-batches "
              f"{profile.pipeline_micro_batches}, decode attention "
              f"{profile.decode_attention_kernel}",) if profile else ()),
    )
    bands = calibration.intervals
    if bands is None or not bands.serving.groups:
        return report
    return replace(report, interval=bands.serving.interval(
        system.gpu.generation, "any", "any", report.output_tokens_per_s_per_gpu, True,
        bands.level, bands.min_sources, bands.widen_factor))


def _speculative(ctx: ServingContext, w: InferenceWorkload, spec: SpeculativeDecoding,
                 backend, cal: InferenceOverheads) -> tuple[StepTime, SpeculationSummary]:
    """Per-token decode time with a draft model: (k·t_draft + t_verify(k + 1)) / E[tokens]."""
    k = spec.num_draft_tokens
    check_strategy_for_model(spec.draft_model, ctx.strategy)
    draft_ctx = _context(spec.draft_model, ctx.system, ctx.strategy, ctx.precision,
                         False, ctx.offload, backend, cal, 0.0, ctx.cuda_graphs,
                         ctx.tp_all_reduce, ctx.gqa_kv_read_exponent == 0.0)
    kv = float(w.input_len + w.output_len / 2)
    draft = _decode(draft_ctx, w.batch_size, kv)
    verify = _decode(ctx, w.batch_size, kv, queries=k + 1)
    tokens = expected_tokens_per_step(spec.acceptance_rate, k)
    per_token = draft.scaled(k).plus(verify).scaled(1.0 / tokens)
    summary = SpeculationSummary(
        draft_model=spec.draft_model.name, acceptance_rate=spec.acceptance_rate,
        num_draft_tokens=k, tokens_per_target_step=tokens,
        draft_step_s=float(draft.total_s), verify_step_s=float(verify.total_s))
    return per_token, summary


DEFAULT_CURVE_BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
"""Batch sizes of a throughput-vs-latency curve (powers of two, as serving benchmarks sweep)."""


class InferenceOptions(TypedDict, total=False):
    """Keyword arguments of ``estimate_inference`` other than ``batch_size`` (same names,
    types and defaults): what a curve or a simulated request stream holds fixed."""

    input_len: int
    output_len: int
    precision: str
    kv_precision: str | None
    weight_precision: str | None
    batching: str
    prefill_chunk_tokens: int
    attention_dp: bool
    cuda_graphs: bool
    static_engine: str | None
    offload: Offload | None
    speculative: SpeculativeDecoding | None
    kernel_backend: KernelBackendRef
    calibration: Calibration | None


def inference_curve(model: ModelSpec, system: SystemSpec, strategy: Strategy | None = None,
                    batch_sizes: Sequence[int] = DEFAULT_CURVE_BATCHES,
                    **options: Unpack[InferenceOptions]) -> InferenceCurve:
    """``estimate_inference`` at each batch size (other options fixed): the throughput-latency
    trade-off of batching (Pope et al. 2022 Fig. 1)."""
    reports = [estimate_inference(model, system, strategy, batch_size=b, **options)
               for b in batch_sizes]
    points = tuple(CurvePoint(
        batch_size=r.workload.batch_size, tpot_s=r.tpot_s, ttft_s=r.ttft_s,
        output_tokens_per_s_per_gpu=r.output_tokens_per_s_per_gpu,
        tokens_per_s_per_user=r.tokens_per_s_per_user, fits=r.fits) for r in reports)
    return InferenceCurve(base=reports[0], points=points)
