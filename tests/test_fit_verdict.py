"""train/memory text output starts with the fit verdict; a run that does not fit names the
cheapest single change that fits, and that change really fits. MFU states its basis."""

from __future__ import annotations

import json
import shlex

from cli_fuzz import invoke
from perfcast import Strategy, Workload, load_model, load_system
from perfcast.memory.estimate import estimate_memory
from perfcast.search.fit_advice import fit_advice

BASE = ["-m", "llama3-8b", "--gpus", "8"]


def test_verdict_is_the_first_line_and_its_change_fits():
    for command in ("train", "memory"):
        first = invoke([command, *BASE]).stdout.splitlines()[0]
        assert first.startswith("does NOT fit: needs "), first
        flags = first.split("cheapest change that fits: ")[1].split(" (")[0]
        after = invoke([command, *BASE, *shlex.split(flags)]).stdout.splitlines()[0]
        assert after.startswith("fits: peak "), (flags, after)


def test_no_single_change_fits_405b_on_8_gpus():
    """405B parameters with Adam need ~6.5 TB of states: no change or pair fits 8 GPUs."""
    model = load_model("llama-3.1-405b")
    system = load_system("dgx-h100", num_gpus=8)
    workload = Workload(seq_length=8192, global_batch_size=8)
    assert not estimate_memory(model, system, Strategy(num_gpus=8), workload).fits
    assert fit_advice(model, system, Strategy(num_gpus=8), workload) is None
    line = invoke(["memory", "-m", "llama-3.1-405b", "--gpus", "8", "--seq-length", "8192"]
                  ).stdout.splitlines()[0]
    assert line.startswith("does NOT fit") and "no single change or pair" in line


def test_train_json_states_the_mfu_basis():
    data = json.loads(invoke(["train", *BASE, "--fsdp", "--json"]).stdout)
    assert "BF16" in data["mfu_basis"] and data["peak_flops"] > 0


def test_infer_says_whether_it_fits_and_the_largest_batch():
    args = ["infer", "-m", "llama-3.1-70b", "--tp", "4", "--input-len", "2048", "--output-len",
            "256", "--precision", "fp8", "--kv-precision", "fp8"]
    line = invoke([*args, "--batch-size", "4096"]).stdout.splitlines()[0]
    assert line.startswith("does NOT fit") and "--batch-size " in line, line
    batch = line.split("--batch-size ")[1].replace(",", "")
    after = invoke([*args, "--batch-size", batch]).stdout.splitlines()[0]
    assert after.startswith("fits: "), after
