"""Memory per GPU of inference: weights, KV cache, activation workspace, runtime.

- weights: parameters of the GPU's pipeline stage, split by TP (``graph.param_sharding``),
  at the weight precision (2 B for fp16/bf16, 1 B for fp8/int8, 0.5 B for int4);
- KV cache (Pope et al. 2022, "Efficiently Scaling Transformer Inference" §3.1):
  2 (K and V) · layers · kv_heads · head_dim · bytes per live token, split over TP by KV head
  (MQA/GQA heads replicate when tp exceeds them); MLA caches the compressed latent
  (kv_lora_rank + qk_rope_head_dim) per layer instead (DeepSeek-V2 §2.1.2);
- workspace: engines pre-allocate activation buffers for every live token of the largest
  batch; calibrated as a number of 16-bit hidden-size vectors per token (memory_overheads.yaml);
- runtime: CUDA context, library workspaces and allocator pools (calibrated).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from perfcast.calibration.memory_overheads import MemoryOverheads, load_memory_overheads
from perfcast.graph.param_sharding import stage_params
from perfcast.specs.dtypes import ACTIVATION_BYTES, bytes_per_element
from perfcast.specs.model import ModelSpec
from perfcast.specs.strategy import Strategy


def kv_cache_bytes_per_token(model: ModelSpec, tp: int = 1, kv_bytes: float = 2.0,
                             num_layers: int | None = None) -> float:
    """KV-cache bytes per token per GPU: 2·L·g·d·bytes / tp (GQA heads split over TP).

    When tp exceeds the KV heads, each GPU keeps one full head (replication), as vLLM/TRT-LLM do.
    MLA: L·(kv_lora_rank + qk_rope_head_dim)·bytes, replicated across TP.
    """
    layers = model.num_hidden_layers if num_layers is None else num_layers
    if model.is_mla:
        return layers * ((model.kv_lora_rank or 0) + (model.qk_rope_head_dim or 0)) * kv_bytes
    heads_per_gpu = max(model.num_kv_heads / tp, 1.0)
    return 2 * layers * heads_per_gpu * model.kv_channels * kv_bytes


@dataclass(frozen=True)
class InferenceMemory:
    """Memory of one GPU serving ``batch_size`` sequences of up to ``context_tokens`` each."""

    weights_bytes: float
    kv_cache_bytes: float
    workspace_bytes: float
    runtime_bytes: float
    capacity_bytes: float

    @property
    def total_bytes(self) -> float:
        return self.weights_bytes + self.kv_cache_bytes + self.workspace_bytes + self.runtime_bytes

    @property
    def fits(self) -> bool:
        return self.total_bytes <= self.capacity_bytes

    def to_dict(self) -> dict:
        out = asdict(self)
        out.update(total_bytes=self.total_bytes, fits=self.fits)
        return out


def estimate_inference_memory(
    model: ModelSpec,
    capacity_bytes: float,
    tp: int,
    pp: int,
    batch_size: int,
    context_tokens: int,
    weight_precision: str = "fp16",
    kv_bytes: float = 2.0,
    overheads: MemoryOverheads | None = None,
) -> InferenceMemory:
    """Peak memory of the heaviest pipeline stage's GPU (``context_tokens`` = input + output)."""
    cal = overheads or load_memory_overheads()
    strategy = Strategy(num_gpus=tp * pp, tp=tp, pp=pp)
    worst = max((stage_params(model, strategy, i) for i in range(pp)), key=lambda p: p.total)
    live_tokens = batch_size * context_tokens
    weights = worst.total * bytes_per_element(weight_precision)
    kv = live_tokens * kv_cache_bytes_per_token(model, tp, kv_bytes, worst.num_layers)
    workspace = (live_tokens * cal.inference_workspace_tokens_factor * model.hidden_size
                 * ACTIVATION_BYTES)
    runtime = cal.inference_runtime_bytes
    return InferenceMemory(
        weights_bytes=weights,
        kv_cache_bytes=kv,
        workspace_bytes=workspace,
        runtime_bytes=runtime,
        capacity_bytes=capacity_bytes,
    )
