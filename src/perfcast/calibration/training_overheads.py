"""Loader of ``training_overheads.yaml``: per-generation end-to-end step overheads."""

from __future__ import annotations

from functools import lru_cache
from importlib import resources

from pydantic import BaseModel, ConfigDict, Field

from perfcast.yaml_load import safe_load


class TrainingOverhead(BaseModel):
    """Per-step overhead of one GPU generation."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    step_overhead_s: float = Field(ge=0, description="Fixed seconds per optimizer step.")
    compute_overhead_fraction: float = Field(
        ge=0, description="Extra time as a fraction of the modelled step."
    )
    source: str = Field(description="How the values were obtained.")


class TrainingOverheads(BaseModel):
    model_config = ConfigDict(frozen=True)

    generations: dict[str, TrainingOverhead]

    def for_generation(self, generation: str) -> TrainingOverhead:
        """The generation's overheads, else the ``default`` entry."""
        return self.generations.get(generation, self.generations["default"])


@lru_cache(maxsize=1)
def load_training_overheads() -> TrainingOverheads:
    text = resources.files("perfcast.calibration").joinpath("training_overheads.yaml").read_text()
    return TrainingOverheads(generations=safe_load(text))
