"""Bytes of model states per GPU: weights, gradients and Adam optimizer states.

Mixed-precision Adam (Micikevicius et al. 2018; Rajbhandari et al. 2020, ZeRO §3):
16-bit weights (2 B/param), fp32 main gradients (4 B, Megatron-LM's
``--accumulate-allreduce-grads-in-fp32``; 2 B when reduced in bf16), and fp32 master weights,
momentum and variance (12 B). ZeRO stage 1 (= Megatron distributed optimizer) shards optimizer
states over the data-parallel group, stage 2 also gradients, stage 3 (= FSDP full shard) also
weights. Non-expert parameters shard over dp·cp (Megatron-Core's data-parallel group with
context parallelism); routed experts over their expert-data-parallel group.
Korthikanti et al. 2022 Figure 1 uses 18 B/param (2 + 4 + 12) with no sharding.

Megatron-Core's precision-aware optimizer (``--use-precision-aware-optimizer``, frameworks.md
§1.1; MLM:OPT ``store_param_remainders`` default True) keeps the fp32 master weight as the
16-bit remainder beside the bf16 weight (2 B) and the moments in ``exp_avg_dtype`` /
``exp_avg_sq_dtype`` (bf16: 2 B each): 6 B/param with bf16 moments. FP8 parameters
(``--fp8-param-gather``) hold linear-layer weights in FP8 (1 B) and their transpose for dgrad
(1 B) instead of a bf16 copy plus the FP8 cache; the master weight is then a full fp32.
"""

from __future__ import annotations

from dataclasses import dataclass

from perfcast.graph.fp8_casts import fp8_weight_params
from perfcast.graph.param_sharding import StageParams
from perfcast.specs.dtypes import ACTIVATION_BYTES, BYTES_PER_ELEMENT
from perfcast.specs.strategy import Strategy

WEIGHT_BYTES_16BIT = ACTIVATION_BYTES
"""bf16/fp16 parameter copy used by forward and backward."""
ADAM_STATE_BYTES = 3 * BYTES_PER_ELEMENT["fp32"]
"""fp32 master weight, first moment and second moment (ZeRO §3, K = 12)."""
FP8_WEIGHT_CACHE_BYTES = 2 * BYTES_PER_ELEMENT["fp8"]
"""Transformer Engine caches an FP8 copy of each GEMM weight and its transpose (1 B + 1 B) for
the forward and dgrad GEMMs (NVIDIA Transformer Engine docs, "FP8 primer")."""


@dataclass(frozen=True)
class StateBytes:
    """Model-state bytes on one GPU of one stage."""

    weights: float
    grads: float
    optimizer: float


def master_weight_bytes(strategy: Strategy) -> float:
    """fp32 master weight per parameter: 2 B as a 16-bit remainder beside bf16 weights under the
    precision-aware optimizer (store_param_remainders), else 4 B."""
    remainders = (strategy.precision_aware_optimizer and strategy.store_param_remainders
                  and not strategy.fp8_param)
    return BYTES_PER_ELEMENT["bf16"] if remainders else BYTES_PER_ELEMENT["fp32"]


def adam_state_bytes(strategy: Strategy) -> float:
    """Optimizer bytes per parameter: master weight + first and second moments (12 B for fp32
    Adam; 6 B with the precision-aware optimizer and bf16 moments)."""
    return (master_weight_bytes(strategy) + BYTES_PER_ELEMENT[strategy.exp_avg_dtype]
            + BYTES_PER_ELEMENT[strategy.exp_avg_sq_dtype])


def grad_bytes_per_param(strategy: Strategy) -> float:
    """4 for fp32 main gradients, 2 for bf16 gradient reduction."""
    return BYTES_PER_ELEMENT[strategy.grad_reduce_dtype]


def fp8_weight_copy_bytes(params: StageParams, strategy: Strategy) -> float:
    """Bytes of FP8 weight copies (and transposes) held by an FP8 run.

    With FP8 parameters the weight is the copy (1 B per GEMM weight). With
    ``fp8_weight_cache`` (Transformer Engine ``is_first_microbatch``) the FP8 copy and its
    transpose of every GEMM weight persist over the step (``FP8_WEIGHT_CACHE_BYTES`` per
    parameter). Without it the weight is cast inside each GEMM call (torchao ``Float8Linear``
    casts per call and saves the high-precision weight for backward; Composer calls TE without
    ``is_first_microbatch``: the framework profiles' ``fp8_weight_cache`` false), so only the
    copies of the layer being computed are alive: one layer's GEMM weights (after TP/EP).

    With weights sharded (ZeRO-3 / FSDP over more than one rank) a cached copy lives only as
    long as its gathered weight: FSDP frees the unsharded layer after use, and a persistent FP8
    copy of every unsharded weight would undo the sharding (Megatron-FSDP drops the FP8
    transpose cache after use unless ``--keep-fp8-transpose-cache``: Megatron-LM arguments,
    cited from knowledge of Megatron-LM core_r0.13+, not a copy in shared/reference). The
    copies then cover the gathered layers (the current and the prefetched one, as for the
    bf16 all-gather buffers in ``state_bytes``).
    """
    gemm_params = fp8_weight_params(params, strategy.fp8_gemm_scope)
    if strategy.fp8_param:
        return gemm_params * BYTES_PER_ELEMENT["fp8"]
    layers = max(params.num_layers, 1)
    per_layer = gemm_params / layers * FP8_WEIGHT_CACHE_BYTES
    if not strategy.fp8_weight_cache:
        return per_layer
    full = gemm_params * FP8_WEIGHT_CACHE_BYTES
    gathered = min(2, layers) * per_layer
    sharded = (strategy.sharding_stage >= 3) * (strategy.dp * strategy.cp > 1)  # array-friendly
    return full + sharded * (gathered - full)


def _shard(value, group: int, applies: bool):
    return value / group if applies else value


def state_bytes(params: StageParams, strategy: Strategy) -> StateBytes:
    """Weights, gradients and optimizer states per GPU for ``params`` under ``strategy``.

    Weights include the transient FSDP all-gather of the layers being computed (two layers:
    the current one and the prefetched next one, PyTorch FSDP ``forward_prefetch``; none when
    there is nothing to shard over), and the
    FP8 weight cache when training in FP8.
    """
    stage = strategy.sharding_stage
    dense_dp = strategy.dp * strategy.cp
    expert_dp = strategy.expert_dp

    def sharded(per_param: float, min_stage: int):
        dense = _shard(params.dense * per_param, dense_dp, stage >= min_stage)
        expert = _shard(params.expert * per_param, expert_dp, stage >= min_stage)
        return dense + expert

    gemm_params = params.total - params.embedding
    fp8_param = bool(getattr(strategy, "fp8_param", False))
    weights = sharded(WEIGHT_BYTES_16BIT, 3)
    if fp8_param:
        # FP8 storage replaces the bf16 copy of the linear-layer weights in the FP8 scope
        # (1 B instead of 2 B).
        weights -= (fp8_weight_params(params, strategy.fp8_gemm_scope)
                    * (WEIGHT_BYTES_16BIT - BYTES_PER_ELEMENT["fp8"]))
    if stage >= 3 and params.num_layers > 0:
        per_layer_full = gemm_params / params.num_layers
        gathered = min(2, params.num_layers) * per_layer_full * WEIGHT_BYTES_16BIT
        weights += (dense_dp > 1) * gathered  # (array-friendly "if dense_dp > 1")
    if strategy.precision == "fp8":
        weights += fp8_weight_copy_bytes(params, strategy)
    grads = sharded(grad_bytes_per_param(strategy), 2)
    optimizer = sharded(adam_state_bytes(strategy), 1)
    return StateBytes(weights=weights, grads=grads, optimizer=optimizer)
