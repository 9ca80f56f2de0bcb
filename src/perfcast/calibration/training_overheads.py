"""Loader of ``training_overheads.yaml``: per-generation end-to-end step overheads."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Final

from pydantic import BaseModel, ConfigDict, Field

from perfcast.calibration._files import CALIBRATION_DIR, load_yaml_model
from perfcast.calibration.fit_record import FitRecord

TRAINING_OVERHEADS_PATH: Final[Path] = CALIBRATION_DIR / "training_overheads.yaml"
POOLED_KEY: Final[str] = "default"
"""Entry used for a generation without its own fit: the pooled fit over every generation."""


class TrainingOverhead(BaseModel):
    """Per-step overhead of one GPU generation."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    step_overhead_s: float = Field(ge=0, description="Fixed seconds per optimizer step.")
    compute_overhead_fraction: float = Field(
        ge=0, description="Extra time as a fraction of the modelled step."
    )
    source: str = Field(description="How the values were obtained.")


class TrainingOverheads(BaseModel):
    """Per-generation entries plus ``default``, the pooled fit used (and flagged) for a
    generation with too few measured rows of its own."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    fit: FitRecord | None = Field(default=None, description="How the file was fitted.")
    generations: dict[str, TrainingOverhead]

    def for_generation(self, generation: str) -> TrainingOverhead:
        """The generation's overheads, else the pooled ``default`` entry."""
        return self.generations.get(generation, self.generations[POOLED_KEY])

    def is_fallback(self, generation: str) -> bool:
        """True when ``generation`` has no entry of its own (the pooled fit is used)."""
        return generation == POOLED_KEY or generation not in self.generations


@cache
def load_training_overheads(path: Path | None = None) -> TrainingOverheads:
    """The training overheads in ``path`` (the shipped file when None); cached."""
    return load_yaml_model(TrainingOverheads, path or TRAINING_OVERHEADS_PATH)
