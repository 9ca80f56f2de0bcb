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

Recompute = Literal["none", "selective", "full"]
TrainPrecision = Literal["bf16", "fp16", "fp8"]
FP8Recipe = Literal["tensorwise", "delayed", "rowwise", "rowwise-hp-wgrad", "blockwise", "mxfp8",
                    "nvfp4"]
GradReduceDtype = Literal["fp32", "bf16"]
PipelineSchedule = Literal["1f1b", "interleaved", "gpipe", "zb-h1", "zb-v", "dualpipe"]
"""Pipeline schedules (``schedule.orders``): GPipe, 1F1B and interleaved 1F1B (Narayanan et al.
2021), zero-bubble ZB-H1 / ZB-V (Qi et al. 2023), DualPipe-style bidirectional (DeepSeek-V3)."""
AttentionKernel = Literal["auto", "fa2", "triton"]
"""Fused-attention kernel class (``kernels.attention_kernels``): ``auto`` = the GPU generation's
own calibrated kernel (FlashAttention-2 on Ampere, FlashAttention-3/cuDNN on Hopper, the SM100
cuDNN kernel on Blackwell, composable_kernel on CDNA); ``fa2`` = FlashAttention-2, also PyTorch
SDPA's flash backend; ``triton`` = the FlashAttention Triton kernel (attention bias, e.g. ALiBi
in llm-foundry's ``attn_impl: triton``)."""
PARALLEL_DIMS = ("tp", "cp", "ep", "dp", "pp")
DEFAULT_PLACEMENT_ORDER = "tp-cp-ep-dp-pp"
"""Megatron-LM's rank order (``parallel_state.RankGenerator``): tp innermost, pp outermost."""


class Strategy(BaseModel):
    """A parallel strategy and its execution options."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    num_gpus: int = Field(gt=0, le=MAX_GPUS.value, description="GPUs used by the run.")
    tp: int = Field(default=1, gt=0, le=MAX_PARALLEL_SIZE.value,
                    description="Tensor-parallel size (--tensor-model-parallel-size).")
    pp: int = Field(default=1, gt=0, le=MAX_PARALLEL_SIZE.value,
                    description="Pipeline-parallel size (--pipeline-model-parallel-size).")
    vpp: int = Field(default=1, gt=0, le=MAX_PARALLEL_SIZE.value,
                     description="Model chunks per pipeline rank (interleaved 1F1B).")
    cp: int = Field(default=1, gt=0, le=MAX_PARALLEL_SIZE.value,
                    description="Context-parallel size (--context-parallel-size).")
    ep: int = Field(default=1, gt=0, le=MAX_PARALLEL_SIZE.value,
                    description="Expert-parallel size (--expert-model-parallel-size).")
    etp: int | None = Field(default=None, gt=0, le=MAX_PARALLEL_SIZE.value,
                            description="Expert tensor-parallel size; None = tp.")
    sequence_parallel: bool = Field(default=False, description="Megatron sequence parallelism with TP.")
    zero_stage: Literal[0, 1, 2, 3] = Field(
        default=0, description="ZeRO stage over the data-parallel group (3 = FSDP full shard)."
    )
    fsdp: bool = Field(default=False, description="PyTorch FSDP full sharding (same states as ZeRO-3).")
    distributed_optimizer: bool = Field(
        default=False, description="Megatron distributed optimizer (optimizer states sharded, ZeRO-1)."
    )
    recompute: Recompute = Field(default="none", description="Activation recomputation granularity.")
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
    grad_reduce_dtype: GradReduceDtype = Field(
        default="fp32", description="Dtype of main gradients and of their reduction."
    )
    pipeline_schedule: PipelineSchedule | None = Field(
        default=None, description="Pipeline schedule; None = interleaved if vpp > 1 else 1f1b."
    )
    flash_attention: bool = Field(
        default=True, description="Fused (flash) attention: no s x s score matrix is stored."
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
    moe_token_dispatcher: Literal["alltoall", "deepep", "deepep-low-latency"] = Field(
        default="alltoall",
        description="MoE token dispatch: NCCL all-to-all; DeepEP (--moe-token-dispatcher-type "
                    "flex): tokens cross the network once per destination node, then NVLink; "
                    "or DeepEP's low-latency kernels (serving decode: pure RDMA, FP8 dispatch; "
                    "prefill uses the normal kernels; not for training).",
    )
    moe_load_imbalance: float = Field(
        default=1.0, ge=1.0, le=MAX_MOE_LOAD_IMBALANCE.value, allow_inf_nan=False,
        description="Routed tokens at the busiest expert-parallel rank over the mean (1 = balanced).",
    )
    moe_grouped_gemm: bool = Field(
        default=True,
        description="Local experts run as one grouped GEMM (--moe-grouped-gemm); else one GEMM each.",
    )
    moe_capacity_factor: float | None = Field(
        default=None, gt=0, le=MAX_MOE_LOAD_IMBALANCE.value, allow_inf_nan=False,
        description="Expert capacity over the balanced load (--moe-expert-capacity-factor); "
                    "tokens beyond it are dropped. None = dropless.",
    )
    placement_order: str = Field(
        default=DEFAULT_PLACEMENT_ORDER,
        description="Rank order of the parallel dimensions, innermost first (Megatron --order).",
    )
    tp_comm_overlap: bool = Field(
        default=False, description="Overlap TP collectives with the GEMMs (--tp-comm-overlap)."
    )
    ep_overlap: bool = Field(
        default=False,
        description="Overlap EP all-to-all with another micro-batch's compute "
        "(--overlap-moe-expert-parallel-comm).",
    )

    @model_validator(mode="after")
    def _check(self) -> Strategy:
        model_parallel = self.tp * self.pp * self.cp
        if self.num_gpus % model_parallel != 0:
            raise ValueError(
                f"num_gpus={self.num_gpus} is not divisible by tp*pp*cp={model_parallel} "
                f"(tp={self.tp}, pp={self.pp}, cp={self.cp})"
            )
        if self.vpp > 1 and self.pp == 1:
            raise ValueError(f"vpp={self.vpp} needs pp > 1")
        if self.pipeline_schedule == "interleaved" and self.vpp == 1:
            raise ValueError("pipeline_schedule='interleaved' needs vpp > 1")
        if self.pipeline_schedule in ("zb-v", "dualpipe") and self.vpp > 1:
            raise ValueError(f"pipeline_schedule={self.pipeline_schedule!r} places two chunks per "
                             f"rank itself; it needs vpp=1 (got vpp={self.vpp})")
        if self.sequence_parallel and self.tp == 1:
            raise ValueError("sequence_parallel=True needs tp > 1")
        expert_group = self.ep * self.expert_tp
        if (self.tp * self.cp * self.dp) % expert_group != 0:
            raise ValueError(
                f"ep*etp={expert_group} (ep={self.ep}, etp={self.expert_tp}) does not divide "
                f"tp*cp*dp={self.tp * self.cp * self.dp}"
            )
        dims = self.placement_order.split("-")
        if sorted(dims) != sorted(PARALLEL_DIMS):
            raise ValueError(f"placement_order={self.placement_order!r} is not an order of "
                             f"{'-'.join(PARALLEL_DIMS)} (each once, '-' separated)")
        if self.fsdp and self.zero_stage not in (0, 3):
            raise ValueError(f"fsdp=True conflicts with zero_stage={self.zero_stage}")
        if self.recompute_num_layers is not None and self.recompute != "full":
            raise ValueError(
                f"recompute_num_layers={self.recompute_num_layers} needs recompute='full' "
                f"(got recompute={self.recompute!r})"
            )
        return self

    @property
    def dp(self) -> int:
        """Data-parallel size: GPUs / (tp * pp * cp)."""
        return self.num_gpus // (self.tp * self.pp * self.cp)

    @property
    def expert_tp(self) -> int:
        """Tensor-parallel size inside experts (etp, defaults to tp)."""
        return self.etp if self.etp is not None else self.tp

    @property
    def expert_dp(self) -> int:
        """Data-parallel size of expert weights: tp*cp*dp / (ep*etp) (Megatron-Core)."""
        return (self.tp * self.cp * self.dp) // (self.ep * self.expert_tp)

    @property
    def sharding_stage(self) -> int:
        """Effective ZeRO stage: FSDP = 3, distributed optimizer = at least 1."""
        if self.fsdp:
            return 3
        if self.distributed_optimizer:
            return max(1, self.zero_stage)
        return self.zero_stage

    def recomputed_layers(self, num_layers):
        """Layers of a stage with ``num_layers`` layers whose forward is recomputed in full
        (all with ``recompute='full'``, capped by ``recompute_num_layers``; none otherwise)."""
        if self.recompute != "full":
            return 0
        if self.recompute_num_layers is None:
            return num_layers
        return min(self.recompute_num_layers, num_layers)


    @property
    def schedule(self) -> PipelineSchedule:
        if self.pipeline_schedule is not None:
            return self.pipeline_schedule
        return "interleaved" if self.vpp > 1 else "1f1b"
