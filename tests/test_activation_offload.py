"""CPU activation offloading (Megatron cpu_offloading_num_layers): memory moved to the host,
copies over PCIe or NVLink-C2C exposed only beyond the pass's compute."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from perfcast.catalog.gpus import load_gpu
from perfcast.catalog.host_io import host_io_for
from perfcast.catalog.models import load_model
from perfcast.catalog.systems import load_system
from perfcast.cli.main import app
from perfcast.estimate.training import estimate_training
from perfcast.specs.strategy import Strategy
from perfcast.specs.workload import Workload

runner = CliRunner()
MODEL = load_model("llama-3-70b")
WORKLOAD = Workload(seq_length=4096, global_batch_size=128)


def _report(system_name, layers):
    system = load_system(system_name, num_gpus=64)
    strategy = Strategy(num_gpus=64, fsdp=True, cpu_offload_activation_layers=layers)
    return estimate_training(MODEL, system, strategy, WORKLOAD)


def test_offloading_needs_pp_1_and_no_recompute():
    with pytest.raises(ValidationError, match="pp=1"):
        Strategy(num_gpus=8, pp=2, cpu_offload_activation_layers=4)
    with pytest.raises(ValidationError, match="recompute"):
        Strategy(num_gpus=8, recompute="full", cpu_offload_activation_layers=4)


def test_memory_falls_with_each_offloaded_layer():
    peaks = [_report("dgx-b200", n).memory.peak_bytes for n in (0, 1, 20, 40, 79)]
    assert peaks[1] == peaks[0]  # one layer is always being copied: it stays on the GPU
    assert peaks[1] > peaks[2] > peaks[3] > peaks[4]


def test_grace_c2c_hides_what_pcie_cannot():
    assert host_io_for(load_gpu("gb200")).pcie_bandwidth_Bps > 8 * host_io_for(
        load_gpu("b200")).pcie_bandwidth_Bps
    pcie = _report("dgx-b200", 60)
    c2c = _report("gb200-nvl72", 60)
    assert pcie.breakdown.offload_s > 0
    assert c2c.breakdown.offload_s < pcie.breakdown.offload_s
    assert _report("dgx-b200", 0).breakdown.offload_s == 0


def test_breakdown_still_sums_to_the_step():
    report = _report("dgx-b200", 60)
    assert report.breakdown.total_s == pytest.approx(report.step_time_s, rel=1e-9)


def test_cli_flag():
    base = ["train", "--model", "llama-3-70b", "--system", "dgx-b200", "--gpus", "64", "--fsdp",
            "--gbs", "128", "--json"]
    plain = json.loads(runner.invoke(app, base).stdout)
    result = runner.invoke(app, base + ["--cpu-offload-activations", "40"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["memory"]["peak_bytes"] < plain["memory"]["peak_bytes"]
    assert data["breakdown_s"]["offload"] > 0
    bad = runner.invoke(app, base + ["--cpu-offload-activations", "4", "--pp", "2"])
    assert bad.exit_code == 2 and "Traceback" not in bad.output


# ----- fine-grained offloading (Megatron-Core offload_modules) ---------------------------------

def _moe_memory(**extra):
    model = load_model("qwen3-30b-a3b")
    system = load_system("dgx-h100", num_gpus=16)
    strategy = Strategy(num_gpus=16, pp=2, ep=8, distributed_optimizer=True, **extra)
    return estimate_training(model, system, strategy, Workload(seq_length=4096,
                                                               global_batch_size=64))


def test_offloading_module_inputs_moves_exactly_their_bytes():
    from perfcast.memory.activations import ActivationOptions, offloaded_module_bytes

    model = load_model("qwen3-30b-a3b")
    s, b, k = 4096, 1, model.num_experts_per_tok
    opts = ActivationOptions(offload_modules=("expert_fc1", "moe_act"))
    permuted = 2 * k * s * b * model.hidden_size
    gate_up = 4 * model.expert_intermediate_size * k * s * b
    assert offloaded_module_bytes(model, s, b, opts, True) == pytest.approx(permuted + gate_up)
    assert offloaded_module_bytes(model, s, b, opts, False) == 0


def test_fine_grained_offload_frees_memory_and_costs_copies():
    plain = _moe_memory()
    offloaded = _moe_memory(offload_modules=("expert_fc1", "moe_act"))
    assert offloaded.memory.peak_bytes < plain.memory.peak_bytes
    assert offloaded.breakdown.offload_s >= 0
    assert offloaded.step_time_s >= plain.step_time_s
    with pytest.raises(ValidationError, match="cannot combine"):
        Strategy(num_gpus=8, offload_modules=("moe_act",), cpu_offload_activation_layers=2)


def test_row_text_offload_modules():
    from perfcast.validate.row_strategy import offload_modules

    notes: list[str] = []
    row = {"notes": "activation offloading (expert_fc1, moe_act) required; recompute moe_act"}
    assert offload_modules(row, notes) == ("expert_fc1", "moe_act")
    assert offload_modules({"notes": "no offloading"}, notes) == ()
