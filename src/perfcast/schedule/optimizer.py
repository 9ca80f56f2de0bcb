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

from perfcast.graph.fp8_casts import fp8_weight_params, weight_cast_bytes_per_step
from perfcast.graph.param_sharding import StageParams
from perfcast.kernels.backend import KernelBackend
from perfcast.memory.states import master_weight_bytes
from perfcast.specs.dtypes import BYTES_PER_ELEMENT
from perfcast.specs.hardware import SystemSpec
from perfcast.specs.strategy import Strategy

ADAM_BYTES_PER_PARAM = 34
GRAD_AND_CLIP_BYTES = 8
"""Gradient read by Adam and by the global-norm clip (4 B each)."""


def adam_bytes_per_param(strategy: Strategy):
    """HBM bytes per parameter of one Adam step (module docstring): 34 B for fp32 states; the
    precision-aware optimizer reads and writes the 16-bit remainder beside the bf16 weight
    (2 + 2 each way) and its moments in their own dtype (read + write each)."""
    if not getattr(strategy, "precision_aware_optimizer", False):
        return ADAM_BYTES_PER_PARAM
    # Read + write the master (2·4 B) and write the 16-bit weight (2 B) = 10 B; as a remainder
    # beside the bf16 weight: read + write both halves (2·(2 + 2) B) = 8 B.
    master = 8 if master_weight_bytes(strategy) == BYTES_PER_ELEMENT["bf16"] else 10
    moments = 2 * (BYTES_PER_ELEMENT[strategy.exp_avg_dtype]
                   + BYTES_PER_ELEMENT[strategy.exp_avg_sq_dtype])
    return master + moments + GRAD_AND_CLIP_BYTES


def optimizer_params_on_gpu(params: StageParams, strategy: Strategy) -> float:
    """Parameters whose optimizer state this GPU updates (sharded when ZeRO stage >= 1)."""
    if strategy.sharding_stage >= 1:
        return params.dense / (strategy.dp * strategy.cp) + params.expert / strategy.expert_dp
    return params.total


def optimizer_time_s(params: StageParams, system: SystemSpec, strategy: Strategy,
                     backend: KernelBackend):
    """Seconds of one optimizer step on one GPU of the stage."""
    nbytes = adam_bytes_per_param(strategy) * optimizer_params_on_gpu(params, strategy)
    if strategy.precision == "fp8" and strategy.fp8_weight_cache:
        in_fp8 = fp8_weight_params(params, strategy.fp8_gemm_scope)
        nbytes = nbytes + weight_cast_bytes_per_step(in_fp8, strategy.fp8_recipe)
    return backend.memory_bound_time_s(system.gpu, nbytes)
