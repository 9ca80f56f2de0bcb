"""Strategy: how a training run is parallelized and executed (Megatron-LM vocabulary).

The global batch belongs to the ``Workload`` (what is trained); the strategy holds the
micro-batch size and everything else about *how*. Rank layout is tp innermost, then cp, dp, pp
(Megatron-LM's default order).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from perfcast.specs.limits import (
    MAX_GPUS,
    MAX_MICRO_BATCH_SIZE,
    MAX_MOE_LOAD_IMBALANCE,
    MAX_PARALLEL_SIZE,
)
from perfcast.specs.pipeline_layout import parse_pipeline_layout

Recompute = Literal["none", "selective", "full"]
RecomputeModule = Literal["core_attn", "mlp", "moe", "shared_experts", "moe_act", "layernorm",
                          "mla_up_proj", "op_sac"]
"""Megatron-Core ``--recompute-modules`` (frameworks.md §1.3): core attention; dense MLP; whole
MoE layer; shared experts; MoE activation function, layer norms and MLA up-projection + RoPE
(output-discarding: their outputs are dropped after use and rebuilt in backward). ``op_sac`` is
torchtitan's per-op selective activation checkpointing (``activation_checkpoint.mode =
"selective"``, ``selective_ac_option = "op"``; frameworks.md §3): the attention (SDPA) outputs
and every second matmul's output are saved, the other matmuls and all element-wise ops
recomputed (``graph.recompute_modules.op_sac_gemm_shares``); a whole-layer policy, used alone."""
TrainPrecision = Literal["bf16", "fp16", "fp8"]
FP8Recipe = Literal["tensorwise", "delayed", "rowwise", "rowwise-hp-wgrad", "blockwise", "mxfp8",
                    "nvfp4"]
GradReduceDtype = Literal["fp32", "bf16"]
FP8GemmScope = Literal["all", "linear", "grouped"]
PipelineSchedule = Literal["1f1b", "interleaved", "gpipe", "zb-h1", "zb-v", "dualpipe"]
"""Pipeline schedules (``schedule.orders``): GPipe, 1F1B and interleaved 1F1B (Narayanan et al.
2021), zero-bubble ZB-H1 / ZB-V (Qi et al. 2023), DualPipe-style bidirectional (DeepSeek-V3)."""
AttentionKernel = Literal["auto", "fa2", "triton"]
CudaGraphScope = Literal["none", "attention", "moe", "full"]
"""Fused-attention kernel class (``kernels.attention_kernels``): ``auto`` = the GPU generation's
own calibrated kernel (FlashAttention-2 on Ampere, FlashAttention-3/cuDNN on Hopper, the SM100
cuDNN kernel on Blackwell, composable_kernel's FA2-algorithm FMHA on CDNA); ``fa2`` =
FlashAttention-2, also PyTorch SDPA's flash backend on CUDA; ``triton`` = the FlashAttention
Triton kernel (attention bias, e.g. ALiBi in llm-foundry's ``attn_impl: triton``; AOTriton, PyTorch
SDPA's default flash backend on ROCm)."""
OffloadModule = Literal["attn_norm", "qkv_linear", "core_attn", "attn_proj", "mlp_norm",
                        "expert_fc1", "moe_act"]
"""Megatron-Core fine-grained activation offloading modules (frameworks.md §1.3)."""
MoeTokenDispatcher = Literal["alltoall", "deepep", "hybridep", "deepep-low-latency"]
"""MoE token dispatch implementations (``Strategy.moe_token_dispatcher``)."""
CpCommType = Literal["p2p", "all_gather", "a2a", "a2a+p2p"]
"""Megatron-Core ``--cp-comm-type`` (Transformer Engine context-parallel attention,
``graph.context_parallel``): ``p2p`` ring exchange of K/V chunks overlapped with attention;
``all_gather`` K/V gathered before attention (not overlapped); ``a2a`` DeepSpeed-Ulysses
(Jacobs et al. 2023, arXiv:2309.14509): all-to-alls scatter heads and gather the sequence;
``a2a+p2p`` hierarchical: a2a inside the inner CP group, the ring across the outer one."""
CpImplementation = Literal["transformer-engine", "torch"]
"""Who runs the context-parallel ring attention (``graph.context_parallel``,
``graph.torch_context_parallel``): ``transformer-engine`` (Megatron-Core's
``attn_forward_func_with_cp``: per-step K/V chunks round the ring, fused output correction) or
``torch`` (``torch.distributed.tensor.experimental.context_parallel`` as torchtitan runs it:
the K/V of the query heads gathered once, partial outputs merged and dK/dV accumulated in fp32
by eager PyTorch ops)."""
CP_COMM_TYPES: tuple[str, ...] = ("p2p", "all_gather", "a2a", "a2a+p2p")
"""``CpCommType`` values by code (the search stores codes)."""
PARALLEL_DIMS = ("tp", "cp", "ep", "dp", "pp")
DEFAULT_PLACEMENT_ORDER = "tp-cp-ep-dp-pp"
"""Megatron-LM's rank order (``parallel_state.RankGenerator``): tp innermost, pp outermost."""


class Strategy(BaseModel):
    """A parallel strategy and its execution options."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    num_gpus: int = Field(gt=0, le=MAX_GPUS.value, description="GPUs used by the run.")
    tp: int = Field(default=1, gt=0, le=MAX_PARALLEL_SIZE.value,
                    description="Tensor-parallel size (--tensor-model-parallel-size).")
    tp2d_rows: int = Field(
        default=1, gt=0, le=MAX_PARALLEL_SIZE.value,
        description="2D tensor parallelism (--tp2d ROWSxCOLS; graph.tensor_parallel_2d): rows "
                    "of the tp = rows x cols grid that split the residual stream's hidden "
                    "dimension; 1 = Megatron 1D TP. No listed framework runs rows > 1.")
    pp: int = Field(default=1, gt=0, le=MAX_PARALLEL_SIZE.value,
                    description="Pipeline-parallel size (--pipeline-model-parallel-size).")
    vpp: int = Field(default=1, gt=0, le=MAX_PARALLEL_SIZE.value,
                     description="Model chunks per pipeline rank (interleaved 1F1B).")
    cp: int = Field(default=1, gt=0, le=MAX_PARALLEL_SIZE.value,
                    description="Context-parallel size (--context-parallel-size).")
    cp_comm_type: CpCommType = Field(
        default="p2p",
        description="Context-parallel attention communication (--cp-comm-type): p2p ring, "
                    "all_gather, a2a (DeepSpeed-Ulysses) or a2a+p2p (hierarchical).")
    cp_implementation: CpImplementation = Field(
        default="transformer-engine",
        description="Context-parallel ring attention implementation: transformer-engine "
                    "(Megatron-Core) or torch (torch.distributed.tensor.experimental."
                    "context_parallel, torchtitan); torch runs the p2p ring type only.")
    hierarchical_cp_a2a_size: int | None = Field(
        default=None, gt=0, le=MAX_PARALLEL_SIZE.value,
        description="With cp_comm_type='a2a+p2p': ranks of the inner (a2a) CP level, the first "
                    "of Megatron's --hierarchical-context-parallel-sizes; the ring spans "
                    "cp / this.")
    ep: int = Field(default=1, gt=0, le=MAX_PARALLEL_SIZE.value,
                    description="Expert-parallel size (--expert-model-parallel-size).")
    etp: int | None = Field(
        default=None, gt=0, le=MAX_PARALLEL_SIZE.value,
        description="Expert tensor-parallel size (--expert-tensor-parallel-size); None = tp "
                    "(Megatron-Core's default).",
    )
    pipeline_layout: str | None = Field(
        default=None,
        description="Megatron --pipeline-model-parallel-layout: one '|'-separated segment per "
                    "virtual stage over E (embedding), t (layer), m (MTP), L (loss); x*N and "
                    "(...)*N repeat. None = the split below.",
    )
    num_layers_in_first_pipeline_stage: int | None = Field(
        default=None, ge=0,
        description="Layers on the first pipeline stage (--decoder-first-pipeline-num-layers).",
    )
    num_layers_in_last_pipeline_stage: int | None = Field(
        default=None, ge=0,
        description="Layers on the last pipeline stage (--decoder-last-pipeline-num-layers).",
    )
    account_for_embedding_in_pipeline_split: bool = Field(
        default=False,
        description="Count the embedding as one layer when splitting layers over stages.",
    )
    account_for_loss_in_pipeline_split: bool = Field(
        default=False,
        description="Count the loss (LM head) as one layer when splitting layers over stages.",
    )
    sequence_parallel: bool = Field(default=False, description="Megatron sequence parallelism with TP.")
    zero_stage: Literal[0, 1, 2, 3] = Field(
        default=0, description="ZeRO stage over the data-parallel group (3 = FSDP full shard)."
    )
    fsdp: bool = Field(default=False, description="PyTorch FSDP full sharding (same states as ZeRO-3).")
    distributed_optimizer: bool = Field(
        default=False, description="Megatron distributed optimizer (optimizer states sharded, ZeRO-1)."
    )
    overlap_grad_reduce: bool = Field(
        default=True,
        description="DDP / distributed optimizer: gradient reduction launched during the "
                    "backward as buckets become ready, parameter gather during the next forward "
                    "(Megatron --overlap-grad-reduce / --overlap-param-gather, PyTorch DDP "
                    "bucket hooks); False = reduced after the whole backward, exposed.",
    )
    zero3_prefetch_params: float | None = Field(
        default=None, ge=0,
        description="ZeRO-3/FSDP: parameters gathered ahead of the layer that needs them "
                    "(DeepSpeed stage3_prefetch_bucket_size); None = the whole next layer "
                    "(FSDP/FSDP2 prefetch one module ahead).",
    )
    zero3_max_live_params: float | None = Field(
        default=None, ge=0,
        description="ZeRO-3: most gathered parameters kept resident (DeepSpeed "
                    "stage3_max_live_parameters); a recomputed layer larger than this is "
                    "gathered again for its recompute forward. None = no limit: one gather "
                    "serves the recompute forward and the backward (FSDP unshards the wrapped "
                    "block once).",
    )
    zero3_per_tensor_collectives: bool = Field(
        default=False,
        description="ZeRO-3: one all-gather (and one gradient reduce-scatter) per partitioned "
                    "weight tensor (DeepSpeed), not one per layer (FSDP's flat parameter per "
                    "wrapped block).",
    )
    zero3_host_ops_per_rank: float = Field(
        default=0.0, ge=0,
        description="ZeRO-3: host tensor operations per data-parallel rank in each collective "
                    "(DeepSpeed up to 0.5.4 over tensor-list all_gather/reduce_scatter: a view "
                    "and a copy per rank); 0 = flat-buffer collectives.",
    )
    precision_aware_optimizer: bool = Field(
        default=False,
        description="Megatron --use-precision-aware-optimizer: Transformer Engine FusedAdam keeps "
                    "the fp32 master weights as 16-bit remainders of the bf16 weights "
                    "(store_param_remainders) and the moments in exp_avg_dtype/exp_avg_sq_dtype.",
    )
    store_param_remainders: bool = Field(
        default=True,
        description="With precision_aware_optimizer: keep the fp32 master weight as the 16-bit "
                    "remainder beside the bf16 weight (Megatron default); False = a full fp32 "
                    "master copy (--no-store-param-remainders).",
    )
    exp_avg_dtype: GradReduceDtype = Field(
        default="fp32", description="Adam first-moment dtype (--exp-avg-dtype; bf16 needs "
                                    "precision_aware_optimizer).")
    exp_avg_sq_dtype: GradReduceDtype = Field(
        default="fp32", description="Adam second-moment dtype (--exp-avg-sq-dtype; bf16 needs "
                                    "precision_aware_optimizer).")
    fp8_param: bool = Field(
        default=False,
        description="FP8 parameter storage (--fp8-param-gather): linear-layer weights kept and "
                    "all-gathered in FP8, no bf16 copy; needs fp8 and a sharded optimizer.",
    )
    offload_modules: tuple[OffloadModule, ...] = Field(
        default=(),
        description="Fine-grained activation offloading (Megatron-Core offload_modules): "
                    "submodules whose saved inputs go to host memory.",
    )
    cpu_offload_activation_layers: int = Field(
        default=0, ge=0,
        description="Layers per stage whose activations are offloaded to host memory "
                    "(Megatron cpu_offloading with cpu_offloading_num_layers; needs pp=1 and "
                    "no recompute).",
    )
    recompute: Recompute = Field(default="none", description="Activation recomputation granularity.")
    recompute_modules: tuple[RecomputeModule, ...] = Field(
        default=("core_attn",),
        description="With recompute='selective': the submodules recomputed "
                    "(--recompute-modules; Megatron-Core default core_attn).",
    )
    recompute_num_layers: int | None = Field(
        default=None, gt=0,
        description="With full recompute: layers per pipeline stage recomputed; None = all.",
    )
    micro_batch_size: int = Field(default=1, gt=0, le=MAX_MICRO_BATCH_SIZE.value,
                                  description="Sequences per micro-batch b.")
    precision: TrainPrecision = Field(default="bf16", description="Compute precision of GEMMs.")
    fp8_recipe: FP8Recipe = Field(default="tensorwise", description="FP8 scaling recipe.")
    fp8_fused_casts: bool = Field(
        default=True,
        description="FP8 input casts fused into the producing norm/activation kernel "
                    "(Transformer Engine LayerNormLinear, fused SwiGLU + cast).",
    )
    fp8_weight_cache: bool = Field(
        default=True,
        description="FP8 weights cast once per step and reused by every micro-batch "
                    "(Transformer Engine is_first_microbatch); False = cast in every forward.",
    )
    num_layers_at_start_in_bf16: int = Field(
        default=0, ge=0,
        description="FP8/FP4 training: the first N decoder layers keep BF16 GEMMs and no "
                    "quantize kernels (Megatron-Core --first-last-layers-bf16 with "
                    "--num-layers-at-start-in-bf16; torchao/torchtitan filter_fqns). 0 = none.",
    )
    num_layers_at_end_in_bf16: int = Field(
        default=0, ge=0,
        description="FP8/FP4 training: the last N decoder layers keep BF16 GEMMs "
                    "(Megatron-Core --num-layers-at-end-in-bf16). 0 = none.",
    )
    fp8_gemm_scope: FP8GemmScope = Field(
        default="all",
        description="FP8/FP4 training: which GEMMs the recipe converts. 'all': every linear "
                    "and routed-expert GEMM (Transformer Engine, Megatron-Core); 'linear': "
                    "linear layers only, the routed experts' grouped GEMMs stay BF16 "
                    "(torchtitan converter quantize.linear.mx / float8 alone); 'grouped': the "
                    "routed experts' grouped GEMMs only (torchtitan quantize.grouped_mm.mx, "
                    "torchao MoETrainingConfig), the linears stay BF16.",
    )
    fp8_tp_gather: bool = Field(
        default=False,
        description="FP8 training with sequence parallelism: the TP all-gathers carry FP8 "
                    "(input and output-gradient shards cast before the gather; torchao float8 "
                    "TP styles, which torchtitan applies under tensorwise scaling). Needs a "
                    "per-tensor recipe (tensorwise or delayed).",
    )
    fp8_moe_act_inputs: bool = Field(
        default=False,
        description="Cache the MoE experts' SwiGLU inputs (gate and up outputs) in FP8 for "
                    "backward (DeepSeek-V3 report §3.3.2 low-precision storage; pair with "
                    "recompute module moe_act, which recomputes the SwiGLU output). Needs "
                    "precision='fp8'.",
    )
    grad_reduce_dtype: GradReduceDtype = Field(
        default="fp32", description="Dtype of main gradients and of their reduction."
    )
    pipeline_schedule: PipelineSchedule | None = Field(
        default=None, description="Pipeline schedule; None = interleaved if vpp > 1 else 1f1b."
    )
    flash_attention: bool = Field(
        default=True, description="Fused (flash) attention: no s x s score matrix is stored."
    )
    eager_elementwise: bool = Field(
        default=False,
        description="PyTorch eager element-wise ops (no torch.compile): norms, gated activation "
                    "and rotary embedding run one kernel per op through HBM.",
    )
    attention_kernel: AttentionKernel = Field(
        default="auto",
        description="Fused-attention kernel class: auto (the GPU's own calibrated kernel), fa2 "
                    "(FlashAttention-2 / PyTorch SDPA flash) or triton (FlashAttention Triton).",
    )
    make_vocab_size_divisible_by: int = Field(
        default=128, gt=0,
        description="Vocabulary padded to a multiple of this times tp (Megatron-LM default 128).",
    )
    mtp_num_layers: int = Field(
        default=0, ge=0,
        description="Multi-token prediction depth trained with the model (--mtp-num-layers; "
                    "DeepSeek-V3 uses 1); its modules sit on the last pipeline stage.",
    )
    moe_token_dispatcher: MoeTokenDispatcher = Field(
        default="alltoall",
        description="MoE token dispatch: NCCL all-to-all; DeepEP (--moe-token-dispatcher-type "
                    "flex --moe-flex-dispatcher-backend deepep) and HybridEP (backend "
                    "hybridep): tokens cross the network once per destination NVLink domain, "
                    "then NVLink forwards them (comm.dispatch); or DeepEP's "
                    "low-latency kernels (serving decode: pure RDMA, FP8 dispatch; prefill uses "
                    "the normal kernels; not for training).",
    )
    moe_load_imbalance: float | None = Field(
        default=None, ge=1.0, le=MAX_MOE_LOAD_IMBALANCE.value, allow_inf_nan=False,
        description="Routed tokens at the busiest expert-parallel rank over the mean (1 = "
                    "balanced). None: dropless routing with a learned router takes the measured "
                    "dropless imbalance (calibration/moe_routing.yaml) when EP > 1; forced load "
                    "balancing is always 1.",
    )
    moe_grouped_gemm: bool = Field(
        default=True,
        description="Local experts run as one grouped GEMM (--moe-grouped-gemm); else one GEMM each.",
    )
    moe_permute_fusion: bool = Field(
        default=True,
        description="Fused token permute/unpermute kernels (--moe-permute-fusion); False = "
                    "Megatron-Core's PyTorch permute (its default without the flag).",
    )
    moe_router_fusion: bool = Field(
        default=True,
        description="Fused router score function, top-k and aux-loss scores "
                    "(--moe-router-fusion, TE >= 2.7); False = separate PyTorch kernels.",
    )
    moe_capacity_factor: float | None = Field(
        default=None, gt=0, le=MAX_MOE_LOAD_IMBALANCE.value, allow_inf_nan=False,
        description="Expert capacity over the balanced load (--moe-expert-capacity-factor); "
                    "tokens beyond it are dropped. None = dropless.",
    )
    moe_pad_expert_input_to_capacity: bool = Field(
        default=False,
        description="Pad every expert's input to its capacity (--moe-pad-expert-input-to-"
                    "capacity; static shapes): each expert computes and exchanges capacity "
                    "tokens. Needs moe_capacity_factor.",
    )
    moe_router_force_load_balancing: bool = Field(
        default=False,
        description="Random router logits for perfectly balanced routing "
                    "(--moe-router-force-load-balancing, benchmarks): load imbalance 1.",
    )
    placement_order: str = Field(
        default=DEFAULT_PLACEMENT_ORDER,
        description="Rank order of the parallel dimensions, innermost first (Megatron --order).",
    )
    tp_comm_overlap: bool = Field(
        default=False, description="Overlap TP collectives with the GEMMs (--tp-comm-overlap)."
    )
    cuda_graphs: CudaGraphScope = Field(
        default="none",
        description="What the framework captures in CUDA graphs (Megatron-Core --cuda-graph-impl "
                    "/ --cuda-graph-scope): none, attention, moe (padded routing: no host sync) "
                    "or full (every layer); captured kernels cost one host launch per region.",
    )
    ep_overlap: bool = Field(
        default=False,
        description="Overlap EP all-to-all with another micro-batch's compute "
        "(--overlap-moe-expert-parallel-comm).",
    )
    delay_wgrad_compute: bool = Field(
        default=False,
        description="Defer weight-gradient GEMMs so they too run under the EP all-to-all "
                    "(--delay-wgrad-compute; needs ep_overlap).",
    )

    @model_validator(mode="after")
    def _check(self) -> Strategy:
        model_parallel = self.tp * self.pp * self.cp
        if self.num_gpus % model_parallel != 0:
            raise ValueError(
                f"num_gpus={self.num_gpus} is not divisible by tp*pp*cp={model_parallel} "
                f"(tp={self.tp}, pp={self.pp}, cp={self.cp})"
            )
        self._check_context_parallel()
        self._check_tensor_parallel_2d()
        if self.vpp > 1 and self.pp == 1:
            raise ValueError(f"vpp={self.vpp} needs pp > 1")
        if self.pipeline_schedule == "interleaved" and self.vpp == 1:
            raise ValueError("pipeline_schedule='interleaved' needs vpp > 1")
        if self.pipeline_schedule in ("zb-v", "dualpipe") and self.vpp > 1:
            raise ValueError(f"pipeline_schedule={self.pipeline_schedule!r} places two chunks per "
                             f"rank itself; it needs vpp=1 (got vpp={self.vpp})")
        if self.sequence_parallel and self.tp == 1:
            raise ValueError("sequence_parallel=True needs tp > 1")
        expert_grid = self.pp * self.expert_tp * self.ep
        if self.num_gpus % expert_grid != 0:
            raise ValueError(
                f"pp*etp*ep={expert_grid} (pp={self.pp}, etp={self.expert_tp}, ep={self.ep}) "
                f"does not divide num_gpus={self.num_gpus} (expert grid: world = "
                f"pp x etp x ep x edp)"
            )
        self._check_pipeline_split()
        dims = self.placement_order.split("-")
        if sorted(dims) != sorted(PARALLEL_DIMS):
            raise ValueError(f"placement_order={self.placement_order!r} is not an order of "
                             f"{'-'.join(PARALLEL_DIMS)} (each once, '-' separated)")
        if self.fsdp and self.zero_stage not in (0, 3):
            raise ValueError(f"fsdp=True conflicts with zero_stage={self.zero_stage}")
        low_moments = "bf16" in (self.exp_avg_dtype, self.exp_avg_sq_dtype)
        if low_moments and not self.precision_aware_optimizer:
            raise ValueError(f"exp_avg_dtype={self.exp_avg_dtype}, exp_avg_sq_dtype="
                             f"{self.exp_avg_sq_dtype}: bf16 moments need "
                             "precision_aware_optimizer=True")
        if self.fp8_param and (self.precision != "fp8" or self.sharding_stage < 1):
            raise ValueError(f"fp8_param=True needs precision='fp8' and a sharded optimizer "
                             f"(got precision={self.precision!r}, sharding stage "
                             f"{self.sharding_stage})")
        bf16_layers = self.num_layers_at_start_in_bf16 + self.num_layers_at_end_in_bf16
        if bf16_layers and self.precision != "fp8":
            raise ValueError(f"num_layers_at_start_in_bf16={self.num_layers_at_start_in_bf16}, "
                             f"num_layers_at_end_in_bf16={self.num_layers_at_end_in_bf16} need "
                             f"precision='fp8' (got precision={self.precision!r})")
        if self.fp8_gemm_scope != "all" and self.precision != "fp8":
            raise ValueError(f"fp8_gemm_scope={self.fp8_gemm_scope!r} needs precision='fp8' "
                             f"(got precision={self.precision!r})")
        if self.fp8_tp_gather and (self.precision != "fp8"
                                   or self.fp8_recipe not in ("tensorwise", "delayed")):
            raise ValueError(f"fp8_tp_gather=True needs precision='fp8' with a per-tensor "
                             f"fp8_recipe (tensorwise or delayed; got precision="
                             f"{self.precision!r}, fp8_recipe={self.fp8_recipe!r})")
        if self.fp8_moe_act_inputs and self.precision != "fp8":
            raise ValueError(f"fp8_moe_act_inputs=True needs precision='fp8' (got "
                             f"precision={self.precision!r})")
        if self.moe_pad_expert_input_to_capacity and self.moe_capacity_factor is None:
            raise ValueError("moe_pad_expert_input_to_capacity=True needs moe_capacity_factor "
                             "(Megatron-Core requires --moe-expert-capacity-factor)")
        if self.delay_wgrad_compute and not self.ep_overlap:
            raise ValueError("delay_wgrad_compute=True needs ep_overlap=True (Megatron-Core "
                             "requires --overlap-moe-expert-parallel-comm)")
        if self.offload_modules and self.cpu_offload_activation_layers:
            raise ValueError("offload_modules cannot combine with cpu_offload_activation_layers "
                             "(Megatron-Core: fine-grained offloading excludes cpu_offloading)")
        if self.cpu_offload_activation_layers and (self.pp > 1 or self.recompute != "none"):
            raise ValueError(f"cpu_offload_activation_layers={self.cpu_offload_activation_layers} "
                             f"needs pp=1 and recompute='none' (Megatron cpu_offloading; got "
                             f"pp={self.pp}, recompute={self.recompute!r})")
        if self.recompute_modules != ("core_attn",) and self.recompute != "selective":
            raise ValueError(f"recompute_modules={','.join(self.recompute_modules)} needs "
                             f"recompute='selective' (got recompute={self.recompute!r})")
        if len(set(self.recompute_modules)) != len(self.recompute_modules):
            raise ValueError(f"recompute_modules={','.join(self.recompute_modules)} repeats "
                             "a module")
        if "op_sac" in self.recompute_modules and len(self.recompute_modules) > 1:
            raise ValueError(f"recompute_modules={','.join(self.recompute_modules)}: 'op_sac' "
                             "(torchtitan per-op SAC) is a whole-layer policy and takes no "
                             "other module")
        if "moe_act" in self.recompute_modules and not self.moe_grouped_gemm:
            raise ValueError("recompute_modules with 'moe_act' needs moe_grouped_gemm=True "
                             "(Megatron-Core requires --moe-grouped-gemm)")
        if self.ep_overlap and self.recompute == "selective" and "moe" in self.recompute_modules:
            raise ValueError("recompute_modules with 'moe' conflicts with ep_overlap "
                             "(Megatron-Core forbids it with --overlap-moe-expert-parallel-comm)")
        if self.recompute_num_layers is not None and self.recompute != "full":
            raise ValueError(
                f"recompute_num_layers={self.recompute_num_layers} needs recompute='full' "
                f"(got recompute={self.recompute!r})"
            )
        return self

    def _check_context_parallel(self) -> None:
        """Megatron-Core's rules for ``--hierarchical-context-parallel-sizes``: only with
        a2a+p2p, and the levels multiply to cp (MLM arguments.py)."""
        a2a = self.hierarchical_cp_a2a_size
        if self.cp_implementation == "torch" and self.cp > 1 and self.cp_comm_type != "p2p":
            raise ValueError(f"cp_implementation='torch' runs the ring (cp_comm_type='p2p') "
                             f"only (got cp_comm_type={self.cp_comm_type!r})")
        if self.cp_comm_type == "a2a+p2p" and self.cp > 1:
            if a2a is None:
                raise ValueError("cp_comm_type='a2a+p2p' needs hierarchical_cp_a2a_size "
                                 "(--hierarchical-context-parallel-sizes A,P)")
            if self.cp % a2a != 0:
                raise ValueError(f"hierarchical_cp_a2a_size={a2a} does not divide cp={self.cp}")
        elif a2a is not None:
            raise ValueError(f"hierarchical_cp_a2a_size={a2a} needs cp_comm_type='a2a+p2p' "
                             f"and cp > 1 (got cp_comm_type={self.cp_comm_type!r}, cp={self.cp})")

    def _check_tensor_parallel_2d(self) -> None:
        """The 2D TP-SP scheme modelled (``graph.tensor_parallel_2d``): rows divide tp, the
        sequence is split (sequence parallelism), no CP and no TP comm overlap with it."""
        rows = self.tp2d_rows
        if rows == 1:
            return
        if self.tp % rows != 0:
            raise ValueError(f"tp2d_rows={rows} does not divide tp={self.tp}")
        if not self.sequence_parallel:
            raise ValueError(f"tp2d_rows={rows} needs sequence_parallel=True (2D TP-SP: tokens "
                             "split over the grid)")
        if self.cp > 1 or self.tp_comm_overlap:
            raise ValueError(f"tp2d_rows={rows} is modelled without CP and without TP comm "
                             f"overlap (got cp={self.cp}, tp_comm_overlap={self.tp_comm_overlap})")

    def _check_pipeline_split(self) -> None:
        """Megatron-Core's rules for the pipeline split options (frameworks.md §1.2)."""
        uneven = (self.num_layers_in_first_pipeline_stage is not None
                  or self.num_layers_in_last_pipeline_stage is not None)
        accounted = (self.account_for_embedding_in_pipeline_split
                     or self.account_for_loss_in_pipeline_split)
        if self.pipeline_layout is not None:
            if uneven or accounted:
                raise ValueError(f"pipeline_layout={self.pipeline_layout!r} conflicts with the "
                                 "first/last-stage layer counts and the embedding/loss "
                                 "accounting (Megatron rejects them together)")
            parse_pipeline_layout(self.pipeline_layout)
        elif (uneven or accounted) and self.pp == 1:
            raise ValueError("uneven pipeline stages (first/last stage layers, embedding/loss "
                             "accounting) need pp > 1")
        if uneven and accounted:
            raise ValueError("first/last pipeline stage layer counts conflict with the "
                             "embedding/loss accounting in the pipeline split")

    @property
    def dp(self) -> int:
        """Data-parallel size: GPUs / (tp * pp * cp)."""
        return self.num_gpus // (self.tp * self.pp * self.cp)

    @property
    def tp2d_cols(self) -> int:
        """Columns of the 2D TP grid: ranks that split heads and FFN width (tp for 1D TP)."""
        return self.tp // self.tp2d_rows

    @property
    def cp_a2a_size(self) -> int:
        """Ranks the attention heads are scattered over by all-to-all: cp for a2a, the inner
        level for a2a+p2p, 1 for p2p and all_gather (``graph.context_parallel``)."""
        if self.cp_comm_type == "a2a":
            return self.cp
        if self.cp_comm_type == "a2a+p2p" and self.hierarchical_cp_a2a_size is not None:
            return self.hierarchical_cp_a2a_size
        return 1

    @property
    def cp_kv_all_gather(self) -> bool:
        """Whether the K/V exchange gathers the whole sequence at once (all_gather) rather
        than passing chunks round a ring."""
        return self.cp_comm_type == "all_gather"

    @property
    def cp_torch_ring(self) -> bool:
        """Whether the ring attention is PyTorch's (``graph.torch_context_parallel``)."""
        return self.cp_implementation == "torch" and self.cp > 1

    @property
    def expert_tp(self) -> int:
        """Tensor-parallel size inside experts (etp, defaults to tp)."""
        return self.etp if self.etp is not None else self.tp

    @property
    def expert_dp(self) -> int:
        """Data-parallel size of expert weights: world / (pp*etp*ep) (Megatron-Core
        ``initialize_model_parallel``: the expert grid folds CP into EP/EDP, frameworks.md
        §1.8)."""
        return self.num_gpus // (self.pp * self.expert_tp * self.ep)

    @property
    def sharding_stage(self) -> int:
        """Effective ZeRO stage: FSDP = 3, distributed optimizer = at least 1."""
        if self.fsdp:
            return 3
        if self.distributed_optimizer:
            return max(1, self.zero_stage)
        return self.zero_stage

    def bf16_layer(self, layer: int, num_layers: int) -> bool:
        """Whether global decoder layer ``layer`` (0-based, of ``num_layers``) keeps BF16 GEMMs
        under an FP8/FP4 recipe: among the first ``num_layers_at_start_in_bf16`` or the last
        ``num_layers_at_end_in_bf16`` (Megatron-Core TransformerConfig, frameworks.md §1
        ``first_last_layers_bf16``)."""
        return (layer < self.num_layers_at_start_in_bf16
                or layer >= num_layers - self.num_layers_at_end_in_bf16)

    def recomputed_layers(self, num_layers):
        """Layers of a stage with ``num_layers`` layers whose forward is recomputed in full
        (all with ``recompute='full'``, capped by ``recompute_num_layers``; none otherwise)."""
        if self.recompute != "full":
            return 0
        if self.recompute_num_layers is None:
            return num_layers
        return min(self.recompute_num_layers, num_layers)


    @property
    def overlaps_ep(self) -> bool:
        """EP all-to-all runs under another micro-batch's compute: Megatron-Core's A2A overlap,
        or DualPipe's paired forward/backward chunks (DeepSeek-V3 report §3.2.1)."""
        return self.ep_overlap or self.schedule == "dualpipe"

    @property
    def schedule(self) -> PipelineSchedule:
        if self.pipeline_schedule is not None:
            return self.pipeline_schedule
        return "interleaved" if self.vpp > 1 else "1f1b"
