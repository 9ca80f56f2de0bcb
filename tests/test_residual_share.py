"""Residual overhead share of the forecast step (``validate.residual_share``; issue 21: "residual
overhead ≤ 10% of the step for every public training source").

Measured in-sample on the public rows (shipped calibration, branch resid21, 2026-11-24), mean
(max) per source: korthikanti2022 9.9% (10.3), megatron_sc21 9.0% (10.6) -- the only sources
where the done-when is met, bounded below; above it: mosaic_mpt 14.4, nemo_automodel 13.4,
torchao_float8 16.4, torchtitan 17.2, mcore_moe_modelzoo 18.8, megatron_dsv3_gb200 18.8,
nemo_perf 20.1, torchao_moe 22.4, torchtitan_nvfp4 22.3%. Blackwell sources moved down with the
sustained BF16 GEMM efficiency (kernel_analytical.yaml, SimuMax B200 table): nemo_perf 21.5 ->
20.1, torchtitan_nvfp4 26.1 -> 22.3, torchao_moe 26.2 -> 22.4%.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest

from perfcast.validate.compare import validate_training
from perfcast.validate.residual_share import residual_share, residual_share_by_source

from conftest import shared_path

MET_SOURCES_MEAN_BOUND = {"korthikanti2022": 0.10, "megatron_sc21": 0.10}
"""Sources whose mean residual share meets the issue's 10% (measured 9.9% and 9.0%)."""


@dataclass(frozen=True)
class _Row:
    source_id: str
    residual_share: float | None


def test_residual_share_is_other_over_step():
    assert residual_share(0.25, 2.0) == pytest.approx(0.125)
    with pytest.raises(ValueError, match="step_time_s"):
        residual_share(0.1, 0.0)


def test_by_source_mean_and_max_skip_rows_without_a_share():
    rows = [_Row("b", 0.2), _Row("a", 0.1), _Row("b", 0.4), _Row("a", None), _Row("c", None)]
    stats = residual_share_by_source(rows)
    assert list(stats) == ["a", "b"]
    assert stats["a"].to_dict() == {"n": 1, "mean": 0.1, "max": 0.1}
    assert stats["b"].count == 2
    assert stats["b"].mean == pytest.approx(0.3)
    assert stats["b"].max == 0.4


@pytest.fixture(scope="module")
def public_report():
    return validate_training(shared_path("ground_truth", "training.csv"), qualities=("A", "B"))


def test_every_forecast_row_carries_its_share(public_report):
    assert public_report.rows
    for row in public_report.rows:
        assert row.residual_share is not None and 0.0 <= row.residual_share < 1.0, row.row_id
        assert row.to_dict()["residual_share"] == row.residual_share


def test_json_summary_has_the_share_of_every_source(public_report):
    summary = public_report.to_dict()["summary"]
    shares = summary["residual_share_by_source"]
    assert set(shares) == {r.source_id for r in public_report.rows}
    for source, entry in shares.items():
        rows = [r.residual_share for r in public_report.rows if r.source_id == source]
        assert entry["n"] == len(rows)
        assert math.isclose(entry["mean"], sum(rows) / len(rows))
        assert entry["max"] == max(rows)


@pytest.mark.parametrize("source, bound", sorted(MET_SOURCES_MEAN_BOUND.items()))
def test_residual_share_within_ten_percent_where_met(public_report, source, bound):
    stats = residual_share_by_source(public_report.rows)[source]
    assert stats.count > 0
    assert stats.mean <= bound, (source, stats)
