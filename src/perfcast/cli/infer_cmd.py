"""``perfcast infer``: TTFT, TPOT, throughput, memory and max batch of serving a model."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from perfcast.cli.errors import handle_input_errors
from perfcast.cli.options import (
    GPU_HELP,
    SERVING_KERNEL_BACKEND_OPT,
    SYSTEM_HELP,
    AttentionKernelOpt,
    CalibrationOption,
    DispatcherOpt,
    KernelBackendOption,
    KernelTableOption,
    strategy_dispatcher,
)

if TYPE_CHECKING:  # the command imports the estimator lazily (``perfcast --help`` stays light)
    from perfcast.estimate.inference import InferenceOptions
    from perfcast.estimate.inference_report import InferenceCurve, InferenceReport


class ActPrecisionOpt(str, Enum):
    bf16 = "bf16"
    fp16 = "fp16"
    fp8 = "fp8"
    fp4 = "fp4"


class WeightPrecisionOpt(str, Enum):
    bf16 = "bf16"
    fp16 = "fp16"
    fp8 = "fp8"
    fp4 = "fp4"
    int8 = "int8"
    int4 = "int4"


class KVPrecisionOpt(str, Enum):
    bf16 = "bf16"
    fp16 = "fp16"
    fp8 = "fp8"


class EngineOpt(str, Enum):
    vllm = "vllm"
    sglang = "sglang"
    tensorrt_llm = "tensorrt-llm"
    nim = "nim"
    atom = "atom"


class StaticEngineOpt(str, Enum):
    """Static-batching engine profiles (catalog/data/frameworks/inference/*.yaml)."""

    fastertransformer = "fastertransformer"
    gpt_fast = "gpt-fast"
    tensorrt_llm_0_5 = "tensorrt-llm-0.5"
    tensorrt_llm_0_7 = "tensorrt-llm-0.7"


class BatchingOpt(str, Enum):
    static = "static"
    continuous = "continuous"


def _opt(*names: str, help: str):
    return typer.Option(*names, help=help)


@handle_input_errors
def infer_command(
    model: Annotated[str, _opt("--model", "-m", help="Catalog name, HF config.json or YAML/JSON file.")],
    system: Annotated[str, _opt("--system", "-s", help=SYSTEM_HELP)] = "dgx-h100",
    gpu: Annotated[str | None, _opt("--gpu", help=GPU_HELP)] = None,
    gpus: Annotated[int | None, _opt(
        "--gpus", "-g", help="Total GPUs (default tp*pp; more = DP replicas).")] = None,
    tp: Annotated[int, _opt("--tp", "--tensor-model-parallel-size", help="Tensor-parallel size.")] = 1,
    pp: Annotated[int, _opt("--pp", "--pipeline-model-parallel-size", help="Pipeline-parallel size.")] = 1,
    ep: Annotated[int, _opt(
        "--ep", "--expert-model-parallel-size", help="Expert-parallel size (inside the TP group).")] = 1,
    moe_token_dispatcher: Annotated[DispatcherOpt, _opt(
        "--moe-token-dispatcher-type", "--moe-token-dispatcher",
        help="MoE dispatch; deepep-low-latency: DeepEP's pure-RDMA decode kernels "
             "(prefill uses DeepEP's normal kernels).")] = DispatcherOpt.alltoall,
    batch_size: Annotated[int, _opt("--batch-size", "-b", help="Concurrent sequences per replica.")] = 1,
    input_len: Annotated[int, _opt("--input-len", help="Prompt tokens per sequence.")] = 128,
    output_len: Annotated[int, _opt("--output-len", help="Generated tokens per sequence.")] = 128,
    precision: Annotated[ActPrecisionOpt, _opt(
        "--precision", help="Activation/GEMM format (fp8/fp4: W+A).")] = ActPrecisionOpt.bf16,
    weight_precision: Annotated[WeightPrecisionOpt | None, _opt(
        "--weight-precision", help="Weight format (int8/int4 = weight-only); default = --precision.")] = None,
    kv_precision: Annotated[KVPrecisionOpt | None, _opt(
        "--kv-precision", help="KV-cache format (default 16-bit).")] = None,
    batching: Annotated[BatchingOpt, _opt(
        "--batching", help="static or continuous (steady state, chunked prefill).")] = BatchingOpt.static,
    prefill_chunk: Annotated[int, _opt(
        "--prefill-chunk", help="Chunked-prefill tokens per step (continuous).")] = 2048,
    cuda_graphs: Annotated[bool, _opt(
        "--cuda-graphs", help="Decode steps replayed as CUDA graphs (no host overhead).")] = False,
    static_engine: Annotated[StaticEngineOpt | None, _opt(
        "--static-engine", help="Static-batching engine profile: its TP all-reduce (NCCL or "
        "custom), decode CUDA graphs, pipeline micro-batching and GQA decode-attention "
        "kernel (KV read per query head or per group).")] = None,
    attention_dp: Annotated[bool, _opt(
        "--attention-dp", help="Attention data-parallel inside the TP group (MLA models).")] = False,
    offload_weights: Annotated[float, _opt(
        "--offload-weights", help="Share of weights in host memory.")] = 0.0,
    offload_kv: Annotated[float, _opt("--offload-kv", help="Share of the KV cache in host memory.")] = 0.0,
    offload_activations: Annotated[float, _opt(
        "--offload-activations", help="Share of activations in host memory.")] = 0.0,
    offload_disk_weights: Annotated[float, _opt(
        "--offload-disk-weights", help="Share of weights on NVMe.")] = 0.0,
    draft_model: Annotated[str | None, _opt(
        "--draft-model", help="Draft model for speculative decoding.")] = None,
    acceptance_rate: Annotated[float, _opt(
        "--acceptance-rate", help="Per-token acceptance rate of the draft.")] = 0.7,
    num_draft_tokens: Annotated[int, _opt("--num-draft-tokens", help="Draft tokens per target step.")] = 4,
    curve: Annotated[bool, _opt("--curve", help="Throughput vs latency over batch sizes 1..512.")] = False,
    plot: Annotated[Path | None, _opt(
        "--plot", help="Write the curve as a PNG/SVG (implies --curve).")] = None,
    concurrency: Annotated[int | None, _opt(
        "--concurrency", help="Simulate a closed-loop client with this many requests in flight.")] = None,
    request_rate: Annotated[float | None, _opt(
        "--request-rate", help="Simulate Poisson arrivals at this many requests/s.")] = None,
    offline: Annotated[bool, _opt(
        "--offline", help="Simulate offline max throughput (all requests queued at once).")] = False,
    num_requests: Annotated[int | None, _opt(
        "--num-requests", help="Requests in the simulated run (default 10 x concurrency, min 100).")] = None,
    length_range_ratio: Annotated[float, _opt(
        "--length-range-ratio", help="Sample lengths uniformly in [ratio*L, L]; 1 = fixed.")] = 1.0,
    warmup_requests: Annotated[int, _opt(
        "--warmup-requests", help="First requests left out of the latency statistics (e.g. the "
        "concurrency: the closed loop's start-up burst).")] = 0,
    arrival_draws: Annotated[int | None, _opt(
        "--arrival-draws", help="Poisson arrival sequences averaged with --request-rate (the "
        "expected statistics of one run; default 8).")] = None,
    length_samples: Annotated[Path | None, _opt(
        "--length-samples", help="Draw request lengths from a saved benchmark result (JSON "
        "with input_lens and output_lens, vLLM benchmark_serving --save-result); replaces "
        "--input-len/--output-len.")] = None,
    engine: Annotated[EngineOpt, _opt(
        "--engine", help="Serving engine profile of the simulation.")] = EngineOpt.vllm,
    engine_version: Annotated[str | None, _opt(
        "--engine-version", help="Engine version whose defaults apply (default: latest).")] = None,
    scheduler_recv_interval: Annotated[int | None, _opt(
        "--scheduler-recv-interval", "--num-scheduler-steps",
        help="Decode steps between the scheduler's reads of new requests (SGLang "
        "--scheduler-recv-interval, vLLM V0 --num-scheduler-steps; default: the engine's, "
        "1).")] = None,
    attention_kernel: Annotated[AttentionKernelOpt, _opt(
        "--attention-kernel", help="Prefill flash-attention kernel: auto (the GPU's own), fa2 "
        "or triton (timed as FA2 x the calibration's attention_kernels.yaml ratio).")
    ] = AttentionKernelOpt.auto,
    kernel_backend: KernelBackendOption = SERVING_KERNEL_BACKEND_OPT,
    kernel_table: KernelTableOption = None,
    calibration: CalibrationOption = None,
    json: Annotated[bool, _opt("--json", help="Print one JSON object.")] = False,
) -> None:
    """Forecast serving: TTFT, TPOT, throughput per GPU, memory and the largest batch that fits."""
    from perfcast.calibration.bundle import load_calibration
    from perfcast.catalog.models import load_model
    from perfcast.catalog.systems import load_system
    from perfcast.cli.build import kernel_backend as make_backend
    from perfcast.cli.paths import check_output_file
    from perfcast.errors import InputError
    from perfcast.estimate.inference import estimate_inference, inference_curve
    from perfcast.specs.inference import Offload, SpeculativeDecoding
    from perfcast.specs.limits import (
        MAX_BATCH_SEQUENCES,
        MAX_GENERATED_TOKENS,
        MAX_GPUS,
        MAX_SEQ_LENGTH,
        check_positive,
        check_request_lengths,
    )
    from perfcast.specs.strategy import Strategy

    check_output_file("plot", plot)
    for name, value in (("tp", tp), ("pp", pp), ("ep", ep)):
        check_positive(name, value, MAX_GPUS)
    check_positive("batch_size", batch_size, MAX_BATCH_SEQUENCES)
    check_request_lengths(input_len, output_len)
    check_positive("prefill_chunk", prefill_chunk, MAX_SEQ_LENGTH)
    check_positive("num_draft_tokens", num_draft_tokens, MAX_GENERATED_TOKENS)
    if gpus is not None:
        check_positive("gpus", gpus, MAX_GPUS)
    if scheduler_recv_interval is not None:
        check_positive("scheduler_recv_interval", scheduler_recv_interval, MAX_GENERATED_TOKENS)
    if ep > 1 and tp % ep != 0:
        raise InputError("ep", ep, f"must divide tp={tp} (experts are split inside the TP group)")
    spec = load_model(model)
    num_gpus = gpus if gpus is not None else tp * pp
    strategy = Strategy(num_gpus=num_gpus, tp=tp, pp=pp, ep=ep, etp=tp // ep if ep > 1 else None,
                        moe_token_dispatcher=strategy_dispatcher(moe_token_dispatcher.value),
                        attention_kernel=attention_kernel.value)
    options: InferenceOptions = {
        "input_len": input_len, "output_len": output_len, "precision": precision.value,
        "weight_precision": weight_precision.value if weight_precision else None,
        "kv_precision": kv_precision.value if kv_precision else None,
        "batching": batching.value, "prefill_chunk_tokens": prefill_chunk,
        "attention_dp": attention_dp, "cuda_graphs": cuda_graphs,
        "static_engine": static_engine.value if static_engine else None,
        "offload": Offload(weights_cpu=offload_weights, weights_disk=offload_disk_weights,
                           kv_cpu=offload_kv, activations_cpu=offload_activations),
        "speculative": SpeculativeDecoding(
            draft_model=load_model(draft_model), acceptance_rate=acceptance_rate,
            num_draft_tokens=num_draft_tokens) if draft_model else None,
        "kernel_backend": make_backend(kernel_backend.value, kernel_table),
        "calibration": load_calibration(calibration),
    }
    hardware = load_system(system, num_gpus=num_gpus, gpu=gpu)
    if concurrency is not None or request_rate is not None or offline:
        from perfcast.cli.serving_run import run_serving

        if static_engine is not None:
            raise InputError("static_engine", static_engine.value, "applies to one static batch; "
                             "a simulated request stream uses --engine")
        run_serving(spec, hardware, strategy, options, concurrency=concurrency,
                    request_rate=request_rate, offline=offline, num_requests=num_requests,
                    input_len=input_len, output_len=output_len,
                    length_range_ratio=length_range_ratio, warmup_requests=warmup_requests,
                    arrival_draws=arrival_draws, length_samples=length_samples,
                    engine=engine.value, engine_version=engine_version,
                    scheduler_recv_interval=scheduler_recv_interval, json=json)
        return
    if scheduler_recv_interval is not None:
        raise InputError("scheduler_recv_interval", scheduler_recv_interval, "applies to a "
                         "simulated request stream (--concurrency, --request-rate, --offline)")
    if curve or plot is not None:
        _print_curve(inference_curve(spec, hardware, strategy, **options), plot, json)
    else:
        _print_report(estimate_inference(spec, hardware, strategy, batch_size=batch_size,
                                         **options), json)


def _print_curve(curve: InferenceCurve, plot: Path | None, json: bool) -> None:
    """The throughput-latency curve as JSON or a table (and its plot when asked)."""
    if plot is not None:
        from perfcast.report.inference_plot import plot_curve

        plot_curve(curve, plot)
    if json:
        from perfcast.report.json_out import to_json

        print(to_json(curve.to_dict()))
        return
    from perfcast.report.console import make_console
    from perfcast.report.inference_text import render_curve

    console = make_console()
    render_curve(curve, console)
    if plot is not None:
        console.print(f"plot written to {plot}")


def _print_report(report: InferenceReport, json: bool) -> None:
    """One forecast as JSON, or its fit verdict and tables."""
    if json:
        from perfcast.report.json_out import to_json

        print(to_json(report.to_dict()))
        return
    from perfcast.memory.fit_advice import inference_fit_verdict
    from perfcast.report.console import make_console
    from perfcast.report.inference_text import render_inference

    console = make_console()
    console.print(inference_fit_verdict(report), highlight=False, soft_wrap=True)
    render_inference(report, console)
