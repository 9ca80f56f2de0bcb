"""Paged-KV memory of a serving engine: weights, step workspace, runtime, and the KV pool.

An engine (Kwon et al., "Efficient Memory Management for LLM Serving with PagedAttention",
SOSP 2023 §4; vLLM ``gpu_worker.determine_available_memory``) loads the weights, profiles one
forward of the step token budget to size the activation workspace, and gives what is left of
its memory share to a pool of KV pages:

    pool = f·C − W − A − R                (basis ``total``: vLLM, SGLang)
    pool = f·(C − W − A − R)              (basis ``free``: TensorRT-LLM free_gpu_memory_fraction)

C device memory, W weights of the heaviest pipeline stage under TP/EP, A workspace of one step,
R runtime (CUDA context, library workspaces; ``calibration/memory_overheads.yaml``). The pool
holds ⌊pool / (KV bytes per token per GPU · block)⌋ pages; a sequence of L tokens holds ⌈L/block⌉.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from perfcast.calibration.memory_overheads import load_memory_overheads
from perfcast.catalog.serving_engines import EngineConfig
from perfcast.estimate.inference_memory import weights_bytes_per_gpu
from perfcast.graph.param_sharding import stage_layer_ranges
from perfcast.memory.inference import kv_cache_bytes_per_token
from perfcast.specs.dtypes import ACTIVATION_BYTES, bytes_per_element
from perfcast.specs.inference import InferencePrecision
from perfcast.specs.model import ModelSpec
from perfcast.specs.strategy import Strategy

LOGITS_BYTES = 4
"""Sampler logits are float32 (vLLM ``Sampler``: logits.to(torch.float32))."""


def step_workspace_bytes(model: ModelSpec, strategy: Strategy, step_tokens: int,
                         max_seqs: int) -> float:
    """Peak activation bytes of one step of ``step_tokens`` tokens on one GPU: one layer's
    live tensors (residual + normed input + attention q/k/v/out: ~4·h; the gate/up output and
    the activation of the MLP: 2·f/tp, f = routed top-k × expert width for MoE) plus float32
    logits of ``max_seqs`` sampled rows, vocab split over TP (vLLM ``profile_run``: a dummy
    forward of max_num_batched_tokens and a sampler pass of max_num_seqs)."""
    if model.is_moe:
        ffn = model.num_experts_per_tok * (model.moe_intermediate_size or model.intermediate_size)
    else:
        ffn = model.intermediate_size
    per_token = ACTIVATION_BYTES * (4 * model.hidden_size + 2 * ffn / strategy.tp)
    logits = LOGITS_BYTES * max_seqs * model.vocab_size / strategy.tp
    return step_tokens * per_token + logits


def kv_bytes_per_token_per_gpu(model: ModelSpec, strategy: Strategy, kv_format: str,
                               attention_dp: bool = False) -> float:
    """KV bytes of one token on the GPU holding the most layers (``memory.inference`` formula:
    2·L·g·d·bytes/tp, MLA latent replicated over TP; with attention DP a token's KV lives
    unsplit on the one rank that serves its sequence)."""
    layers = max(len(r) for r in stage_layer_ranges(model.num_hidden_layers, strategy.pp))
    tp = 1 if attention_dp else strategy.tp
    return kv_cache_bytes_per_token(model, tp, bytes_per_element(kv_format), layers)


@dataclass(frozen=True)
class ServingMemory:
    """Memory of one serving GPU under an engine, and the sequences its KV pool holds."""

    capacity_bytes: float
    weights_bytes: float
    workspace_bytes: float
    runtime_bytes: float
    kv_pool_bytes: float
    """Bytes given to KV pages (negative = the weights and workspace alone do not fit)."""
    kv_bytes_per_token: float
    kv_block_tokens: int
    kv_pool_tokens: int
    """Tokens the pool of the model replica holds (whole pages; attention DP: all tp ranks)."""
    max_running_seqs: int
    """Engine cap on sequences in flight."""

    def max_concurrent_seqs(self, context_tokens: int) -> int:
        """Sequences of ``context_tokens`` that fit at once: min(engine cap, pages / pages per seq)."""
        per_seq = math.ceil(context_tokens / self.kv_block_tokens) * self.kv_block_tokens
        return int(min(self.max_running_seqs, self.kv_pool_tokens // per_seq))

    def fits(self, context_tokens: int) -> bool:
        """At least one sequence of ``context_tokens`` fits beside the weights."""
        return self.max_concurrent_seqs(context_tokens) >= 1

    @property
    def resident_bytes(self) -> float:
        """Bytes the engine holds per GPU once started: weights + workspace + runtime + the KV
        pool it preallocates (vLLM/SGLang reserve the pool up front, so this is also the peak;
        a negative pool, weights that do not fit, counts as 0)."""
        return self.weights_bytes + self.workspace_bytes + self.runtime_bytes + \
            max(self.kv_pool_bytes, 0.0)

    def to_dict(self) -> dict:
        GB = 1e9
        return {"capacity_GB": self.capacity_bytes / GB, "weights_GB": self.weights_bytes / GB,
                "workspace_GB": self.workspace_bytes / GB, "runtime_GB": self.runtime_bytes / GB,
                "kv_pool_GB": self.kv_pool_bytes / GB, "kv_pool_tokens": self.kv_pool_tokens,
                "kv_block_tokens": self.kv_block_tokens}


def serving_memory_paged(model: ModelSpec, capacity_bytes: float, strategy: Strategy,
                         precision: InferencePrecision, engine: EngineConfig,
                         extra_weights_bytes: float = 0.0,
                         attention_dp: bool = False) -> ServingMemory:
    """The engine's memory split on one GPU (formula in the module docstring). With attention
    DP each of the tp ranks holds the KV of its own sequences, so the replica's pool
    (``kv_pool_tokens``) is tp × one GPU's; the workspace is of one rank's step budget."""
    weights = weights_bytes_per_gpu(model, strategy, precision.weights) + extra_weights_bytes
    workspace = step_workspace_bytes(model, strategy, engine.token_budget_per_step,
                                     engine.max_running_seqs)
    runtime = load_memory_overheads().inference_runtime_bytes
    used = weights + workspace + runtime
    f = engine.gpu_memory_fraction
    pool = f * capacity_bytes - used if engine.gpu_memory_fraction_basis == "total" else \
        f * (capacity_bytes - used)
    per_token = kv_bytes_per_token_per_gpu(model, strategy, precision.kv_cache, attention_dp)
    block = engine.kv_block_tokens
    tokens = int(max(pool, 0.0) // (per_token * block)) * block if per_token > 0 else 0
    if attention_dp:
        tokens *= strategy.tp
    return ServingMemory(capacity_bytes=capacity_bytes, weights_bytes=weights,
                         workspace_bytes=workspace, runtime_bytes=runtime, kv_pool_bytes=pool,
                         kv_bytes_per_token=per_token, kv_block_tokens=block,
                         kv_pool_tokens=tokens,
                         max_running_seqs=engine.max_running_seqs * (strategy.tp if attention_dp else 1))
