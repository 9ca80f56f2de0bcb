"""Loader of ``memory_overheads.yaml``: allowances the memory formulas do not model."""

from __future__ import annotations

from functools import lru_cache
from importlib import resources

from pydantic import BaseModel, ConfigDict, Field

from perfcast.yaml_load import safe_load


class MemoryOverheads(BaseModel):
    """Calibrated memory allowances (bytes, fractions), each with its source."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    cuda_context_bytes: float = Field(ge=0, description="CUDA context and library handles.")
    nccl_bytes_per_group: float = Field(ge=0, description="NCCL buffers per process group.")
    allocator_fragmentation_fraction: float = Field(
        ge=0, lt=1, description="Caching-allocator slack on activations and gradients."
    )
    inference_workspace_tokens_factor: float = Field(
        ge=0, description="Hidden-size 16-bit vectors of inference workspace per live token."
    )
    inference_runtime_bytes: float = Field(
        ge=0, description="Inference runtime baseline: CUDA context, library workspaces, pools."
    )


@lru_cache(maxsize=1)
def load_memory_overheads() -> MemoryOverheads:
    """The shipped calibration (cached)."""
    text = resources.files("perfcast.calibration").joinpath("memory_overheads.yaml").read_text()
    return MemoryOverheads.model_validate(safe_load(text))
