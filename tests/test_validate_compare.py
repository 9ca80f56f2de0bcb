"""``validate_training`` with stand-in estimators, its ``to_dict`` shape, filters and the CLI."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import typer
from typer.testing import CliRunner

from perfcast.specs import GPUSpec, SystemSpec
from perfcast.validate import compare, training_rows
from perfcast.validate.catalog_lookup import CatalogLookup
from perfcast.validate.compare import validate_training

from conftest import shared_path

STAND_IN_SYSTEM = SystemSpec(
    name="stand-in-node", gpus_per_node=8, scale_up_domain_gpus=8, scale_up_bandwidth_Bps=450e9,
    scale_out_bandwidth_Bps=50e9, source="test",
    gpu=GPUSpec(name="stand-in-gpu", display_name="stand-in", vendor="nvidia",
                generation="hopper", peak_bf16_flops=989e12, peak_fp8_flops=1979e12,
                hbm_capacity_bytes=80e9, hbm_bandwidth_Bps=3.35e12, source="test"),
)
NO_CATALOG = CatalogLookup(model=lambda name: None, system=lambda gpu_type: STAND_IN_SYSTEM)
"""No catalog models (rows build from columns + family defaults); one stand-in system."""

ROWS_OF_INTEREST = ("6", "124", "351", "499", "91")
UNPARSED = ("77", "514")  # PaLM (quality C); Qwen3 MoE, which needs the catalog


def _doubling(model, system, strategy, workload):
    """A stand-in estimator that forecasts 2x the row's tokens/s (error +100%)."""
    return SimpleNamespace(tokens_per_s_per_gpu=2.0 * _MEASURED[(model.name, workload)],
                           step_time_s=1.0, mfu=0.5)


_MEASURED: dict = {}


@pytest.fixture()
def small_csv(tmp_path):
    """The rows of interest plus two that fail to parse, copied to a temporary CSV."""
    import csv

    source = shared_path("ground_truth", "training.csv")
    rows = [r for r in training_rows.read_rows(source) if r["row_id"] in (*ROWS_OF_INTEREST, *UNPARSED)]
    path = tmp_path / "small.csv"
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    parsed, _ = training_rows.parse_rows(rows, NO_CATALOG)
    _MEASURED.clear()
    _MEASURED.update({(p.model.name, p.workload): p.measured_tokens_per_s_per_gpu for p in parsed})
    return path


def test_report_rows_errors_and_dict_shape(small_csv):
    report = validate_training(small_csv, estimator=_doubling, catalog=NO_CATALOG)
    assert sorted(r.row_id for r in report.rows) == sorted(ROWS_OF_INTEREST)
    assert all(r.error == pytest.approx(1.0) for r in report.rows)
    assert [s.row_id for s in report.skipped] == list(UNPARSED)
    data = report.to_dict()
    assert set(data) == {"rows", "skipped", "summary"}
    assert {"row_id", "predicted", "measured", "error"} <= set(data["rows"][0])
    assert set(data["skipped"][0]) == {"row_id", "reason"}
    assert data["summary"]["overall"]["mape"] == pytest.approx(1.0)
    assert data["summary"]["num_skipped"] == len(UNPARSED)
    assert set(data["summary"]["by_source"]) == {
        "megatron_sc21", "mosaic_mpt", "nemo_perf", "torchtitan"}


def test_estimator_failures_become_skipped_rows(small_csv):
    def flaky(model, system, strategy, workload):
        if strategy.tp > 1:
            raise ValueError("no kernel model for this shape")
        return SimpleNamespace(tokens_per_s_per_gpu=float("nan"))

    report = validate_training(small_csv, estimator=flaky, catalog=NO_CATALOG)
    assert report.rows == ()
    reasons = {s.row_id: s.reason for s in report.skipped}
    assert reasons["6"] == "estimate: no kernel model for this shape"
    assert reasons["124"].startswith("estimate: tokens_per_s_per_gpu=nan")


def test_quality_and_arch_type_filters(small_csv):
    only_a = validate_training(small_csv, _doubling, qualities=("a",), catalog=NO_CATALOG)
    assert {r.quality for r in only_a.rows} == {"A"}
    assert {s.row_id for s in only_a.skipped} == {"514"}
    moe = validate_training(small_csv, _doubling, arch_types=("moe",), catalog=NO_CATALOG)
    assert {r.row_id for r in moe.rows} == {"499"}  # 514 (Qwen3 MoE) needs the catalog
    assert {s.row_id for s in moe.skipped} == {"514"}


def test_cli_json_and_text(small_csv, monkeypatch):
    from perfcast.cli.validate_cmd import validate_command

    monkeypatch.setattr(compare, "default_estimator", lambda: _doubling)
    monkeypatch.setattr(training_rows, "default_catalog", lambda: NO_CATALOG)
    app = typer.Typer()
    app.command("validate")(validate_command)
    app.command("noop")(lambda: None)  # keep 'validate' a named subcommand
    runner = CliRunner()
    result = runner.invoke(app, ["validate", "--data", str(small_csv), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert len(data["rows"]) == len(ROWS_OF_INTEREST) and data["skipped"][0]["row_id"] == "77"
    result = runner.invoke(app, ["validate", "--data", str(small_csv), "--quality", "B"])
    assert result.exit_code == 0, result.output
    assert "overall" in result.output and "499" in result.output
    assert "skipped: none" in result.output
    result = runner.invoke(app, ["validate", "--data", str(small_csv.with_name("none.csv"))])
    assert result.exit_code == 2
