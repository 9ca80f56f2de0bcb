"""Workload: what is trained, independent of how (sequence length and global batch)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from perfcast.specs.limits import MAX_BATCH_SEQUENCES, MAX_SEQ_LENGTH


class Workload(BaseModel):
    """A training workload: sequences of ``seq_length`` tokens, ``global_batch_size`` per step."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    seq_length: int = Field(gt=0, le=MAX_SEQ_LENGTH.value,
                            description="Tokens per sequence s (Megatron --seq-length).")
    global_batch_size: int = Field(
        gt=0, le=MAX_BATCH_SEQUENCES.value,
        description="Sequences per optimizer step (Megatron --global-batch-size)."
    )

    @property
    def tokens_per_step(self) -> int:
        """Tokens consumed by one optimizer step: global batch x sequence length."""
        return self.global_batch_size * self.seq_length
