"""Static/batch-1 inference-engine profiles as data: ``catalog/data/frameworks/inference/*.yaml``.

The serving-engine profiles (``catalog.serving_engines``) describe today's schedulers (vLLM,
SGLang, TensorRT-LLM in-flight batching). Older engines that run one static batch — the
FasterTransformer and gpt-fast tables of the public ground truth — differ from them in two
mechanisms the step cost sees, each stated in the profile with its source:

* ``tp_all_reduce``: ``nccl`` (ncclAllReduce: NCCL's latency model, ``comm.select``) or
  ``custom`` (the engine's one-shot all-reduce inside the NVLink domain when faster,
  ``comm.one_shot``; today's engines);
* ``decode_cuda_graphs``: whether a decode step is replayed as a CUDA graph (no host overhead
  per layer or step);
* ``pipeline_micro_batches``: how a static batch is split over pipeline stages: ``fill`` =
  min(batch, pp) micro-batches; ``local_batch`` = FasterTransformer's local batch
  (``estimate.inference.static_micro_batches``);
* ``decode_attention_kernel``: ``per_query_head`` = the decode-attention kernel reads each KV
  head once per query head of its group (masked multi-head attention, or K/V repeated to the
  query heads), so a GQA model's KV reads are amplified (``gqa_kv_read_exponent``,
  ``estimate.inference_kernels.kv_read_amplification``); ``grouped`` = read once per group
  (TensorRT-LLM XQA, FlashInfer, FlashAttention), no amplification. Profiles are per release
  where a release changed a mechanism (TensorRT-LLM v0.5-v0.6 vs v0.7).

``inference_engine(name)`` loads a profile; ``inference_engine_from_text(text)`` finds the
profile whose ``match`` pattern occurs in a framework description (a CSV ``framework`` cell).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from typing import Literal

from perfcast.catalog.files import DATA_DIR, read_mapping
from perfcast.errors import InputError

INFERENCE_ENGINE_DIR = DATA_DIR / "frameworks" / "inference"

TPAllReduce = Literal["custom", "nccl"]
TP_ALL_REDUCE_CHOICES: tuple[str, ...] = ("custom", "nccl")
MicroBatching = Literal["fill", "local_batch"]
MICRO_BATCHING_CHOICES: tuple[str, ...] = ("fill", "local_batch")
DecodeAttentionKernel = Literal["grouped", "per_query_head"]
DECODE_ATTENTION_CHOICES: tuple[str, ...] = ("grouped", "per_query_head")


@dataclass(frozen=True)
class InferenceEngineProfile:
    """One static-batching engine's mechanisms, each with its source."""

    name: str
    display_name: str
    match: str
    """Case-insensitive regular expression found in a framework description."""
    tp_all_reduce: TPAllReduce
    tp_all_reduce_source: str
    decode_cuda_graphs: bool
    decode_cuda_graphs_source: str
    pipeline_micro_batches: MicroBatching
    pipeline_micro_batches_source: str
    decode_attention_kernel: DecodeAttentionKernel
    decode_attention_kernel_source: str


def _setting(data: dict, name: str, key: str) -> tuple[object, str]:
    entry = data.get(key)
    if not isinstance(entry, dict) or "value" not in entry or not entry.get("source"):
        raise InputError("engine", name, f"profile needs {key}: {{value, source}}")
    return entry["value"], str(entry["source"])


@cache
def inference_engine(name: str) -> InferenceEngineProfile:
    """The profile ``<name>.yaml``; ``InputError`` naming the known engines otherwise."""
    path = INFERENCE_ENGINE_DIR / f"{name}.yaml"
    if not path.exists():
        raise InputError("engine", name,
                         f"no inference-engine profile (known: {', '.join(inference_engine_names())})")
    data = read_mapping(path)
    all_reduce, all_reduce_source = _setting(data, name, "tp_all_reduce")
    if all_reduce not in TP_ALL_REDUCE_CHOICES:
        raise InputError("tp_all_reduce", all_reduce, f"must be one of {TP_ALL_REDUCE_CHOICES}")
    graphs, graphs_source = _setting(data, name, "decode_cuda_graphs")
    micro, micro_source = _setting(data, name, "pipeline_micro_batches")
    if micro not in MICRO_BATCHING_CHOICES:
        raise InputError("pipeline_micro_batches", micro, f"must be one of {MICRO_BATCHING_CHOICES}")
    kernel, kernel_source = _setting(data, name, "decode_attention_kernel")
    if kernel not in DECODE_ATTENTION_CHOICES:
        raise InputError("decode_attention_kernel", kernel,
                         f"must be one of {DECODE_ATTENTION_CHOICES}")
    return InferenceEngineProfile(
        name=str(data.get("name", name)), display_name=str(data.get("display_name", name)),
        match=str(data.get("match", name)), tp_all_reduce=all_reduce,  # type: ignore[arg-type]
        tp_all_reduce_source=all_reduce_source, decode_cuda_graphs=bool(graphs),
        decode_cuda_graphs_source=graphs_source,
        pipeline_micro_batches=micro,  # type: ignore[arg-type]
        pipeline_micro_batches_source=micro_source,
        decode_attention_kernel=kernel,  # type: ignore[arg-type]
        decode_attention_kernel_source=kernel_source)


def inference_engine_names() -> tuple[str, ...]:
    """Engines with a static-inference profile."""
    return tuple(sorted(p.stem for p in INFERENCE_ENGINE_DIR.glob("*.yaml")))


def inference_engine_from_text(text: str) -> InferenceEngineProfile | None:
    """The profile whose ``match`` pattern occurs in ``text`` (a framework description), or
    None when no profile matches."""
    for name in inference_engine_names():
        profile = inference_engine(name)
        if re.search(profile.match, text or "", re.I):
            return profile
    return None
