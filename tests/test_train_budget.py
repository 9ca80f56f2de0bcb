"""``perfcast train --train-tokens N [--price-per-gpu-hour P]`` (issue 22): time, GPU-hours,
energy from the catalog's board power (with its source) and cost, in text and JSON."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from cli_fuzz import invoke
from perfcast.catalog.gpus import load_gpu
from perfcast.estimate.training_budget import training_budget

ARGS = ["train", "-m", "llama3-8b", "--gpus", "8", "--use-distributed-optimizer"]
SCHEMA = Path(__file__).resolve().parents[1] / "schemas" / "train.schema.json"


def test_budget_arithmetic() -> None:
    """1e12 tokens at 10,000 tokens/s/GPU on 8 H100s: 1.25e7 s, 27,777.8 GPU-hours,
    x 700 W = 19.44 MWh, x $2 = $55,555.6."""
    budget = training_budget(10_000.0, 8, load_gpu("h100-sxm"), 1e12, 2.0)
    assert budget.time_s == pytest.approx(1.25e7)
    assert budget.gpu_hours == pytest.approx(1e8 / 3600)
    assert budget.energy_J == pytest.approx(1e8 * 700.0)
    assert budget.cost_usd == pytest.approx(2e8 / 3600)
    assert "700 W" in budget.power_source and "tdp_W" in budget.power_source


def test_gpu_without_rated_power_has_no_energy() -> None:
    gpu = load_gpu("tpu-v5e")
    assert gpu.tdp_W is None
    budget = training_budget(1000.0, 8, gpu, 1e9)
    assert budget.energy_J is None and budget.cost_usd is None
    assert "no energy" in budget.power_source


def test_cli_json_matches_the_report_and_schema() -> None:
    result = invoke([*ARGS, "--train-tokens", "1e12", "--price-per-gpu-hour", "2.5", "--json"])
    assert result.exit_code == 0, result.stderr
    out = json.loads(result.stdout)
    jsonschema.validate(out, json.loads(SCHEMA.read_text()))
    budget = out["training_budget"]
    rate = out["tokens_per_s_per_gpu"] * out["num_gpus"]
    assert budget["time_s"] == pytest.approx(1e12 / rate)
    assert budget["gpu_hours"] == pytest.approx(budget["time_s"] * 8 / 3600)
    assert budget["cost_usd"] == pytest.approx(budget["gpu_hours"] * 2.5)
    assert budget["energy_J"] == pytest.approx(budget["gpu_hours"] * 3600 * 700)
    plain = json.loads(invoke([*ARGS, "--json"]).stdout)
    assert "training_budget" not in plain


def test_cli_text_names_every_quantity() -> None:
    result = invoke([*ARGS, "--train-tokens", "1e12", "--price-per-gpu-hour", "2.5"])
    assert result.exit_code == 0
    for word in ("days", "GPU-hours", "MWh", "$", "tdp_W 700 W"):
        assert word in result.stdout


@pytest.mark.parametrize(("extra", "field"), [
    (["--train-tokens", "-1"], "train_tokens"),
    (["--train-tokens", "0"], "train_tokens"),
    (["--train-tokens", "1e30"], "MAX_TOKEN_BUDGET"),
    (["--train-tokens", "1e12", "--price-per-gpu-hour", "-5"], "price_per_gpu_hour"),
    (["--price-per-gpu-hour", "2"], "needs --train-tokens"),
])
def test_bad_budget_is_one_line(extra, field) -> None:
    result = invoke([*ARGS, *extra])
    assert result.exit_code == 2 and result.problem is None
    assert len(result.stderr.strip().splitlines()) == 1 and field in result.stderr
