"""Training throughput vs the public ground truth, OUT OF SAMPLE. Bounds only ever tighten.

Every bound here is on leave-one-source-out cross-validated error (``perfcast validate
--cross-validate source``): each source's rows are forecast by the calibration refitted
without that source (``perfcast.validate.cross_validate``), so a bound cannot be met by
refitting constants to the rows it checks, and a physics change that generalises shows here.

Measured (2026-11-24, analytical kernels, calibration = ``perfcast calibrate`` on
shared/ground_truth: f ampere 0.156, hopper 0.312, blackwell 0.305, pooled 0.215; stream
overlap 0.814; Triton/FA2 1.569): 331 rows forecast (319 dense, 12 MoE). CV MAPE 14.1% all,
14.0% dense, 16.5% MoE; dense median 10.8%, within 10% 47.0%, within 20% 84.6%. In-sample
(same rows, full fit): dense 8.65%, MoE 15.1%. Per source CV MAPE: korthikanti2022 4.2%,
mcore_moe_modelzoo 25.2%, megatron_sc21 44.3% (rows 12/13/15/16 +73..+202%), mosaic_mpt 11.9%
(4-7% in sample: only its rows constrain the Triton ratio), nemo_automodel 14.5%, nemo_perf
10.1%, torchao_float8 19.7%, torchtitan 18.5%.
Issue 21 targets (CV): dense <= 12%, all <= 15%, every source <= 20%.
"""

from __future__ import annotations

import statistics

import pytest

from cv_data import training_cv

NUM_ROWS = 331
NUM_DENSE_ROWS = 319
NUM_MOE_ROWS = 12
CV_MAPE_BOUND = 0.15
CV_DENSE_MAPE_BOUND = 0.15
CV_DENSE_MEDIAN_BOUND = 0.115
CV_DENSE_WITHIN_10_MIN = 0.44
CV_DENSE_WITHIN_20_MIN = 0.82
CV_SOURCE_BOUNDS = {
    "korthikanti2022": 0.06,
    "mcore_moe_modelzoo": 0.28,
    "megatron_sc21": 0.47,
    "mosaic_mpt": 0.13,
    "nemo_automodel": 0.17,
    "nemo_perf": 0.12,
    "torchao_float8": 0.22,
    "torchtitan": 0.20,
}
KORTHIKANTI_ROW_BOUND = 0.08
CV_MOE_MAPE_BOUND = 0.18
CV_MOE_WITHIN_20_MIN = 9
NEMO_MIXTRAL_ROW_BOUND = 0.19


@pytest.fixture(scope="module")
def cv_rows():
    return training_cv().rows


def _report(label, rows) -> str:
    errors = [abs(r.error) for r in rows]
    worst = sorted(rows, key=lambda r: -abs(r.error))[:5]
    return (f"{label}: rows {len(errors)} CV MAPE {statistics.mean(errors):.1%} median "
            f"{statistics.median(errors):.1%}; worst: "
            + ", ".join(f"{r.row_id} ({r.model}, {r.error:+.0%})" for r in worst))


def test_every_forecastable_row_is_cross_validated(cv_rows):
    assert len(cv_rows) == NUM_ROWS
    assert sum(r.arch_type == "dense" for r in cv_rows) == NUM_DENSE_ROWS
    assert sum(r.arch_type == "moe" for r in cv_rows) == NUM_MOE_ROWS


def test_cv_mape_all_rows(cv_rows):
    assert statistics.mean(abs(r.error) for r in cv_rows) <= CV_MAPE_BOUND


def test_dense_quality_ab_aggregate(cv_rows):
    """Dense quality A/B rows, leave-one-source-out."""
    rows = [r for r in cv_rows if r.arch_type == "dense" and r.quality in ("A", "B")]
    errors = [abs(r.error) for r in rows]
    print(_report("dense", rows))
    assert statistics.mean(errors) <= CV_DENSE_MAPE_BOUND
    assert statistics.median(errors) <= CV_DENSE_MEDIAN_BOUND
    assert sum(e <= 0.10 for e in errors) / len(errors) >= CV_DENSE_WITHIN_10_MIN
    assert sum(e <= 0.20 for e in errors) / len(errors) >= CV_DENSE_WITHIN_20_MIN


@pytest.mark.parametrize("source, bound", sorted(CV_SOURCE_BOUNDS.items()))
def test_cv_mape_per_source(cv_rows, source, bound):
    rows = [r for r in cv_rows if r.source_id == source]
    assert rows
    print(_report(source, rows))
    assert statistics.mean(abs(r.error) for r in rows) <= bound


def test_every_source_is_bounded(cv_rows):
    assert {r.source_id for r in cv_rows} == set(CV_SOURCE_BOUNDS)


def test_korthikanti_step_times(cv_rows):
    rows = [row for row in cv_rows if row.source_id == "korthikanti2022"]
    assert len(rows) == 8
    for row in rows:
        assert abs(row.error) <= KORTHIKANTI_ROW_BOUND, (row.row_id, row.error)


def test_moe_rows(cv_rows):
    rows = [r for r in cv_rows if r.arch_type == "moe"]
    errors = [abs(r.error) for r in rows]
    print(_report("moe", rows))
    assert statistics.mean(errors) <= CV_MOE_MAPE_BOUND
    assert sum(e <= 0.20 for e in errors) >= CV_MOE_WITHIN_20_MIN


def test_nemo_mixtral_rows_each_within_bound(cv_rows):
    """Issue 6 done-when: every NeMo Mixtral row within 20%, here out of sample."""
    rows = [r for r in cv_rows if r.source_id == "nemo_perf" and "mixtral" in r.model]
    assert len(rows) == 3
    for row in rows:
        assert abs(row.error) <= NEMO_MIXTRAL_ROW_BOUND, (row.row_id, row.model, row.gpu,
                                                           row.error)
