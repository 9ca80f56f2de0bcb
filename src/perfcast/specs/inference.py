"""Typed, frozen inputs of an inference forecast: workload, precisions, offloading, speculation.

The parallel layout is the ordinary ``Strategy`` (tp, pp, ep; dp = replicas); these records say
what is served (``InferenceWorkload``), in which number formats (``InferencePrecision``), where
the bytes live (``Offload``) and whether a draft model speculates (``SpeculativeDecoding``).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from perfcast.specs.model import ModelSpec

Batching = Literal["static", "continuous"]
WeightFormat = Literal["bf16", "fp16", "fp8", "int8", "int4", "fp4"]
ActivationFormat = Literal["bf16", "fp16", "fp8", "fp4"]
KVFormat = Literal["bf16", "fp16", "fp8"]

WEIGHT_ONLY_FORMATS = frozenset({"int8", "int4"})
"""Weight formats dequantized to the activation format inside the GEMM (weight-only)."""


class InferenceWorkload(BaseModel):
    """What is served: ``batch_size`` sequences of ``input_len`` prompt and ``output_len`` new tokens."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    batch_size: int = Field(default=1, gt=0, description="Concurrent sequences per model replica.")
    input_len: int = Field(default=128, gt=0, description="Prompt tokens per sequence.")
    output_len: int = Field(default=128, gt=0, description="Generated tokens per sequence (incl. the first).")
    batching: Batching = Field(
        default="static",
        description="static: the batch is prefilled, then decoded together; continuous: steady "
        "state of in-flight batching with chunked prefill mixed into decode steps.")
    prefill_chunk_tokens: int = Field(
        default=2048, gt=0, description="Chunked-prefill token budget per step (continuous).")

    @property
    def context_tokens(self) -> int:
        """Largest KV length a sequence reaches: input + output."""
        return self.input_len + self.output_len


class InferencePrecision(BaseModel):
    """Storage format of weights and KV cache, and the math format of activations."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    weights: WeightFormat = Field(default="bf16", description="Weight storage format.")
    activations: ActivationFormat = Field(
        default="bf16", description="GEMM input format (fp8/fp4 = W+A quantization).")
    kv_cache: KVFormat = Field(default="bf16", description="KV-cache storage format.")

    @property
    def weight_only(self) -> bool:
        """Weights stored as int8/int4, or FP4 beside 16-bit activations (MXFP4 MoE weights on
        GPUs without FP4 tensor cores, "as released" W4A16), dequantized to 16-bit inside the
        GEMM."""
        return self.weights in WEIGHT_ONLY_FORMATS or (
            self.weights == "fp4" and self.activations in ("bf16", "fp16"))

    @model_validator(mode="after")
    def _check(self) -> InferencePrecision:
        if self.activations in ("fp8", "fp4") and self.weights != self.activations:
            raise ValueError(f"activations={self.activations!r} needs weights={self.activations!r} "
                             f"(got weights={self.weights!r})")
        if self.weight_only and self.activations not in ("bf16", "fp16"):
            raise ValueError(f"weight-only weights={self.weights!r} need 16-bit activations "
                             f"(got activations={self.activations!r})")
        return self


def _fraction(description: str):
    return Field(default=0.0, ge=0.0, le=1.0, description=description)


class Offload(BaseModel):
    """Fractions of weights, KV cache and activations kept off the GPU (FlexGen placement).

    Sheng et al., FlexGen, 2023 §4: each tensor class is split GPU / CPU / disk by percentages;
    what is off the GPU crosses PCIe (and NVMe for disk) every time it is used.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    weights_cpu: float = _fraction("Share of weights in host memory.")
    weights_disk: float = _fraction("Share of weights on NVMe.")
    kv_cpu: float = _fraction("Share of the KV cache in host memory.")
    kv_disk: float = _fraction("Share of the KV cache on NVMe.")
    activations_cpu: float = _fraction("Share of activations in host memory.")
    activations_disk: float = _fraction("Share of activations on NVMe.")

    @model_validator(mode="after")
    def _check(self) -> Offload:
        for name in ("weights", "kv", "activations"):
            total = getattr(self, f"{name}_cpu") + getattr(self, f"{name}_disk")
            if total > 1.0 + 1e-12:
                raise ValueError(f"{name}_cpu + {name}_disk = {total} exceeds 1")
        return self

    @property
    def any(self) -> bool:
        return any(getattr(self, name) > 0 for name in type(self).model_fields)


class SpeculativeDecoding(BaseModel):
    """A draft model proposes ``num_draft_tokens`` tokens; the target verifies them in one step."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    draft_model: ModelSpec = Field(description="The small draft model (same tokenizer).")
    acceptance_rate: float = Field(gt=0.0, lt=1.0, description="Per-token acceptance rate alpha.")
    num_draft_tokens: int = Field(default=4, gt=0, description="Draft tokens per step k.")
