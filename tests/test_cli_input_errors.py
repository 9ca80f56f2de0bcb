"""Bad input listed in issue 22: each gives one line naming the field (and its bound), exit 2,
no traceback, no hang."""

from __future__ import annotations

import pytest

from cli_fuzz import invoke
from perfcast.errors import InputError
from perfcast.specs.limits import MAX_GPUS, check_at_most

SCHEDULE = ["schedule", "--schedule", "1f1b", "--stages", "4", "--micro-batches", "8",
            "--forward-time", "1", "--backward-time", "2"]

CASES = [
    (["kernels", "gemm", "--m", "64", "--n", "64", "--k", "64", "--dtype", "fp8", "--system",
      "dgx-a100"], "dtype='fp8'"),
    (["kernels", "gemm", "--m", "1000000000000", "--n", "1000000000000", "--k",
      "1000000000000"], "MAX_GEMM_DIM"),
    (["kernels", "attention", "--heads", "32", "--kv-heads", "5"], "kv_heads=5"),
    (["sweep", "-m", "llama3-8b", "--gpus", ""], "gpus=''"),
    (["sweep", "-m", "llama3-8b", "--gpus", "8", "--vary", "peak_flops=-1"], "peak_flops"),
    (["sweep", "-m", "llama3-8b", "--gpus", "8", "--vary", "bogus=2"], "vary='bogus'"),
    (["sweep", "-m", "llama3-8b", "--gpus", "8", "--out", "nodir/x.csv"], "out="),
    (["schedule", "--schedule", "1f1b", "--stages", "4", "--micro-batches", "8",
      "--forward-time", "0", "--backward-time", "0"], "forward_time"),
    (["schedule", "--schedule", "1f1b", "--stages", "100000", "--micro-batches", "100000",
      "--forward-time", "1", "--backward-time", "2"], "MAX_PIPELINE_PASSES"),
    ([*SCHEDULE[:2], "zb-v", *SCHEDULE[3:], "--virtual-stages", "3"], "virtual_stages=3"),
    ([*SCHEDULE[:2], "dualpipe", "--stages", "3", *SCHEDULE[5:]], "even number of stages"),
    (["train", "-m", "llama3-8b", "--gpus", "99999999999999999999999"], "MAX_GPUS"),
    (["train", "-m", "llama3-8b", "--gpus", "8", "--recompute", "full",
      "--recompute-num-layers", "100"], "recompute_num_layers=100"),
    (["train", "-m", "mixtral-8x7b", "--gpus", "8", "--ep", "8", "--moe-load-imbalance", "inf"],
     "--moe-load-imbalance='inf'"),
    (["train", "-m", "llama3-8b", "--gpus", "8", "--plot", "c.txt"], "plot='c.txt'"),
    (["train", "-m", "llama3-8b", "--gpus", "8_0"], "--gpus='8_0'"),
    (["train", "-m", "llama3-8b", "--gpus", "abc"], "--gpus"),
    (["search", "-m", "llama3-8b", "--gpus", "8", "--token-budget", "-1"], "token_budget"),
    (["search", "-m", "llama3-8b", "--gpus", "8", "--price-per-gpu-hour", "-5"],
     "price_per_gpu_hour"),
    (["search", "-m", "llama3-8b", "--gpus", "1000000000000"], "MAX_GPUS"),
    (["search", "-m", "llama3-8b", "--gpus", "8", "--max-micro-batch-size", "2147483648"],
     "MAX_SEARCH_MICRO_BATCH_SIZE"),
    (["infer", "-m", "llama3-8b", "--output-len", "2147483648"], "MAX_GENERATED_TOKENS"),
    (["comm", "all-to-all", "--size-bytes", "2", "--gpus", "8", "--stride",
      "99999999999999999999999"], "MAX_GPUS"),
]


@pytest.mark.parametrize("argv,named", CASES, ids=[" ".join(c[0])[:60] for c in CASES])
def test_bad_input_is_one_line_exit_2(argv, named, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    outcome = invoke(argv, limit_s=10.0)
    assert outcome.problem is None, outcome.problem
    assert outcome.exit_code == 2, outcome.stdout[-300:]
    assert named in outcome.stderr, outcome.stderr
    assert not (tmp_path / "c.txt").exists()


def test_usage_errors_are_one_line_not_a_box():
    outcome = invoke(["train", "-m", "llama3-8b", "--no-such-flag"])
    assert outcome.exit_code == 2
    assert outcome.stderr.count("\n") == 1 and "--no-such-flag" in outcome.stderr


def test_bound_names_itself():
    with pytest.raises(InputError, match=r"gpus=2097152: exceeds MAX_GPUS=1,048,576 \(about"):
        check_at_most("gpus", 2 * MAX_GPUS.value, MAX_GPUS)


def test_python_api_refuses_what_the_cli_refuses():
    from pydantic import ValidationError

    from perfcast.specs.strategy import Strategy
    from perfcast.specs.workload import Workload

    with pytest.raises(ValidationError, match="num_gpus"):
        Strategy(num_gpus=10**23)
    with pytest.raises(ValidationError, match="moe_load_imbalance"):
        Strategy(num_gpus=8, ep=8, moe_load_imbalance=float("inf"))
    with pytest.raises(ValidationError, match="seq_length"):
        Workload(seq_length=2**40, global_batch_size=1)


def test_version():
    from perfcast import __version__

    outcome = invoke(["--version"])
    assert outcome.exit_code == 0 and outcome.stdout.strip() == f"perfcast {__version__}"


@pytest.mark.parametrize("text,named", [("a,b\n1,2\n", "lacks training.csv columns"),
                                        ("", "is empty"),
                                        ("model,gpu_type\n", "no rows")])
def test_validate_refuses_a_file_off_the_schema(tmp_path, text, named):
    data = tmp_path / "rows.csv"
    data.write_text(text)
    outcome = invoke(["validate", "--data", str(data)])
    assert outcome.exit_code == 2 and named in outcome.stderr, outcome.stderr


def test_shipped_ground_truth_follows_the_shipped_schema():
    from perfcast.validate.csv_schema import check_csv_schema

    from conftest import shared_path

    assert check_csv_schema(shared_path("ground_truth", "training.csv")) == "training"
    assert check_csv_schema(shared_path("ground_truth", "inference.csv")) == "inference"


@pytest.mark.parametrize("argv,shown", [(["models", "llama3-8b", "--json"], '"num_hidden_layers": 32'),
                                        (["systems", "dgx-h100", "--json"], '"kind": "system"'),
                                        (["systems", "h100-sxm"], "source"),
                                        (["models", "llama3-8b"], "source")])
def test_catalog_entry_with_sources(argv, shown):
    outcome = invoke(argv)
    assert outcome.exit_code == 0 and shown in outcome.stdout
    assert "huggingface.co" in outcome.stdout or "hardware_specs.csv" in outcome.stdout


def _commands(group, path=()):
    for name, command in getattr(group, "commands", {}).items():
        yield from _commands(command, (*path, name))
    if not getattr(group, "commands", None):
        yield path, group


def test_every_option_has_help():
    import typer

    from perfcast.cli.main import app

    missing = [(" ".join(path), p.opts[0]) for path, command in _commands(typer.main.get_command(app))
               for p in command.params
               if p.param_type_name == "option" and p.opts[0] != "--help" and not p.help]
    assert missing == []


def test_help_shows_no_bool_type():
    from typer.testing import CliRunner

    from perfcast.cli.main import app

    for command in (["train"], ["infer"], ["search"], ["kernels", "attention"], ["validate"]):
        text = CliRunner().invoke(app, [*command, "--help"], env={"COLUMNS": "250"}).stdout
        assert "<bool>" not in text and "--json" in text, command


def test_trace_is_written_atomically_and_full_devices_are_one_line(tmp_path):
    trace = tmp_path / "step.json"
    trace.write_text("old")
    assert invoke(["train", "-m", "llama3-8b", "--gpus", "8", "--fsdp", "--trace", str(trace),
                   "--json"]).exit_code == 0
    assert trace.read_text().startswith("{") and sorted(p.name for p in tmp_path.iterdir()) == [
        "step.json"]
    full = invoke(["train", "-m", "llama3-8b", "--gpus", "8", "--fsdp", "--trace", "/dev/full"])
    assert full.exit_code == 2 and "No space left" in full.stderr
