"""Memory of one serving GPU and the largest batch that fits.

Terms per ``memory.inference.estimate_inference_memory`` (weights, KV cache, workspace per live
token, runtime; fitted on FasterTransformer's measured rows), with the serving layout applied:

* weights of the heaviest pipeline stage under the strategy's TP and EP
  (``graph.param_sharding.stage_params``) at the weight format, plus a draft model's;
* attention data parallelism keeps 1/tp of the sequences' KV on each GPU;
* offloaded fractions of weights and KV live in host memory or on disk, not in HBM.

Max batch: B_max = ⌊(capacity − weights − runtime) / (context·(KV + workspace per token))⌋,
the most sequences of input + output tokens whose caches fit beside the weights (Kwon et al.,
vLLM/PagedAttention, 2023 §2.3: the KV cache bounds the batch).
"""

from __future__ import annotations

import math
from dataclasses import replace

from perfcast.graph.param_sharding import stage_params
from perfcast.memory.inference import InferenceMemory, estimate_inference_memory
from perfcast.specs.dtypes import bytes_per_element
from perfcast.specs.hardware import SystemSpec
from perfcast.specs.inference import InferencePrecision, InferenceWorkload, Offload, SpeculativeDecoding
from perfcast.specs.model import ModelSpec
from perfcast.specs.strategy import Strategy


def weights_bytes_per_gpu(model: ModelSpec, strategy: Strategy, weight_format: str) -> float:
    """Weights of the heaviest stage's GPU: max over stages of its parameters × bytes/element."""
    worst = max(stage_params(model, strategy, s).total for s in range(strategy.pp))
    return worst * bytes_per_element(weight_format)


def serving_memory(
    model: ModelSpec,
    system: SystemSpec,
    strategy: Strategy,
    precision: InferencePrecision,
    workload: InferenceWorkload,
    attention_dp: bool = False,
    offload: Offload | None = None,
    speculative: SpeculativeDecoding | None = None,
) -> tuple[InferenceMemory, int, float]:
    """(memory of one GPU at the workload's batch, max batch that fits, weights read per step)."""
    offload = offload or Offload()
    capacity = system.gpu.hbm_capacity_bytes
    per_seq = estimate_inference_memory(
        model, capacity, strategy.tp, strategy.pp, 1, workload.context_tokens,
        weight_precision=precision.weights,
        kv_bytes=bytes_per_element(precision.kv_cache))
    weights = weights_bytes_per_gpu(model, strategy, precision.weights)
    if speculative is not None:
        weights += weights_bytes_per_gpu(speculative.draft_model, strategy, precision.weights)
    kv_share = (1.0 - offload.kv_cpu - offload.kv_disk) / (strategy.tp if attention_dp else 1)
    act_share = 1.0 - offload.activations_cpu - offload.activations_disk
    kv_per_seq = per_seq.kv_cache_bytes * kv_share
    ws_per_seq = per_seq.workspace_bytes * act_share
    gpu_weights = weights * (1.0 - offload.weights_cpu - offload.weights_disk)
    room = capacity - gpu_weights - per_seq.runtime_bytes
    per_seq_bytes = kv_per_seq + ws_per_seq
    max_batch = max(0, math.floor(room / per_seq_bytes)) if per_seq_bytes > 0 else 0
    b = workload.batch_size
    memory = replace(per_seq, weights_bytes=gpu_weights, kv_cache_bytes=b * kv_per_seq,
                     workspace_bytes=b * ws_per_seq)
    return memory, max_batch, weights
