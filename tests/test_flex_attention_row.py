"""A ground-truth row whose framework names FlexAttention is timed with the FlashAttention-2
kernel class (``row_strategy.attention_kernel``): FlexAttention is PyTorch's Triton template of
the FA2 algorithm, not Hopper's FlashAttention-3."""

from __future__ import annotations

from pathlib import Path

import pytest

from perfcast.estimate.training import estimate_training
from perfcast.specs.strategy import Strategy
from perfcast.validate.row_strategy import attention_kernel
from perfcast.validate.training_rows import ParsedRow, parse_row, read_rows

DATA = Path(__file__).resolve().parents[2] / "shared" / "ground_truth" / "training.csv"


@pytest.mark.parametrize("framework", [
    "NeMo AutoModel (TE + DeepEP + FlexAttn)",
    "torchtitan (flex_attention)",
    "NeMo AutoModel (Flex Attention)",
])
def test_flex_attention_reads_fa2(framework):
    notes: list[str] = []
    assert attention_kernel({"framework": framework}, notes) == "fa2"
    assert notes and "FlashAttention-2" in notes[0]


@pytest.mark.parametrize("framework", [
    "NeMo AutoModel (TE + DeepEP)",
    "Megatron-Core; token dispatcher DeepEP",
    "flexible trainer",   # 'flex' inside another word is not FlexAttention
    "",
])
def test_other_frameworks_keep_the_profile_kernel(framework):
    notes: list[str] = []
    assert attention_kernel({"framework": framework}, notes) is None
    assert notes == []


@pytest.mark.skipif(not DATA.exists(), reason="shared ground truth not present")
def test_gpt_oss_rows_time_fa2_slower_than_the_hopper_kernel():
    """Rows 515/516 (GPT-OSS on H100, FlexAttn): FA2-class attention takes longer than
    Hopper's own (FA3/cuDNN) kernel would."""
    rows = {r["row_id"]: r for r in read_rows(DATA)}
    for row_id in ("515", "516"):
        row = parse_row(rows[row_id])
        assert isinstance(row, ParsedRow), row
        assert row.strategy.attention_kernel == "fa2"
        own = Strategy.model_validate({**row.strategy.model_dump(), "attention_kernel": "auto"})
        flex = estimate_training(row.model, row.system, row.strategy, row.workload)
        fa3 = estimate_training(row.model, row.system, own, row.workload)
        assert flex.breakdown.compute_attention_s > 1.2 * fa3.breakdown.compute_attention_s
