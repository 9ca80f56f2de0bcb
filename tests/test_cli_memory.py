"""``perfcast memory`` / ``models`` / ``systems``: JSON shape, bad input, exit codes."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from perfcast.cli.main import app

runner = CliRunner()

BASE = ["memory", "--model", "llama-3-70b", "--system", "dgx-h100"]


def _run(args):
    return runner.invoke(app, args)


def test_memory_json_shape():
    result = _run(BASE + ["--gpus", "64", "--tp", "8", "--pp", "2", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    for key in ("params_total", "params_active", "capacity_bytes", "fits", "stages"):
        assert key in data
    assert len(data["stages"]) == 2
    for stage in data["stages"]:
        for key in ("stage", "weights_bytes", "grads_bytes", "optimizer_bytes",
                    "activations_bytes", "other_bytes", "total_bytes"):
            assert key in stage
        parts = sum(stage[k] for k in ("weights_bytes", "grads_bytes", "optimizer_bytes",
                                       "activations_bytes", "other_bytes"))
        assert stage["total_bytes"] == pytest.approx(parts)
    assert data["params_total"] == pytest.approx(70.55e9, rel=0.001)


def test_megatron_long_names_are_aliases():
    short = _run(BASE + ["--gpus", "16", "--tp", "8", "--pp", "2", "--json"])
    long = _run(BASE + ["--gpus", "16", "--tensor-model-parallel-size", "8",
                        "--pipeline-model-parallel-size", "2", "--json"])
    assert json.loads(short.stdout) == json.loads(long.stdout)


def test_table_output_mentions_verdict():
    result = _run(BASE + ["--gpus", "8", "--tp", "8"])
    assert result.exit_code == 0
    assert "verdict" in result.stdout


def test_not_fitting_is_a_result():
    result = _run(["memory", "--model", "llama-3.1-405b", "--system", "dgx-h100", "--gpus", "8",
                   "--tp", "8", "--json"])
    assert result.exit_code == 0
    assert json.loads(result.stdout)["fits"] is False


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--gpus", "8", "--tp", "0"], "tp"),
        (["--gpus", "-8"], "gpus"),
        (["--gpus", "8", "--tp", "3"], "tp=3"),
        (["--gpus", "12", "--tp", "8"], "num_gpus=12"),
        (["--gpus", "8", "--seq-length", "0"], "seq_length"),
        (["--gpus", "8", "--micro-batch-size", "0"], "micro_batch_size"),
        (["--gpus", "16", "--tp", "8", "--global-batch-size", "3"], "global_batch_size=3"),
    ],
)
def test_bad_input_one_line_exit_2(args, needle):
    result = _run(BASE + args)
    assert result.exit_code == 2
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert needle in lines[0]
    assert "Traceback" not in result.output


def test_unknown_model_suggests_names():
    result = _run(["memory", "--model", "llama-3.1-406b", "--gpus", "8"])
    assert result.exit_code == 2
    assert "llama-3.1-405b" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_unknown_system_suggests_names():
    result = _run(["memory", "--model", "llama-3-8b", "--system", "dgx-h1000", "--gpus", "8"])
    assert result.exit_code == 2
    assert "dgx-h100" in result.stderr


def test_malformed_yaml_model(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("hidden_size: [1, 2\n")
    result = _run(["memory", "--model", str(path), "--gpus", "8"])
    assert result.exit_code == 2
    assert len(result.stderr.strip().splitlines()) == 1


def test_yaml_model_file(tmp_path):
    path = tmp_path / "tiny.yaml"
    path.write_text("name: tiny\nhidden_size: 1024\nnum_hidden_layers: 4\n"
                    "num_attention_heads: 8\nintermediate_size: 4096\nvocab_size: 32000\n")
    result = _run(["memory", "--model", str(path), "--gpus", "1", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["fits"] is True


def test_hf_config_path(tmp_path):
    config = {"model_type": "llama", "hidden_size": 2048, "num_hidden_layers": 16,
              "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 8192,
              "vocab_size": 128256, "hidden_act": "silu", "tie_word_embeddings": True}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    result = _run(["memory", "--model", str(path), "--gpus", "1", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["params_total"] == pytest.approx(1.236e9, rel=0.01)


def test_models_and_systems_json():
    models = json.loads(_run(["models", "--json"]).stdout)["models"]
    assert any(m["name"] == "llama-3.1-405b" for m in models)
    systems = json.loads(_run(["systems", "--json"]).stdout)["systems"]
    names = {s["name"] for s in systems}
    for required in ("dgx-a100", "dgx-h100", "dgx-h200", "dgx-b200", "dgx-b300", "gb200-nvl72",
                     "gb300-nvl72", "mi300x-8", "mi325x-8", "mi355x-8"):
        assert required in names
