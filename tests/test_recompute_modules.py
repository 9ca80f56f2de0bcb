"""Megatron-Core ``--recompute-modules``: activation bytes dropped and forward time re-run per
module, the default equal to Korthikanti's selective recomputation, row text and CLI."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from perfcast.catalog.models import load_model
from perfcast.catalog.systems import load_system
from perfcast.cli.main import app
from perfcast.errors import InputError
from perfcast.estimate.training import estimate_training
from perfcast.specs.compat import check_strategy_for_model
from perfcast.specs.strategy import Strategy
from perfcast.specs.workload import Workload
from perfcast.validate.vocabulary import read_recompute


def recompute_modules(text: str) -> tuple[str, ...]:
    stated = read_recompute(text)
    return stated.modules if stated is not None else ()

runner = CliRunner()
MODULES = ("core_attn", "mlp", "moe", "shared_experts", "moe_act", "layernorm", "mla_up_proj")


def _run(model_name, modules, **extra):
    model = load_model(model_name)
    strategy = Strategy(num_gpus=8, ep=8 if model.is_moe else 1, recompute="selective",
                        recompute_modules=modules, distributed_optimizer=True, **extra)
    system = load_system("dgx-h100", num_gpus=8)
    workload = Workload(seq_length=4096, global_batch_size=8)
    report = estimate_training(model, system, strategy, workload)
    return report.memory.stages[0].layer_activations_bytes, report.breakdown.recompute_s


def test_default_is_korthikanti_selective():
    model = load_model("llama-3-8b")
    system = load_system("dgx-h100", num_gpus=8)
    workload = Workload(seq_length=4096, global_batch_size=8)
    plain = estimate_training(model, system, Strategy(num_gpus=8, recompute="selective"), workload)
    named = estimate_training(model, system, Strategy(num_gpus=8, recompute="selective",
                                                      recompute_modules=("core_attn",)), workload)
    assert named.step_time_s == plain.step_time_s
    assert named.memory.peak_bytes == plain.memory.peak_bytes


@pytest.mark.parametrize("model_name,module", [
    ("llama-3-8b", "mlp"), ("llama-3-8b", "layernorm"), ("mixtral-8x7b", "moe"),
    ("mixtral-8x7b", "moe_act"), ("deepseek-v3", "mla_up_proj"),
    ("deepseek-v3", "shared_experts")])
def test_each_module_trades_memory_for_time(model_name, module):
    """Adding a module to core_attn stores fewer bytes and re-runs more forward seconds."""
    base_bytes, base_s = _run(model_name, ("core_attn",))
    more_bytes, more_s = _run(model_name, ("core_attn", module))
    assert more_bytes < base_bytes
    assert more_s > base_s


def test_whole_moe_layer_saves_more_than_its_activation():
    moe_bytes, moe_s = _run("mixtral-8x7b", ("moe",))
    act_bytes, act_s = _run("mixtral-8x7b", ("moe_act",))
    assert moe_bytes < act_bytes and moe_s > act_s


def test_moe_act_drops_the_fc2_input_share():
    """SwiGLU experts keep gate, up (2·2·f) and the product (2·f): moe_act drops a third of the
    routed-expert terms, no more."""
    none_bytes, _ = _run("mixtral-8x7b", ())
    act_bytes, _ = _run("mixtral-8x7b", ("moe_act",))
    model = load_model("mixtral-8x7b")
    per_layer_expert = 6 * model.expert_intermediate_size * model.num_experts_per_tok * 4096
    dropped = (none_bytes - act_bytes) / model.num_hidden_layers
    assert dropped == pytest.approx(per_layer_expert / 3, rel=1e-9)


def test_module_rules():
    with pytest.raises(ValidationError, match="needs recompute='selective'"):
        Strategy(num_gpus=8, recompute_modules=("mlp",))
    with pytest.raises(ValidationError, match="moe_grouped_gemm"):
        Strategy(num_gpus=8, recompute="selective", recompute_modules=("moe_act",),
                 moe_grouped_gemm=False)
    with pytest.raises(ValidationError, match="ep_overlap"):
        Strategy(num_gpus=8, ep=8, recompute="selective", recompute_modules=("moe",),
                 ep_overlap=True)
    with pytest.raises(InputError, match="multi-latent"):
        check_strategy_for_model(load_model("llama-3-8b"), Strategy(
            num_gpus=8, recompute="selective", recompute_modules=("mla_up_proj",)))


@pytest.mark.parametrize("text,modules", [
    ("selective (moe_act, layernorm)", ("moe_act", "layernorm")),
    ("selective (layernorm, moe act)", ("layernorm", "moe_act")),
    ("selective (--recompute-modules mlp up_proj: dense-layer MLP + MLA up-projection)",
     ("mlp", "mla_up_proj")),
    ("selective (layernorm moe)", ("layernorm", "moe")),
    ("selective", ()),
])
def test_row_text(text, modules):
    assert recompute_modules(text) == modules


def test_cli_recompute_modules_flag():
    base = ["memory", "--model", "mixtral-8x7b", "--gpus", "8", "--ep", "8", "--json"]
    plain = json.loads(runner.invoke(app, base).stdout)
    modules = runner.invoke(app, base + ["--recompute-modules", "moe_act,layernorm"])
    assert modules.exit_code == 0, modules.output
    assert json.loads(modules.stdout)["peak_bytes"] < plain["peak_bytes"]
    bad = runner.invoke(app, base + ["--recompute-modules", "attention"])
    assert bad.exit_code == 2 and "recompute_modules" in bad.output
    assert "Traceback" not in bad.output


def test_every_module_is_known_to_the_row_reader_and_the_cli():
    for module in MODULES:
        assert recompute_modules(f"selective ({module})") == (module,)
