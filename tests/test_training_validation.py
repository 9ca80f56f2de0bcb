"""Training throughput vs the public ground truth. Bounds only ever tighten.

Current (2026-11-21, analytical (tile/wave) kernels, NCCL-style collective algorithms with overlap
(the slower of compute and communication sets the time; a collective overlapped on its own
stream, data-parallel or the CP K/V ring, costs a fitted share of its seconds), one fitted
kernel-overhead fraction per GPU generation, FP8 cast kernels per recipe, attention kernel class
per framework (FA2 / Triton / the generation's own), unfused attention for the 2021-22
Megatron-LM runs, fused bias-dropout-add, NeMo bf16 gradient reduction, node-limited MoE
routing): quality A/B dense rows MAPE 8.4%, median 3.5%, 80.2% within 10%, 91.1% within 20%;
Korthikanti et al. 2022 step times within 5.4%; MoE rows MAPE 12.5% (7 of 9 within 20%: Kimi-K2
row 513 +23%, gpt-oss-120b row 516 -65% whose source does not state EP); the three NeMo Mixtral
rows (B200, GB200) within 5.8%.
Issue targets:
MAPE <= 15%, >= 60% within 10%, Korthikanti within 10%; MoE rows each within 20%.
"""

from __future__ import annotations

import statistics

import pytest

from perfcast.estimate.training import estimate_training
from perfcast.validate.compare import validate_training

from conftest import shared_path

MAPE_BOUND = 0.085
MEDIAN_BOUND = 0.036
WITHIN_10_MIN = 0.80
WITHIN_20_MIN = 0.91
KORTHIKANTI_BOUND = 0.055
MIN_ROWS = 300
MOE_MAPE_BOUND = 0.125
MOE_WITHIN_20_MIN = 7
NEMO_MIXTRAL_BOUND = 0.06


@pytest.fixture(scope="module")
def dense_ab():
    path = shared_path("ground_truth", "training.csv")
    return validate_training(path, estimate_training, qualities=("A", "B"), arch_types=("dense",))


def test_dense_quality_ab_aggregate(dense_ab):
    errors = [abs(row.error) for row in dense_ab.rows]
    assert len(errors) >= MIN_ROWS
    mape = statistics.mean(errors)
    within10 = sum(e <= 0.10 for e in errors) / len(errors)
    within20 = sum(e <= 0.20 for e in errors) / len(errors)
    worst = sorted(dense_ab.rows, key=lambda r: -abs(r.error))[:5]
    print(f"rows {len(errors)} MAPE {mape:.1%} median {statistics.median(errors):.1%} "
          f"within10 {within10:.0%} within20 {within20:.0%}; worst: "
          + ", ".join(f"{r.row_id} ({r.model}, {r.error:+.0%})" for r in worst))
    assert mape <= MAPE_BOUND
    assert statistics.median(errors) <= MEDIAN_BOUND
    assert within10 >= WITHIN_10_MIN
    assert within20 >= WITHIN_20_MIN


def test_korthikanti_step_times(dense_ab):
    rows = [row for row in dense_ab.rows if row.source_id == "korthikanti2022"]
    assert len(rows) == 8
    for row in rows:
        assert abs(row.error) <= KORTHIKANTI_BOUND, (row.row_id, row.error)


@pytest.fixture(scope="module")
def moe_rows():
    path = shared_path("ground_truth", "training.csv")
    return validate_training(path, estimate_training, arch_types=("moe",)).rows


def test_moe_rows(moe_rows):
    errors = [abs(row.error) for row in moe_rows]
    assert len(errors) >= 9
    assert statistics.mean(errors) <= MOE_MAPE_BOUND
    assert sum(e <= 0.20 for e in errors) >= MOE_WITHIN_20_MIN


def test_nemo_mixtral_rows_each_within_bound(moe_rows):
    """Issue 6 done-when: every NeMo Mixtral row within 20% (measured: within 5.5%)."""
    rows = [r for r in moe_rows if r.source_id == "nemo_perf" and "mixtral" in r.model]
    assert len(rows) == 3
    for row in rows:
        assert abs(row.error) <= NEMO_MIXTRAL_BOUND, (row.row_id, row.model, row.gpu, row.error)
