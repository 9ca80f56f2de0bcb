"""Optimizer step time: a memory-bound pass over the GPU's shard of the optimizer state.

Adam with fp32 master weights (Kingma & Ba 2015; mixed precision per Micikevicius et al. 2018)
reads master weight, gradient, m and v (4 × 4 B) and writes master weight, m, v (3 × 4 B) and
the 16-bit working copy (2 B): 30 B per parameter, plus 4 B to read gradients once for the
global-norm clip (Megatron-LM ``clip_grad_norm``): 34 B per parameter on this GPU's shard.
FP8 training with cached FP8 weights adds the once-per-step cast of this GPU's linear-layer
weights (``graph.fp8_casts.weight_cast_bytes_per_step``; Transformer Engine casts them on the
first micro-batch, Megatron-Core with --fp8-param-gather in the optimizer step).
"""

from __future__ import annotations

from perfcast.graph.fp8_casts import weight_cast_bytes_per_step
from perfcast.graph.param_sharding import StageParams
from perfcast.kernels.backend import KernelBackend
from perfcast.specs.hardware import SystemSpec
from perfcast.specs.strategy import Strategy

ADAM_BYTES_PER_PARAM = 34


def optimizer_params_on_gpu(params: StageParams, strategy: Strategy) -> float:
    """Parameters whose optimizer state this GPU updates (sharded when ZeRO stage >= 1)."""
    if strategy.sharding_stage >= 1:
        return params.dense / (strategy.dp * strategy.cp) + params.expert / strategy.expert_dp
    return params.total


def optimizer_time_s(params: StageParams, system: SystemSpec, strategy: Strategy,
                     backend: KernelBackend):
    """Seconds of one optimizer step on one GPU of the stage."""
    nbytes = ADAM_BYTES_PER_PARAM * optimizer_params_on_gpu(params, strategy)
    if strategy.precision == "fp8" and strategy.fp8_weight_cache:
        # Every weight this GPU computes with (not ZeRO-sharded), embedding/LM head excluded.
        nbytes = nbytes + weight_cast_bytes_per_step(params.total - params.embedding,
                                                     strategy.fp8_recipe)
    return backend.memory_bound_time_s(system.gpu, nbytes)
