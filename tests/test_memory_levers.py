"""Memory levers: precision-aware optimizer (bf16 moments, 16-bit master remainders), FP8
parameter storage, row text for both, and the fit advice that names the cheapest change."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from perfcast.catalog.models import load_model
from perfcast.catalog.systems import load_system
from perfcast.cli.main import app
from perfcast.graph.param_sharding import stage_params
from perfcast.memory.estimate import estimate_memory
from perfcast.memory.states import adam_state_bytes, state_bytes
from perfcast.schedule.optimizer import adam_bytes_per_param
from perfcast.search.fit_advice import fit_advice
from perfcast.specs.strategy import Strategy
from perfcast.specs.workload import Workload
from perfcast.validate.row_strategy import precision, sharding

runner = CliRunner()


def test_adam_state_bytes_per_parameter():
    assert adam_state_bytes(Strategy(num_gpus=1)) == 12
    pao = Strategy(num_gpus=1, precision_aware_optimizer=True)
    assert adam_state_bytes(pao) == 2 + 4 + 4  # remainder + fp32 moments
    bf16 = Strategy(num_gpus=1, precision_aware_optimizer=True, exp_avg_dtype="bf16",
                    exp_avg_sq_dtype="bf16")
    assert adam_state_bytes(bf16) == 6
    full_master = Strategy(num_gpus=1, precision_aware_optimizer=True, store_param_remainders=False,
                           exp_avg_dtype="bf16", exp_avg_sq_dtype="bf16")
    assert adam_state_bytes(full_master) == 4 + 2 + 2  # DeepSeek-V3 §3.3.3
    assert adam_bytes_per_param(Strategy(num_gpus=1)) == 34
    assert adam_bytes_per_param(bf16) == 8 + 8 + 8


def test_bf16_moments_need_the_precision_aware_optimizer():
    with pytest.raises(ValidationError, match="precision_aware_optimizer"):
        Strategy(num_gpus=1, exp_avg_dtype="bf16")


def test_fp8_params_halve_the_linear_weights():
    model = load_model("llama-3-8b")
    base = Strategy(num_gpus=8, precision="fp8", distributed_optimizer=True)
    fp8p = Strategy(num_gpus=8, precision="fp8", distributed_optimizer=True, fp8_param=True)
    params = stage_params(model, base, 0)
    gemm = params.total - params.embedding
    saved = state_bytes(params, base).weights - state_bytes(params, fp8p).weights
    assert saved == pytest.approx(2 * gemm)  # bf16 copy (2 B) + FP8 transpose cache (1 B) - 1 B
    with pytest.raises(ValidationError, match="fp8_param"):
        Strategy(num_gpus=8, fp8_param=True, distributed_optimizer=True)


def test_row_text_levers():
    notes: list[str] = []
    fields = sharding({"dp_sharding": "distributed optimizer (ZeRO-1); BF16 optimizer states "
                                      "(precision-aware optimizer)"}, 32, notes)
    assert fields == {"distributed_optimizer": True, "precision_aware_optimizer": True,
                      "exp_avg_dtype": "bf16", "exp_avg_sq_dtype": "bf16"}
    fields = precision({"precision": "MXFP8 (TE; FP8 primary weights)",
                        "framework": "Megatron-Core"}, notes)
    assert fields["fp8_param"] and fields["fp8_recipe"] == "mxfp8"


def test_fit_advice_names_a_change_that_fits():
    model = load_model("llama-3-70b")
    system = load_system("dgx-h100", num_gpus=64)
    strategy = Strategy(num_gpus=64, tp=8, pp=2)
    workload = Workload(seq_length=4096, global_batch_size=32)
    assert not estimate_memory(model, system, strategy, workload).fits
    advice = fit_advice(model, system, strategy, workload)
    assert advice is not None
    assert estimate_memory(model, system, advice.strategy, workload).fits
    assert advice.peak_bytes <= advice.capacity_bytes
    assert advice.text.startswith("fits with --")


def test_fit_advice_is_none_when_it_fits():
    model = load_model("llama-3-8b")
    system = load_system("dgx-h100", num_gpus=8)
    assert fit_advice(model, system, Strategy(num_gpus=8, distributed_optimizer=True),
                      Workload(seq_length=2048, global_batch_size=8)) is None


def test_cli_memory_prints_the_fit_advice():
    args = ["memory", "--model", "llama-3-70b", "--gpus", "64", "--tp", "8", "--pp", "2"]
    text = runner.invoke(app, args)
    assert text.exit_code == 0 and "fits with --" in text.stdout
    data = json.loads(runner.invoke(app, args + ["--json"]).stdout)
    assert data["fits"] is False and data["fit_advice"]["flags"]


def test_cli_optimizer_flags():
    base = ["memory", "--model", "llama-3-8b", "--gpus", "8", "--json"]
    plain = json.loads(runner.invoke(app, base).stdout)["stages"][0]["optimizer_bytes"]
    small = runner.invoke(app, base + ["--use-precision-aware-optimizer", "--exp-avg-dtype",
                                       "bf16", "--exp-avg-sq-dtype", "bf16"])
    assert small.exit_code == 0, small.output
    assert json.loads(small.stdout)["stages"][0]["optimizer_bytes"] == pytest.approx(plain / 2)
    bad = runner.invoke(app, base + ["--exp-avg-dtype", "bf16"])
    assert bad.exit_code == 2 and "Traceback" not in bad.output


def test_cli_train_prints_the_fit_advice():
    args = ["train", "--model", "llama-3-70b", "--gpus", "64", "--tp", "8", "--pp", "2"]
    text = runner.invoke(app, args)
    assert text.exit_code == 0 and "fits with --" in text.stdout
    data = json.loads(runner.invoke(app, args + ["--json"]).stdout)
    assert data["fits"] is False and data["fit_advice"]["text"].startswith("fits with --")
