"""Every command's ``--json`` output validates against its JSON Schema in ``schemas/``, and the
shared key vocabulary holds: ``peak_memory_bytes`` everywhere peak memory is reported, equal to
the command's older key; ``mfu`` a fraction with its ``mfu_basis``.

The invocations differ from the samples ``tools/gen_json_schemas.py`` drafted the schemas from
(other models, strategies and flags), so a schema that only fits its own samples fails here."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator
from typer.testing import CliRunner

from perfcast.cli.main import app

from conftest import shared_path

SCHEMAS = Path(__file__).resolve().parents[1] / "schemas"

INVOCATIONS = {
    "train": "train --model llama3-8b --system dgx-h100 --gpus 16 --tp 2 --pp 2 --vpp 2 "
             "--seq-length 4096 --global-batch-size 32 --json",
    "memory": "memory --model llama3-70b --system dgx-h100 --gpus 64 --tp 8 --pp 2 "
              "--sequence-parallel --recompute selective --json",
    "infer": "infer --model llama-3.1-70b --system dgx-h100 --tp 4 --batch-size 16 "
             "--input-len 1024 --output-len 256 --precision fp8 --kv-precision fp8 --json",
    "infer-serving": "infer --model llama-3.1-70b --system dgx-h100 --tp 8 --concurrency 32 "
                     "--input-len 512 --output-len 128 --num-requests 64 --json",
    "search": "search --model llama-3.2-1b --gpus 8 --global-batch-size 16 --seq-length 2048 "
              "--max-pp 2 --top 2 --json",
    "sweep": "sweep --model llama-3.2-1b --gpus 8 --systems dgx-a100 --global-batch-size 16 "
             "--seq-length 1024 --max-cp 1 --json",
    "validate": "validate --data {small_csv} --json",
    "calibrate": "calibrate --data {small_csv} --out {tmp}/cal --json",
    "comm": "comm all-gather --size-bytes 268435456 --gpus 16 --system dgx-b200 --json",
    "kernels-gemm": "kernels gemm --m 8192 --n 8192 --k 8192 --dtype bf16 --system dgx-h100 "
                    "--json",
    "kernels-attention": "kernels attention --batch 1 --heads 64 --kv-heads 8 --seq-q 4096 "
                         "--head-dim 128 --system dgx-b200 --json",
    "schedule": "schedule --schedule zb-h1 --stages 4 --micro-batches 8 --forward-time 1 "
                "--backward-time 2 --json",
    "infer-search": "infer-search --model mixtral-8x7b --system dgx-h100 --gpus 16 "
                    "--input-len 512 --output-len 256 --tpot-ms 40 --disaggregated --top 3 --json",
    "sweep-serving": "sweep --serving --model llama3-8b --gpus 2,4 --systems dgx-a100 "
                     "--input-len 512 --output-len 128 --tpot-ms 30,10 --json",
    "models": "models --json",
    "systems": "systems --json",
}
"""One representative invocation per schema (the infer engine simulation has its own)."""


def _schema(name: str) -> dict:
    return json.loads((SCHEMAS / f"{name}.schema.json").read_text())


@pytest.fixture(scope="module")
def outputs(tmp_path_factory) -> dict[str, dict]:
    """Each command's JSON, run once in-process."""
    tmp = tmp_path_factory.mktemp("schemas")
    lines = shared_path("ground_truth", "training.csv").read_text().splitlines(keepends=True)
    small_csv = tmp / "training_head.csv"
    small_csv.write_text("".join(lines[:80]))  # header + 79 rows: calibrate fits in ~2 s
    out = {}
    for name, command in INVOCATIONS.items():
        args = shlex.split(command.format(small_csv=small_csv, tmp=tmp))
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 0, f"{name}: {result.output[-400:]}"
        out[name] = json.loads(result.stdout)
    return out


def test_every_schema_is_draft_2020_12_and_every_command_has_one():
    names = {p.name.removesuffix(".schema.json") for p in SCHEMAS.glob("*.schema.json")}
    assert names == set(INVOCATIONS)
    for name in names:
        schema = _schema(name)
        assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
        Draft202012Validator.check_schema(schema)
        assert schema["type"] == "object" and schema["required"], name


@pytest.mark.parametrize("name", sorted(INVOCATIONS))
def test_output_validates_against_its_schema(outputs, name):
    validator = Draft202012Validator(_schema(name))
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
              for e in validator.iter_errors(outputs[name])]
    assert not errors, errors[:5]


def test_schemas_reject_broken_outputs(outputs):
    """The schemas can fail: a missing key, a wrong type, an MFU above 1, a negative time."""
    train = Draft202012Validator(_schema("train"))
    data = dict(outputs["train"])
    assert train.is_valid(data)
    assert not train.is_valid({k: v for k, v in data.items() if k != "peak_memory_bytes"})
    assert not train.is_valid(data | {"mfu": 1.24})
    assert not train.is_valid(data | {"step_time_s": -1.0})
    assert not train.is_valid(data | {"fits": "yes"})
    search = Draft202012Validator(_schema("search"))
    bad_candidate = dict(outputs["search"]["pareto"][0]) | {"memory_bytes": None}
    assert not search.is_valid(outputs["search"] | {"pareto": [bad_candidate]})
    gemm = Draft202012Validator(_schema("kernels-gemm"))
    assert not gemm.is_valid(outputs["kernels-gemm"] | {"bound": "network"})


def test_peak_memory_bytes_is_one_key_across_commands(outputs):
    """``peak_memory_bytes`` is the shared name; the older per-command keys stay as they were."""
    train, memory, infer = outputs["train"], outputs["memory"], outputs["infer"]
    assert train["peak_memory_bytes"] == train["memory"]["peak_bytes"]
    assert memory["peak_memory_bytes"] == memory["peak_bytes"]
    assert infer["peak_memory_bytes"] == infer["memory"]["total_bytes"]
    for candidate in outputs["search"]["best"] + outputs["search"]["pareto"]:
        assert candidate["peak_memory_bytes"] == candidate["memory_bytes"]
    for row in outputs["sweep"]["rows"]:
        assert row["peak_memory_bytes"] == row["memory_bytes"]
    serving = outputs["infer-serving"]
    mem = serving["memory"]
    resident_GB = (mem["weights_GB"] + mem["workspace_GB"] + mem["runtime_GB"]
                   + max(mem["kv_pool_GB"], 0.0))
    assert serving["peak_memory_bytes"] == pytest.approx(resident_GB * 1e9, rel=1e-12)
    assert serving["peak_memory_bytes"] <= mem["capacity_GB"] * 1e9


def test_mfu_is_a_fraction_with_its_basis(outputs):
    train, search, sweep = outputs["train"], outputs["search"], outputs["sweep"]
    assert 0 < train["mfu"] < 1 and train["mfu_basis"]
    assert search["mfu_basis"] == sweep["mfu_basis"] == train["mfu_basis"]
    gemm = outputs["kernels-gemm"]
    assert gemm["fraction_of_peak"] == pytest.approx(gemm["pct_of_peak"] / 100)
    models = outputs["models"]["models"]
    assert all(m["num_layers"] == m["layers"] for m in models)


def _schema_name(args: list[str]) -> str:
    command = args[0]
    if command == "kernels":
        return f"kernels-{args[1]}"
    if command == "infer" and ({"--concurrency", "--request-rate"} & set(args)):
        return "infer-serving"
    if command == "sweep" and "--serving" in args:
        return "sweep-serving"
    return command


def _readme_json_examples() -> list[str]:
    from test_readme_examples import _commands

    return [c for c in _commands() if "--json" in shlex.split(c)]


@pytest.mark.parametrize("command", _readme_json_examples())
def test_readme_json_example_validates(command):
    """Every README example that prints JSON validates against its command's schema."""
    args = shlex.split(command)[1:]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output[-400:]
    validator = Draft202012Validator(_schema(_schema_name(args)))
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
              for e in validator.iter_errors(json.loads(result.stdout))]
    assert not errors, errors[:5]
