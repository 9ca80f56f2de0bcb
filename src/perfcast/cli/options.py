"""Command-line options shared by the forecasting commands (memory, train, ...).

Flag names follow Megatron-LM where one exists; short forms (``--tp``) and Megatron long forms
(``--tensor-model-parallel-size``) are aliases. ``run_options`` appends these options to a
command's signature and hands the command one typed ``RunArgs`` instead of 25 arguments.
"""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:  # specs import pydantic; option parsing for --help stays light
    from perfcast.specs.strategy import MoeTokenDispatcher


class RecomputeOpt(str, Enum):
    none = "none"
    selective = "selective"
    full = "full"


class PrecisionOpt(str, Enum):
    bf16 = "bf16"
    fp16 = "fp16"
    fp8 = "fp8"


class FP8RecipeOpt(str, Enum):
    tensorwise = "tensorwise"
    delayed = "delayed"
    rowwise = "rowwise"
    rowwise_hp_wgrad = "rowwise-hp-wgrad"
    blockwise = "blockwise"
    mxfp8 = "mxfp8"
    nvfp4 = "nvfp4"


class FP8ScopeOpt(str, Enum):
    all = "all"
    linear = "linear"
    grouped = "grouped"


class DispatcherOpt(str, Enum):
    alltoall = "alltoall"
    deepep = "deepep"
    flex = "flex"
    deepep_low_latency = "deepep-low-latency"


class FlexBackendOpt(str, Enum):
    """Megatron ``--moe-flex-dispatcher-backend`` (frameworks.md §1.4; default deepep)."""

    deepep = "deepep"
    hybridep = "hybridep"


_STRATEGY_DISPATCHERS: dict[str, MoeTokenDispatcher] = {
    "alltoall": "alltoall", "deepep": "deepep", "hybridep": "hybridep",
    "deepep-low-latency": "deepep-low-latency"}
"""Option value -> ``Strategy.moe_token_dispatcher`` (flex resolves to its backend first)."""


def strategy_dispatcher(value: str, flex_backend: str = "deepep") -> MoeTokenDispatcher:
    """``Strategy.moe_token_dispatcher`` of a ``--moe-token-dispatcher-type`` value: Megatron's
    'flex' dispatcher runs its ``--moe-flex-dispatcher-backend`` (DeepEP or HybridEP)."""
    name = flex_backend if value == DispatcherOpt.flex.value else value
    if name not in _STRATEGY_DISPATCHERS:
        from perfcast.errors import InputError

        raise InputError("moe_token_dispatcher", name,
                         f"choose one of {', '.join(_STRATEGY_DISPATCHERS)}")
    return _STRATEGY_DISPATCHERS[name]


class CpCommTypeOpt(str, Enum):
    """``Strategy.cp_comm_type`` (Megatron-Core ``--cp-comm-type``)."""

    p2p = "p2p"
    all_gather = "all_gather"
    a2a = "a2a"
    a2a_p2p = "a2a+p2p"


class CpImplementationOpt(str, Enum):
    """``Strategy.cp_implementation`` (``graph.torch_context_parallel``)."""

    transformer_engine = "transformer-engine"
    torch = "torch"


class CudaGraphsOpt(str, Enum):
    """``Strategy.cuda_graphs`` scopes (``perfcast.schedule.host_time``)."""

    none = "none"
    attention = "attention"
    moe = "moe"
    full = "full"


class AttentionKernelOpt(str, Enum):
    """``Strategy.attention_kernel`` classes (``perfcast.kernels.attention_kernels``)."""

    auto = "auto"
    fa2 = "fa2"
    triton = "triton"


class GradDtypeOpt(str, Enum):
    fp32 = "fp32"
    bf16 = "bf16"


class KernelBackendOpt(str, Enum):
    """Registered kernel backends (``perfcast.kernels.backend.KernelBackendName``)."""

    roofline = "roofline"
    analytical = "analytical"
    measured = "measured"


DEFAULT_KERNEL_BACKEND_OPT = KernelBackendOpt.analytical
"""``perfcast.kernels.backend.DEFAULT_KERNEL_BACKEND``, mirrored here so ``--help`` imports no
numpy (tests/test_kernels_speed_paths.py checks they agree)."""

KernelBackendOption = Annotated[KernelBackendOpt, typer.Option(
    "--kernel-backend", help="Kernel time model: roofline, analytical (tile/wave) or measured.")]

SERVING_KERNEL_BACKEND_OPT = KernelBackendOpt.roofline
"""Kernel backend of the serving forecasts when none is named (``estimate_serving``,
``estimate_inference`` and ``serving_search.sweep.SERVING_KERNEL_BACKEND``; a test checks)."""

KernelTableOption = Annotated[Path | None, typer.Option(
    "--kernel-table",
    help="Kernel table CSV for --kernel-backend measured (perfcast profile writes one).")]
CalibrationOption = Annotated[Path | None, typer.Option(
    "--calibration", help="Calibration directory written by `perfcast calibrate --out DIR` "
    "(files it lacks: the shipped ones).")]
GpuClockOption = Annotated[float | None, typer.Option(
    "--gpu-clock-mhz", min=1.0, help="Override the GPU's sustained matrix clock (MHz).")]


@dataclass(frozen=True)
class RunArgs:
    """Everything the user said about model, system, strategy and workload."""

    model: str
    system: str
    gpu: str | None
    gpus: int | None
    tp: int
    pp: int
    vpp: int
    tp2d: str | None
    cp: int
    cp_comm_type: str
    cp_implementation: str
    hierarchical_cp_sizes: str | None
    ep: int
    etp: int | None
    pipeline_layout: str | None
    first_stage_layers: int | None
    last_stage_layers: int | None
    account_for_embedding: bool
    account_for_loss: bool
    micro_batch_size: int
    global_batch_size: int | None
    seq_length: int
    recompute: str
    recompute_num_layers: int | None
    recompute_modules: str | None
    cpu_offload_layers: int
    offload_modules: str | None
    sequence_parallel: bool
    zero_stage: int
    fsdp: bool
    distributed_optimizer: bool
    precision_aware_optimizer: bool
    store_param_remainders: bool
    exp_avg_dtype: str
    exp_avg_sq_dtype: str
    fp8_param: bool
    fp8_moe_act_inputs: bool
    precision: str
    fp8_recipe: str
    fp8_fused_casts: bool
    fp8_weight_cache: bool
    overlap_grad_reduce: bool
    fp8_tp_gather: bool
    fp8_gemm_scope: str
    num_layers_at_start_in_bf16: int
    num_layers_at_end_in_bf16: int
    grad_reduce_dtype: str
    no_flash_attention: bool
    no_torch_compile: bool
    attention_kernel: str
    mtp_num_layers: int
    make_vocab_size_divisible_by: int
    moe_token_dispatcher: str
    moe_flex_backend: str
    moe_load_imbalance: float | None
    moe_grouped_gemm: bool
    moe_permute_fusion: bool
    moe_router_fusion: bool
    moe_capacity_factor: float | None
    moe_pad_to_capacity: bool
    moe_force_balance: bool
    gpu_clock_mhz: float | None
    placement_order: str
    tp_comm_overlap: bool
    ep_overlap: bool
    cuda_graphs: str
    delay_wgrad_compute: bool
    json: bool
    framework: str | None = None
    """``--framework NAME[@VERSION]``: a training framework profile whose defaults fill every
    strategy option not given on the command line."""
    explicit: frozenset[str] = frozenset()
    """Names of the options the user gave on the command line (not defaults)."""


SYSTEM_HELP = ("Catalog system or GPU name (perfcast systems), or your own system/GPU YAML file "
               "(perfcast catalog template system|gpu).")
GPU_HELP = ("Put this GPU in the system (catalog GPU name or GPU YAML file); the system's "
            "topology and bandwidths stay.")

_OPTIONS: list[tuple[str, object, object]] = [
    ("model", str, typer.Option(..., "--model", "-m", help="Catalog name, HF config.json or YAML/JSON file.")),
    ("system", str, typer.Option("dgx-h100", "--system", "-s", help=SYSTEM_HELP)),
    ("gpu", str | None, typer.Option(None, "--gpu", help=GPU_HELP)),
    ("gpus", int | None, typer.Option(None, "--gpus", "-g", help="Total GPUs (default tp*pp*cp).")),
    ("tp", int, typer.Option(1, "--tp", "--tensor-model-parallel-size", help="Tensor-parallel size.")),
    ("pp", int, typer.Option(1, "--pp", "--pipeline-model-parallel-size", help="Pipeline-parallel size.")),
    ("vpp", int, typer.Option(1, "--vpp", "--virtual-pipeline-model-parallel-size", help="Model chunks per pipeline rank.")),
    ("cp", int, typer.Option(1, "--cp", "--context-parallel-size", help="Context-parallel size.")),
    ("tp2d", str | None, typer.Option(None, "--tp2d", help="2D tensor parallelism (TP-SP over a ROWSxCOLS grid, e.g. 2x4; sets tp = rows*cols, needs --sequence-parallel; NERSC model, no listed framework runs it).")),
    ("cp_comm_type", CpCommTypeOpt, typer.Option(CpCommTypeOpt.p2p, "--cp-comm-type", help="Context-parallel attention communication: p2p (ring, overlapped), all_gather (K/V gathered, exposed), a2a (DeepSpeed-Ulysses all-to-all; heads per TP rank divisible by cp) or a2a+p2p (a2a inside, ring across; give --hierarchical-context-parallel-sizes).")),
    ("cp_implementation", CpImplementationOpt, typer.Option(CpImplementationOpt.transformer_engine, "--cp-implementation", help="Who runs the ring attention: transformer-engine (Megatron-Core) or torch (PyTorch context_parallel, torchtitan's: K/V gathered once, fp32 merges by eager ops); a --framework sets it.")),
    ("hierarchical_cp_sizes", str | None, typer.Option(None, "--hierarchical-context-parallel-sizes", help="With --cp-comm-type a2a+p2p: 'A,P' ranks of the inner a2a and the outer ring level (A*P = cp).")),
    ("ep", int, typer.Option(1, "--ep", "--expert-model-parallel-size", help="Expert-parallel size.")),
    ("etp", int | None, typer.Option(None, "--etp", "--expert-tensor-parallel-size", help="Expert tensor-parallel size (default tp).")),
    ("pipeline_layout", str | None, typer.Option(None, "--pipeline-layout", "--pipeline-model-parallel-layout", help="Megatron layout string, one '|'-separated segment per virtual stage (E embedding, t layer, m MTP, L loss; x*N, (..)*N repeat), e.g. 'Et|(tt|)*30L'.")),
    ("first_stage_layers", int | None, typer.Option(None, "--decoder-first-pipeline-num-layers", min=0, help="Layers on the first pipeline stage (others split the rest).")),
    ("last_stage_layers", int | None, typer.Option(None, "--decoder-last-pipeline-num-layers", min=0, help="Layers on the last pipeline stage (others split the rest).")),
    ("account_for_embedding", bool, typer.Option(False, "--account-for-embedding-in-pipeline-split", help="Count the embedding as a layer in the pipeline split.")),
    ("account_for_loss", bool, typer.Option(False, "--account-for-loss-in-pipeline-split", help="Count the loss as a layer in the pipeline split.")),
    ("micro_batch_size", int, typer.Option(1, "--micro-batch-size", "--mbs", help="Sequences per micro-batch.")),
    ("global_batch_size", int | None, typer.Option(None, "--global-batch-size", "--gbs", help="Sequences per step (default micro-batch * dp * pp).")),
    ("seq_length", int, typer.Option(4096, "--seq-length", "--seq-len", help="Tokens per sequence.")),
    ("recompute", RecomputeOpt, typer.Option(RecomputeOpt.none, "--recompute", "--recompute-granularity", help="Activation recomputation.")),
    ("recompute_num_layers", int | None, typer.Option(None, "--recompute-num-layers", help="Layers per stage recomputed with --recompute full.")),
    ("recompute_modules", str | None, typer.Option(None, "--recompute-modules", help="Selective recompute modules, comma or space separated: core_attn, mlp, moe, shared_experts, moe_act, layernorm, mla_up_proj, or op_sac alone (torchtitan per-op SAC: saves attention and every 2nd matmul, recomputes the rest) (implies --recompute selective; default core_attn).")),
    ("cpu_offload_layers", int, typer.Option(0, "--cpu-offload-activations", "--cpu-offloading-num-layers", min=0, help="Layers per stage whose activations are offloaded to host memory over PCIe / NVLink-C2C (pp 1, no recompute).")),
    ("offload_modules", str | None, typer.Option(None, "--offload-modules", help="Fine-grained activation offloading, comma or space separated: attn_norm, qkv_linear, core_attn, attn_proj, mlp_norm, expert_fc1, moe_act.")),
    ("sequence_parallel", bool, typer.Option(False, "--sequence-parallel/--no-sequence-parallel", help="Megatron sequence parallelism.")),
    ("zero_stage", int, typer.Option(0, "--zero-stage", min=0, max=3, help="ZeRO stage 0-3.")),
    ("fsdp", bool, typer.Option(False, "--fsdp/--no-fsdp", help="FSDP full sharding (= ZeRO-3).")),
    ("distributed_optimizer", bool, typer.Option(False, "--use-distributed-optimizer/--no-distributed-optimizer", "--distributed-optimizer", help="Shard optimizer states over DP.")),
    ("precision_aware_optimizer", bool, typer.Option(False, "--use-precision-aware-optimizer", help="Master weights as 16-bit remainders beside bf16 weights; moments in --exp-avg-dtype/--exp-avg-sq-dtype.")),
    ("store_param_remainders", bool, typer.Option(True, "--store-param-remainders/--no-store-param-remainders", help="Precision-aware optimizer: master weights as 16-bit remainders of the bf16 weights (default) or full fp32.")),
    ("exp_avg_dtype", GradDtypeOpt, typer.Option(GradDtypeOpt.fp32, "--exp-avg-dtype", help="Adam first-moment dtype (bf16 needs --use-precision-aware-optimizer).")),
    ("exp_avg_sq_dtype", GradDtypeOpt, typer.Option(GradDtypeOpt.fp32, "--exp-avg-sq-dtype", help="Adam second-moment dtype (bf16 needs --use-precision-aware-optimizer).")),
    ("fp8_param", bool, typer.Option(False, "--fp8-param-gather", "--fp8-param", help="Keep linear-layer weights in FP8 and all-gather them in FP8 (needs --fp8 and a sharded optimizer).")),
    ("fp8_moe_act_inputs", bool, typer.Option(False, "--fp8-moe-act-inputs", help="FP8: cache the MoE SwiGLU inputs in FP8 for backward (DeepSeek-V3 §3.3.2; pair with --recompute-modules moe_act).")),
    ("precision", PrecisionOpt, typer.Option(PrecisionOpt.bf16, "--precision", help="GEMM precision.")),
    ("fp8", bool, typer.Option(False, "--fp8/--no-fp8", help="Same as --precision fp8.")),
    ("fp8_recipe", FP8RecipeOpt, typer.Option(FP8RecipeOpt.tensorwise, "--fp8-recipe", help="FP8 scaling recipe (nvfp4: FP4 GEMMs, Blackwell).")),
    ("fp8_fused_casts", bool, typer.Option(True, "--fp8-fused-casts/--no-fp8-fused-casts", help="FP8: fuse input casts into the preceding norm/activation.")),
    ("fp8_weight_cache", bool, typer.Option(True, "--fp8-weight-cache/--no-fp8-weight-cache", help="FP8: cast weights once per step, not per micro-batch.")),
    ("overlap_grad_reduce", bool, typer.Option(True, "--overlap-grad-reduce/--no-overlap-grad-reduce", help="DDP / distributed optimizer: reduce gradients during the backward (per model chunk when interleaved) and gather parameters during the forward; off = after the backward, exposed.")),
    ("fp8_tp_gather", bool, typer.Option(False, "--fp8-tp-gather/--no-fp8-tp-gather", help="FP8 with sequence parallelism: TP all-gathers carry FP8, shards cast before the gather (torchao float8 TP; tensorwise or delayed recipe).")),
    ("fp8_gemm_scope", FP8ScopeOpt, typer.Option(FP8ScopeOpt.all, "--fp8-gemm-scope", help="FP8/FP4: GEMMs the recipe converts: all, linear (routed experts stay BF16; torchtitan quantize.linear.mx) or grouped (only the routed experts' grouped GEMMs; quantize.grouped_mm.mx).")),
    ("num_layers_at_start_in_bf16", int, typer.Option(0, "--num-layers-at-start-in-bf16", min=0, help="FP8/FP4: the first N decoder layers keep BF16 GEMMs (Megatron-Core --first-last-layers-bf16).")),
    ("num_layers_at_end_in_bf16", int, typer.Option(0, "--num-layers-at-end-in-bf16", min=0, help="FP8/FP4: the last N decoder layers keep BF16 GEMMs (Megatron-Core --first-last-layers-bf16).")),
    ("grad_reduce_dtype", GradDtypeOpt, typer.Option(GradDtypeOpt.fp32, "--grad-reduce-dtype", help="Main-gradient dtype.")),
    ("no_flash_attention", bool, typer.Option(False, "--no-flash-attention/--flash-attention", help="Unfused attention (stores s x s scores); --flash-attention forces fused attention over a --framework default.")),
    ("no_torch_compile", bool, typer.Option(False, "--no-torch-compile/--torch-compile", help="PyTorch eager element-wise ops: RMSNorm, SwiGLU and RoPE one kernel per op through HBM (torchtitan's default); --torch-compile forces fused ones over a --framework default.")),
    ("attention_kernel", AttentionKernelOpt, typer.Option(AttentionKernelOpt.auto, "--attention-kernel", help="Fused-attention kernel: auto (the GPU's own: FA2 Ampere, FA3/cuDNN Hopper, cuDNN Blackwell), fa2 (FlashAttention-2, PyTorch SDPA) or triton (FlashAttention Triton).")),
    ("make_vocab_size_divisible_by", int, typer.Option(128, "--make-vocab-size-divisible-by", min=1, help="Pad the vocabulary to a multiple of this times tp (Megatron-LM).")),
    ("mtp_num_layers", int, typer.Option(0, "--mtp-num-layers", min=0, help="Multi-token prediction modules trained with the model (DeepSeek-V3: 1).")),
    ("moe_token_dispatcher", DispatcherOpt, typer.Option(DispatcherOpt.alltoall, "--moe-token-dispatcher-type", "--moe-token-dispatcher", help="MoE dispatch: NCCL all-to-all, or DeepEP (node-deduplicated; Megatron 'flex'); deepep-low-latency is serving-only.")),
    ("moe_flex_backend", FlexBackendOpt, typer.Option(FlexBackendOpt.deepep, "--moe-flex-dispatcher-backend", help="Backend of --moe-token-dispatcher-type flex: deepep (NVLink inside a node, RDMA across) or hybridep (the whole NVLink domain, NVL72 included).")),
    ("moe_load_imbalance", float | None, typer.Option(None, "--moe-load-imbalance", min=1.0, help="MoE: tokens at the busiest expert rank over the mean (1 = balanced; default: the measured imbalance of dropless learned routing with EP > 1, 1 under forced balancing).")),
    ("moe_grouped_gemm", bool, typer.Option(True, "--moe-grouped-gemm/--no-moe-grouped-gemm", help="MoE: local experts as one grouped GEMM, or one GEMM per expert.")),
    ("moe_permute_fusion", bool, typer.Option(True, "--moe-permute-fusion/--no-moe-permute-fusion", help="MoE: fused token permute/unpermute (off: PyTorch kernels, Megatron-Core's default without the flag).")),
    ("moe_router_fusion", bool, typer.Option(True, "--moe-router-fusion/--no-moe-router-fusion", help="MoE: fused router top-k and aux-loss scores (off: separate PyTorch kernels).")),
    ("moe_capacity_factor", float | None, typer.Option(None, "--moe-expert-capacity-factor", "--moe-capacity-factor", help="MoE: expert capacity over the balanced load; tokens beyond it dropped (default dropless).")),
    ("moe_pad_to_capacity", bool, typer.Option(False, "--moe-pad-expert-input-to-capacity", help="MoE: pad every expert's input to its capacity (needs --moe-expert-capacity-factor).")),
    ("moe_force_balance", bool, typer.Option(False, "--moe-router-force-load-balancing", help="MoE: perfectly balanced routing (benchmark mode); overrides --moe-load-imbalance.")),
    ("gpu_clock_mhz", float | None, typer.Option(None, "--gpu-clock-mhz", min=1.0, help="Override the GPU's sustained matrix clock (MHz); scales compute throughput.")),
    ("placement_order", str, typer.Option("tp-cp-ep-dp-pp", "--placement-order", help="Rank order of parallel groups, innermost first (Megatron-LM default).")),
    ("tp_comm_overlap", bool, typer.Option(False, "--tp-comm-overlap/--no-tp-comm-overlap", help="Overlap TP communication with GEMMs.")),
    ("ep_overlap", bool, typer.Option(False, "--ep-overlap/--no-ep-overlap", "--overlap-moe-expert-parallel-comm", help="Overlap EP all-to-all with another micro-batch.")),
    ("framework", str | None, typer.Option(None, "--framework", help="Training framework profile NAME[@VERSION] (megatron-core, megatron-lm, torchtitan, llm-foundry, deepspeed, pytorch-fsdp, analytical; aliases such as 'NeMo 25.07', megatron-bridge, 'NeMo AutoModel'): its defaults fill every option not given; the report lists each assumption.")),
    ("cuda_graphs", CudaGraphsOpt, typer.Option(CudaGraphsOpt.none, "--cuda-graphs", help="CUDA-graph scope: none, attention, moe (padded routing, no host sync) or full; captured kernels cost one host launch per region.")),
    ("delay_wgrad_compute", bool, typer.Option(False, "--delay-wgrad-compute", help="Defer weight-gradient GEMMs under the EP all-to-all (needs --overlap-moe-expert-parallel-comm).")),
    ("json", bool, typer.Option(False, "--json", help="Print one JSON object.")),
]


def _value(v):
    return v.value if isinstance(v, Enum) else v


def _explicit_options(ctx: typer.Context | None) -> frozenset[str]:
    """Shared options given on the command line (or environment), not left at their default
    (the parameter source click records for the running command)."""
    if ctx is None:
        return frozenset()
    given = {"COMMANDLINE", "ENVIRONMENT"}
    return frozenset(name for name, _, _ in _OPTIONS
                     if getattr(ctx.get_parameter_source(name), "name", None) in given)


def run_options(command):
    """Decorator: add the shared options to ``command`` and pass them as ``args: RunArgs``."""
    own = [p for name, p in inspect.signature(command, eval_str=True).parameters.items()
           if name != "args"]
    extra = [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=ann)
        for name, ann, default in _OPTIONS
    ]

    @functools.wraps(command)
    def wrapper(**kwargs):
        explicit = _explicit_options(kwargs.pop("ctx", None))
        shared = {name: _value(kwargs.pop(name)) for name, _, _ in _OPTIONS}
        if shared.pop("fp8"):
            shared["precision"] = "fp8"
        if "fp8" in explicit:
            explicit = explicit | {"precision"}
        return command(args=RunArgs(**shared, explicit=explicit), **kwargs)

    context = inspect.Parameter("ctx", inspect.Parameter.KEYWORD_ONLY, annotation=typer.Context)
    wrapper.__signature__ = inspect.Signature(own + extra + [context])
    return wrapper
