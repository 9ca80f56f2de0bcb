"""EP size of a ground-truth row that names DeepEP / HybridEP but leaves ``ep`` empty
(``row_strategy.unstated_expert_parallel``, profile field ``expert_parallel_unstated``).

DeepEP runs only with EP > 1 (nemo-automodel apply_ep asserts it), so EP 1 cannot be what such
a row ran; NeMo AutoModel's profile reads it as the experts spread over the whole FSDP group.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from perfcast.catalog.frameworks import load_framework_profile, pick
from perfcast.estimate.training import estimate_training
from perfcast.validate.row_strategy import ParallelSizes, unstated_expert_parallel
from perfcast.validate.training_rows import ParsedRow, parse_row, read_rows

DATA = Path(__file__).resolve().parents[2] / "shared" / "ground_truth" / "training.csv"
AUTOMODEL = "NeMo AutoModel (TE + DeepEP + FlexAttn)"


def _sizes(dp: int, tp: int = 1, cp: int = 1) -> ParallelSizes:
    return ParallelSizes(num_gpus=tp * cp * dp, tp=tp, pp=1, vpp=1, cp=cp, ep=1, dp=dp)


def _row(framework: str = AUTOMODEL, ep: str = "") -> dict[str, str | None]:
    return {"framework": framework, "ep": ep, "version_or_date": "2025-10-02"}


def test_automodel_profile_states_the_rule_with_a_source():
    found = load_framework_profile("nemo automodel")
    picked = pick(found.profile.expert_parallel_unstated, found.version)
    assert picked is not None and picked.value == "data_parallel"
    assert "apply_ep" in picked.source and "mesh_utils" in picked.source


@pytest.mark.parametrize(("dp", "experts", "expected"), [
    (64, 128, 64),  # GPT-OSS 120B on 64 H100: two experts per rank
    (8, 32, 8),     # GPT-OSS 20B on 8 H100
    (64, 32, 32),   # fewer experts than ranks: every expert on its own rank, EP 32
    (48, 128, 16),  # the largest divisor of both
])
def test_experts_spread_over_the_fsdp_group(dp, experts, expected):
    notes: list[str] = []
    sizes = unstated_expert_parallel(_row(), _sizes(dp), experts, notes)
    assert sizes.ep == expected
    assert sizes.dp == dp and sizes.tp == 1  # nothing else changes
    assert any(f"EP {expected}" in n for n in notes)


def test_tp_and_cp_ranks_count_as_non_pipeline_ranks():
    """AutoModel carves EP out of dp*cp*tp (mesh_utils: non_pp_size % ep_size == 0)."""
    sizes = unstated_expert_parallel(_row(), _sizes(dp=4, tp=2, cp=2), 128, [])
    assert sizes.ep == 16


@pytest.mark.parametrize("row", [
    _row(ep="1"),                                     # a stated EP wins, even 1
    _row(ep="8"),
    _row(framework="NeMo AutoModel (TE + fsdp2_prefetch)"),  # no EP-only dispatcher
    _row(framework="Megatron-Core; token dispatcher DeepEP"),  # profile without the rule
    _row(framework="some unknown trainer with DeepEP"),  # no profile
])
def test_left_alone(row):
    sizes = _sizes(64)
    assert unstated_expert_parallel(row, sizes, 128, []) == sizes


def test_dense_model_left_alone():
    assert unstated_expert_parallel(_row(), _sizes(64), 0, []).ep == 1


def _parsed(row_id: str) -> ParsedRow:
    rows = {r["row_id"]: r for r in read_rows(DATA)}
    parsed = parse_row(rows[row_id])
    assert isinstance(parsed, ParsedRow), parsed
    return parsed


@pytest.mark.skipif(not DATA.exists(), reason="shared ground truth not present")
def test_gpt_oss_120b_row_reads_ep_64_and_deepep():
    """training.csv 516 (NeMo AutoModel GPT-OSS 120B, 64 H100, ep empty, DeepEP): read as
    EP 1 the FSDP all-gathers of all 117B parameters over InfiniBand took 9.4 s of a 12.5 s
    step (measured 4.30 s) and the model did not fit; EP 64 leaves only the dense weights to
    gather."""
    row = _parsed("516")
    assert row.strategy.ep == 64 and row.strategy.moe_token_dispatcher == "deepep"
    report = estimate_training(row.model, row.system, row.strategy, row.workload)
    assert report.memory.fits
    assert report.breakdown.dp_comm_s < 0.1 * report.step_time_s
    error = report.tokens_per_s_per_gpu / row.measured_tokens_per_s_per_gpu - 1
    assert abs(error) < 0.20  # was -0.655 read as EP 1


@pytest.mark.skipif(not DATA.exists(), reason="shared ground truth not present")
def test_gpt_oss_20b_row_reads_ep_8():
    row = _parsed("515")
    assert row.strategy.ep == 8 and row.strategy.moe_token_dispatcher == "deepep"
