"""DualPipe devices hold two stages (DeepSeek-V3 report §3.2.1, Table 2), MTP shares the
first stage's embedding there (§3.2.3), and FP8 training keeps linear-layer inputs in FP8
(§3.3.2; Transformer Engine saves the quantized input)."""

from __future__ import annotations

import pytest

from perfcast.catalog.models import load_model
from perfcast.catalog.systems import load_system
from perfcast.graph.param_sharding import stage_params
from perfcast.graph.params import allocated_vocab_size
from perfcast.memory.activations import ActivationOptions, layer_activation_bytes
from perfcast.memory.estimate import estimate_memory
from perfcast.specs.strategy import Strategy
from perfcast.specs.workload import Workload


def test_fp8_keeps_linear_inputs_in_one_byte():
    model = load_model("llama-3-8b")
    s, b = 4096, 1
    bf16 = layer_activation_bytes(model, s, b, ActivationOptions())
    fp8 = layer_activation_bytes(model, s, b, ActivationOptions(fp8_linear_inputs=True))
    h, f = model.hidden_size, model.intermediate_size
    out_in = model.num_attention_heads * model.kv_channels
    # Saved per token: the QKV and MLP-in norm outputs (2·h), the out-projection input (a·d)
    # and the fc2 input (f), one byte each.
    assert bf16 - fp8 == pytest.approx((2 * h + out_in + f) * s * b)


def test_dualpipe_devices_hold_two_stages():
    model = load_model("deepseek-v3")
    system = load_system("hgx-h800", num_gpus=256)
    workload = Workload(seq_length=4096, global_batch_size=64)
    one_f_one_b = Strategy(num_gpus=256, pp=8, ep=32, distributed_optimizer=True)
    dualpipe = Strategy(num_gpus=256, pp=8, ep=32, distributed_optimizer=True,
                        pipeline_schedule="dualpipe")
    stages = estimate_memory(model, system, one_f_one_b, workload).stages
    devices = estimate_memory(model, system, dualpipe, workload).stages
    assert len(devices) == 8
    for i, device in enumerate(devices):
        mirror = devices[7 - i]
        assert device.total_bytes == pytest.approx(mirror.total_bytes)
        assert device.params == pytest.approx(stages[i].params + stages[7 - i].params)
    # Two copies of the weights over the pipeline (Table 2: parameters 2x).
    assert sum(d.params for d in devices) == pytest.approx(2 * sum(s.params for s in stages))
    assert sum(d.num_layers for d in devices) == 2 * model.num_hidden_layers


def test_mtp_shares_the_embedding_under_dualpipe():
    model = load_model("deepseek-v3")
    base = dict(num_gpus=256, pp=8, ep=32, mtp_num_layers=1)
    separate = stage_params(model, Strategy(**base), 7)
    shared = stage_params(model, Strategy(**base, pipeline_schedule="dualpipe"), 7)
    table = allocated_vocab_size(model, Strategy(**base)) * model.hidden_size
    assert separate.embedding - shared.embedding == pytest.approx(table)


def test_cli_memory_takes_the_pipeline_schedule():
    import json

    from typer.testing import CliRunner

    from perfcast.cli.main import app

    base = ["memory", "--model", "deepseek-v3", "--system", "hgx-h800", "--gpus", "256", "--pp",
            "8", "--ep", "32", "--use-distributed-optimizer", "--gbs", "64", "--json"]
    plain = json.loads(CliRunner().invoke(app, base).stdout)
    result = CliRunner().invoke(app, base + ["--pipeline-schedule", "dualpipe"])
    assert result.exit_code == 0, result.output
    dual = json.loads(result.stdout)
    assert sum(s["num_layers"] for s in dual["stages"]) == 2 * sum(
        s["num_layers"] for s in plain["stages"])
