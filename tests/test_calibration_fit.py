"""Calibration as a library and a command: the solver, the response tables against full
forecasts, the shipped files as the output of ``perfcast calibrate``, pooled fallback flags,
and ``--calibration DIR`` / ``validate --cross-validate`` on the command line."""

from __future__ import annotations

import csv
import json
import math

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from perfcast.calibration.bundle import load_calibration
from perfcast.catalog.models import load_model
from perfcast.catalog.systems import load_system
from perfcast.cli.main import app
from perfcast.estimate.inference import estimate_inference
from perfcast.estimate.training import estimate_training
from perfcast.specs.strategy import Strategy
from perfcast.specs.workload import Workload
from perfcast.validate.calibration_writer import DIGITS
from perfcast.validate.fit_inference import fit_inference
from perfcast.validate.fit_training import fit_training
from perfcast.validate.inference_compare import compare_case
from perfcast.validate.least_squares_fit import Bounded, solve

from conftest import shared_path
from cv_data import serving_rows, serving_table, training_data

runner = CliRunner()
TRAINING_TABLE_MAX_DEVIATION = 2.5e-3
"""Moved 2e-3 -> 2.5e-3 after the 2026-11-24 afternoon merges, stated: measured 2.19e-3 on row
561 (mcore_moe_modelzoo Qwen3-235B-A22B, PP x VPP with EP), every other row <= 5e-8: the refit
puts the stream-overlap fraction at 0.664, between grid points, where that row's critical stage
switches -- the same jump the paragraph below describes for row 512 (which no longer jumps).
Moved 5e-4 -> 2e-3 by the MoE routing refit (moe16c), stated: measured 1.5e-3 on row 512
(nemo_automodel DeepSeek-V3, PP 4 x VPP 8, FSDP), every other row <= 4e-8. The refit puts the
stream-overlap fraction at 0.760, just above 0.7575 where that row's critical stage switches
from 1 to 3 (their FSDP exposures differ); ``estimate.training.assemble_step`` takes the
overhead's kernel share from the critical stage, so the step jumps by 0.26% there and linear
interpolation between grid points (0.75, 0.80) cannot follow a jump (a finer 0.025 grid still
leaves 1.0e-3). Not a forecast error: held-out rows are always forecast in full.
Before: measured 2.0e-4 (1.0e-7 before host time).
f scales the kernel time exactly, but a pass with host time is max(GPU stream, host issue)
per segment (schedule.host_time), so a row whose segments change side between f = 0 and
f = 1 is not exactly linear in f; the grid parameters' rows are piecewise linear."""
ROUNDING = 0.6 * 10 ** (1 - DIGITS)
"""Relative rounding of a value written with DIGITS significant digits."""
SERVING_TABLE_MAX_DEVIATION = 0.02
"""Measured 1.6% at the fitted optimum: linear interpolation of the GQA-exponent grid (step
0.2) and the bandwidth grid (step 0.05)."""


def test_solver_standard_error_matches_linear_regression():
    """y = a + b·x with Gaussian noise: s²(JᵀJ)⁻¹ is the textbook OLS covariance when every
    residual is far inside the soft_l1 quadratic zone."""
    rng = np.random.default_rng(0)
    x = np.linspace(0, 1, 200)
    y = 0.3 + 0.2 * x + rng.normal(0, 0.001, x.size)
    (a, b), _ = solve(lambda p: p[0] + p[1] * x - y,
                      [Bounded("a", 0.0, -1, 1), Bounded("b", 0.0, -1, 1)])
    design = np.stack([np.ones_like(x), x], axis=1)
    resid = a.value + b.value * x - y
    cov = np.linalg.inv(design.T @ design) * (resid @ resid) / (x.size - 2)
    assert a.value == pytest.approx(0.3, abs=1e-3) and b.value == pytest.approx(0.2, abs=2e-3)
    assert a.standard_error == pytest.approx(math.sqrt(cov[0, 0]), rel=0.02)
    assert b.standard_error == pytest.approx(math.sqrt(cov[1, 1]), rel=0.02)
    assert not a.at_bound and not b.at_bound


def test_solver_flags_a_value_at_its_bound():
    (p,), _ = solve(lambda v: np.array([v[0] - 5.0, v[0] - 6.0]), [Bounded("p", 0.5, 0, 1)])
    assert p.value == pytest.approx(1.0) and p.at_bound


def test_training_table_matches_full_forecasts():
    data = training_data()
    fit = fit_training(data)
    cal = fit.calibration
    theta = [fit.value(p.name) for p in data.table.parameters]
    fractions = np.array([cal.training_overheads.for_generation(g).compute_overhead_fraction
                          for g in data.table.data.generation])
    table = data.table.predicted(theta, fractions)
    worst = 0.0
    for i, row in enumerate(data.rows):
        full = estimate_training(row.model, row.system, row.strategy, row.workload,
                                 calibration=cal).tokens_per_s_per_gpu
        worst = max(worst, abs(table[i] / full - 1))
    assert worst <= TRAINING_TABLE_MAX_DEVIATION


def test_fold_retabulation_replaces_only_its_rows():
    """A cross-validation fold re-tabulates the rows a changed routing imbalance reaches
    (``ResponseTable.with_rows_of``): those rows take the new table's forecasts, every other
    row keeps its own, at every grid point (here the overlap share's ends)."""
    from perfcast.graph.stage import learned_imbalance_applies
    from perfcast.validate.response_table import ResponseTable

    data = training_data()
    table = data.table
    rows = [r for r in data.rows if r.source_id == "megatron_dsv3_gb200"
            and learned_imbalance_applies(r.strategy)][:2]
    routing = table.calibration.routing.model_copy(update={
        "dropless_load_imbalance": table.calibration.routing.dropless_load_imbalance
        .model_copy(update={"value": 1.0})})
    sub = ResponseTable(rows, table.calibration.replace(moe_routing=routing), data.backend,
                        table.parameters, estimate_training)
    spliced = table.with_rows_of(sub)
    moved = np.array([any(r is s for s in rows) for r in data.rows])
    assert moved.sum() == 2
    fractions = np.full(len(data.rows), 0.3)
    for overlap in (0.0, 1.0):
        theta = [overlap] + [p.centre for p in table.parameters[1:]]
        old, new = table.predicted(theta, fractions), spliced.predicted(theta, fractions)
        np.testing.assert_allclose(new[~moved], old[~moved], rtol=0)
        np.testing.assert_allclose(new[moved], sub.predicted(theta, fractions[:2]), rtol=1e-12)
        assert np.all(new[moved] > old[moved])  # balanced routing: faster


def test_serving_table_matches_full_forecasts():
    table, rows = serving_table(), serving_rows()
    fit = fit_inference(rows, load_calibration(), table=table)
    over = fit.calibration.inference_overheads
    blocks = [over.for_generation(g).model_dump() for g in table.generation]
    dequant = [over.dequant_bandwidth_efficiency.get(str(c.options.get("weight_precision")), 1.0)
               for c in table.cases]
    predicted = table.predicted(blocks, over.gqa_kv_read_exponent, dequant)
    estimator = lambda *a, **k: estimate_inference(*a, **k, calibration=fit.calibration)  # noqa: E731
    full = np.array([compare_case(c, estimator).predicted for c in table.cases])
    assert np.max(np.abs(predicted / full - 1)) <= SERVING_TABLE_MAX_DEVIATION


def _shipped(name: str) -> dict:
    return load_calibration().__getattribute__(name).fit.parameters


def test_shipped_training_calibration_is_the_fit_of_the_public_data():
    fit = fit_training(training_data())
    shipped = _shipped("training_overheads") | _shipped("comm_overlap") | _shipped(
        "attention_kernels")
    assert set(shipped) == {p.name for p in fit.parameters}
    for p in fit.parameters:
        assert shipped[p.name].value == pytest.approx(p.value, rel=ROUNDING, abs=1e-12), p.name
    cal = load_calibration()
    assert cal.training_overheads.fit.kernel_backend == "analytical"
    assert cal.training_overheads.fit.num_rows == fit.rows_used
    assert cal.training_overheads.fit.data_sha256 == fit.data_sha256


def test_shipped_serving_calibration_is_the_fit_of_the_public_data():
    fit = fit_inference(serving_rows(), load_calibration(), table=serving_table())
    shipped = _shipped("inference_overheads")
    for p in fit.parameters:
        assert shipped[p.name].value == pytest.approx(p.value, rel=ROUNDING, abs=1e-12), p.name
    over = load_calibration().inference_overheads
    hopper = fit.calibration.inference_overheads.generations["hopper"]
    assert over.generations["hopper"].layer_overhead_s == pytest.approx(
        hopper.layer_overhead_s, rel=ROUNDING)


def _train(system: str, cal=None):
    return estimate_training(load_model("llama3-8b"), load_system(system, num_gpus=8),
                             Strategy(num_gpus=8), Workload(seq_length=4096, global_batch_size=8),
                             calibration=cal)


@pytest.mark.parametrize("system", ["mi300x-8", "mi355x-8", "dgx-b300"])
def test_generation_without_rows_gets_the_pooled_fit_flagged(system):
    report = _train(system)
    pooled = load_calibration().training_overheads.generations["default"]
    assert report.calibration.fallback and report.to_dict()["calibration"]["fallback"] is True
    assert pooled.compute_overhead_fraction > 0.05
    assert report.breakdown.other_s > 0.05 * report.step_time_s


def test_generation_with_rows_is_not_flagged():
    report = _train("dgx-h100")
    assert report.to_dict()["calibration"] == {"generation": "hopper", "fallback": False,
                                               "stand_ins": []}


def test_inference_report_carries_the_calibration_status():
    report = estimate_inference(load_model("llama3-8b"), load_system("mi300x-8", num_gpus=1))
    status = report.to_dict()["calibration"]
    assert (status["generation"], status["fallback"]) == ("cdna3", True)
    # CDNA3's attention constants were transferred from Hopper: named, not silent.
    assert [s.split(" constants")[0] for s in status["stand_ins"]] == [
        "attention forward", "attention backward"]


@pytest.fixture(scope="module")
def small_training_csv(tmp_path_factory):
    """The torchtitan rows of training.csv (43 rows: 35 H100, 8 A100): a user's own
    measurements."""
    with shared_path("ground_truth", "training.csv").open(newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        rows = [r for r in reader if r["source_id"] == "torchtitan"]
        header = reader.fieldnames
    path = tmp_path_factory.mktemp("runs") / "my_runs.csv"
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=header)
        writer.writeheader()
        writer.writerows(rows)
    return path


@pytest.fixture(scope="module")
def calibrated_dir(small_training_csv, tmp_path_factory):
    out = tmp_path_factory.mktemp("calibration")
    result = runner.invoke(app, ["calibrate", "--data", str(small_training_csv), "--out",
                                 str(out), "--json"])
    assert result.exit_code == 0, result.output
    return out, json.loads(result.stdout)


def test_calibrate_writes_files_with_provenance(calibrated_dir, small_training_csv):
    out, summary = calibrated_dir
    assert summary["training"]["rows_by_generation"] == {"ampere": 8, "hopper": 35}
    assert summary["training"]["fallback_generations"] == ["ampere"]  # < 10 rows: pooled
    data = yaml.safe_load((out / "training_overheads.yaml").read_text())
    assert data["fit"]["num_rows"] == 43 and data["fit"]["kernel_backend"] == "analytical"
    assert data["fit"]["data_sha256"] == {"my_runs.csv": __import__("hashlib").sha256(
        small_training_csv.read_bytes()).hexdigest()}
    assert set(data["generations"]) == {"hopper", "default"}
    assert data["fit"]["parameters"]["compute_overhead_fraction[hopper]"]["standard_error"] > 0
    assert (out / "comm_overlap.yaml").is_file() and (out / "attention_kernels.yaml").is_file()
    assert not (out / "inference_overheads.yaml").exists()
    assert "cv_mape" in summary["training"]["cv"]
    # no forced-balance / dropless pair in the user's rows: the shipped routing file holds
    assert summary["moe_routing"]["fallback"] and not (out / "moe_routing.yaml").exists()
    assert summary["training"]["cv"]["cv_moe_routing"] == {}


def test_calibration_dir_is_used_by_train(calibrated_dir):
    out, _ = calibrated_dir
    args = ["train", "-m", "llama3-8b", "--gpus", "8", "--system", "dgx-a100", "--json"]
    shipped = json.loads(runner.invoke(app, args).stdout)
    mine = json.loads(runner.invoke(app, args + ["--calibration", str(out)]).stdout)
    # Ampere has too few rows in the user's data: the user's pooled fit, flagged.
    assert mine["calibration"] == {"generation": "ampere", "fallback": True, "stand_ins": []}
    assert shipped["calibration"] == {"generation": "ampere", "fallback": False, "stand_ins": []}
    assert mine["step_time_s"] != pytest.approx(shipped["step_time_s"], rel=1e-6)


def test_calibration_dir_is_used_by_search_and_infer(calibrated_dir):
    out, _ = calibrated_dir
    search = ["search", "-m", "llama3-8b", "--gpus", "8", "--system", "dgx-a100", "--json",
              "--top", "1"]
    a = json.loads(runner.invoke(app, search).stdout)
    b = json.loads(runner.invoke(app, search + ["--calibration", str(out)]).stdout)
    assert a["best"][0]["step_time_s"] != pytest.approx(b["best"][0]["step_time_s"], rel=1e-6)
    infer = runner.invoke(app, ["infer", "-m", "llama3-8b", "--system", "dgx-h100", "--json",
                                "--calibration", str(out)])
    assert infer.exit_code == 0, infer.output  # no serving file there: the shipped one


def test_calibration_dir_is_used_by_sweep(calibrated_dir):
    out, _ = calibrated_dir
    args = ["sweep", "-m", "llama3-8b", "--systems", "dgx-h100", "--gpus", "8", "--gbs", "64",
            "--seq-length", "2048", "--json"]
    shipped = json.loads(runner.invoke(app, args).stdout)["rows"][0]
    mine = json.loads(runner.invoke(app, args + ["--calibration", str(out)]).stdout)["rows"][0]
    assert mine["task_id"].endswith(f"calibration={out.resolve()}")
    assert mine["tokens_per_s_per_gpu"] != pytest.approx(shipped["tokens_per_s_per_gpu"],
                                                         rel=1e-6)


@pytest.mark.parametrize("command", [["train", "-m", "llama3-8b", "--gpus", "8"],
                                     ["infer", "-m", "llama3-8b"]])
def test_bad_calibration_dir_is_one_line_exit_2(tmp_path, command):
    result = runner.invoke(app, command + ["--calibration", str(tmp_path)])
    assert result.exit_code == 2
    assert result.stderr.strip().count("\n") == 0 and "calibration" in result.stderr


def test_validate_cross_validate_json(small_training_csv):
    result = runner.invoke(app, ["validate", "--data", str(small_training_csv),
                                 "--cross-validate", "source", "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)["summary"]
    for key in ("cv_mape", "cv_median", "cv_within_10", "cv_by_source"):
        assert key in summary
    assert summary["cv_by_source"]["torchtitan"]["n"] == 43


def test_validate_cross_validate_text_shows_cv_first(small_training_csv):
    result = runner.invoke(app, ["validate", "--data", str(small_training_csv),
                                 "--cross-validate", "source"])
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert text.index("leave-one-source-out") < text.index("in-sample")
