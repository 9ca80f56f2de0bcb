"""Loader of ``inference_overheads.yaml``: per-generation serving overheads the operator model
does not see (host/framework time per step and per layer, prefill slowdown, dequantization)."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Final

from pydantic import BaseModel, ConfigDict, Field

from perfcast.calibration._files import CALIBRATION_DIR, load_yaml_model
from perfcast.calibration.fit_record import FitRecord

INFERENCE_OVERHEADS_PATH: Final[Path] = CALIBRATION_DIR / "inference_overheads.yaml"


class InferenceOverhead(BaseModel):
    """Overheads of one GPU generation."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    step_overhead_s: float = Field(
        ge=0, description="Fixed seconds per forward step (sampling, host sync, scheduling).")
    layer_overhead_s: float = Field(
        ge=0, description="Seconds per layer per step beyond the kernels' own launch overhead.")
    prefill_layer_overhead_s: float = Field(
        ge=0, description="Extra seconds per layer in a prefill step (unfused host launches).")
    prefill_overhead_fraction: float = Field(
        ge=0, description="Extra prefill time as a fraction of the modelled compute.")
    bandwidth_efficiency: float = Field(
        gt=0, le=1.5, description="Achieved share of the kernel model's HBM rate in serving steps.")
    source: str = Field(description="How the values were obtained.")


class InferenceOverheads(BaseModel):
    """The whole file: per-generation blocks (``default`` required) and dequantization."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    fit: FitRecord | None = Field(default=None, description="How the file was fitted.")
    generations: dict[str, InferenceOverhead]
    dequant_bandwidth_efficiency: dict[str, float] = Field(
        description="Weight-only format -> achieved share of the weight-streaming rate.")
    dequant_source: str = Field(description="Where the dequantization factors come from.")
    gqa_kv_read_exponent: float = Field(
        default=0.0, ge=0, le=1,
        description="Decode attention reads each cached KV head g^x times for a group of g "
        "query heads (0: once, grouped kernels; 1: once per query head).")
    gqa_source: str = Field(default="", description="Where the exponent comes from.")

    def for_generation(self, generation: str) -> InferenceOverhead:
        """The generation's block, else ``default``."""
        return self.generations.get(generation, self.generations["default"])

    def uses_default(self, generation: str) -> bool:
        """True when ``generation`` has no block of its own (the pooled ``default`` is used)."""
        return generation == "default" or generation not in self.generations


@cache
def load_inference_overheads(path: Path | None = None) -> InferenceOverheads:
    """The serving overheads in ``path`` (the shipped file when None); cached."""
    return load_yaml_model(InferenceOverheads, path or INFERENCE_OVERHEADS_PATH)
