"""80% bands on every train/infer forecast, from cross-validated residuals of comparable runs.

Coverage is measured on the held-out (leave-one-source-out) forecasts of the public rows,
each against the shipped band of its group (generation / dense-MoE / scale): 78.2% of 331
training rows and 79.2% of 428 static/batch-1 serving rows fall inside (bound: 75-85%).
Reported, not bounded: with the band itself rebuilt without the row's source, coverage drops
to 37% (training) and 61% (serving) -- a source's own systematic offset (MosaicML is 216 of the
331 training rows, FasterTransformer 320 of the 428 serving rows) is most of the error a new
source sees, so a band from other sources is too narrow for it.
"""

from __future__ import annotations

import json
import math

import pytest
from typer.testing import CliRunner

from perfcast.calibration.bundle import load_calibration
from perfcast.cli.main import app
from perfcast.validate.intervals import coverage, residuals_serving, residuals_training

from cv_data import serving_cv, serving_rows, training_cv

runner = CliRunner()
COVERAGE_RANGE = (0.75, 0.85)


def _coverage(residuals, bands) -> float:
    cal = load_calibration().intervals
    inside = 0
    for r in residuals:
        band = bands.interval(r.generation, r.arch, r.scale, 1.0, True, cal.level, cal.min_runs,
                              cal.widen_factor)
        inside += band.low <= math.exp(r.log_time_ratio) <= band.high
    return inside / len(residuals)


def test_training_bands_cover_80_percent_of_held_out_rows():
    residuals = residuals_training(training_cv().rows)
    share = _coverage(residuals, load_calibration().intervals.training)
    print(f"training: {share:.1%} inside; band rebuilt without the source: "
          f"{coverage(residuals):.1%}")
    assert COVERAGE_RANGE[0] <= share <= COVERAGE_RANGE[1]


def test_serving_bands_cover_80_percent_of_held_out_rows():
    residuals = residuals_serving(serving_cv().rows, serving_rows().concurrency_ids)
    share = _coverage(residuals, load_calibration().intervals.serving)
    print(f"serving: {share:.1%} inside; band rebuilt without the source: "
          f"{coverage(residuals):.1%}")
    assert COVERAGE_RANGE[0] <= share <= COVERAGE_RANGE[1]


def _train(system: str) -> dict:
    result = runner.invoke(app, ["train", "-m", "llama3-8b", "--gpus", "8", "--system", system,
                                 "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_train_json_interval_brackets_the_forecast():
    data = _train("dgx-h100")
    band = data["interval"]
    assert band["level"] == 0.8 and not band["widened"]
    assert band["low"] < data["tokens_per_s_per_gpu"] < band["high"]
    assert band["basis"].startswith("cv residuals of ") and "hopper" in band["basis"]


def test_band_widens_without_a_comparable_run():
    near = _train("dgx-h100")["interval"]
    far = _train("mi355x-8")
    band = far["interval"]
    assert band["widened"] and "no comparable run on cdna4" in band["basis"]
    assert band["low"] < far["tokens_per_s_per_gpu"] < band["high"]
    all_runs = load_calibration().intervals.training.groups["all"]
    assert math.log(band["high"] / band["low"]) == pytest.approx(
        1.5 * (all_runs.high - all_runs.low), rel=1e-9)
    assert near["basis"] != band["basis"]


def test_train_text_shows_the_band():
    result = runner.invoke(app, ["train", "-m", "llama3-8b", "--gpus", "8"])
    assert "(80%)" in result.stdout and "±" in result.stdout


def test_infer_json_and_text_carry_the_band():
    args = ["infer", "-m", "llama3-8b", "--system", "dgx-h100"]
    data = json.loads(runner.invoke(app, args + ["--json"]).stdout)
    band = data["interval"]
    assert band["level"] == 0.8
    assert band["low"] < data["output_tokens_per_s_per_gpu"] < band["high"]
    assert "(80%)" in runner.invoke(app, args).stdout
