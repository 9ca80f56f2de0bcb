"""DeepSeek-V3's published pre-training configuration (report §3.1-3.3, §4.2) fits in an H800
and forecasts within 10% of its 180K GPU-hours per trillion tokens (issue 16), and the FP8
SwiGLU-input cache (§3.3.2, ``Strategy.fp8_moe_act_inputs``) stores what the report says."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from perfcast.catalog.models import load_model
from perfcast.catalog.systems import load_system
from perfcast.cli.main import app
from perfcast.errors import InputError
from perfcast.estimate.training import estimate_training
from perfcast.memory.activations import ActivationOptions, layer_activation_bytes
from perfcast.specs.strategy import Strategy
from perfcast.specs.workload import Workload
from perfcast.units import GiB

TOOLS = Path(__file__).resolve().parents[1] / "tools"


def _published_strategy(**layout) -> Strategy:
    sys.path.insert(0, str(TOOLS))
    try:
        from deepseek_v3_published import published_strategy
    finally:
        sys.path.remove(str(TOOLS))
    return published_strategy(**layout)


def test_published_configuration_fits_and_forecasts_within_ten_percent():
    """3 / 2 first/last split (the DualPipe device holding both ends also holds the embedding,
    head and MTP module): measured 71.1 GiB of 79.65 GiB (81.1 GiB before the FP8 SwiGLU-input
    cache) and 1,488 tokens/s/GPU against 1e12 / (180e3 · 3600) = 1,543 (-3.6%)."""
    strategy = _published_strategy(num_layers_in_first_pipeline_stage=3,
                                   num_layers_in_last_pipeline_stage=2)
    report = estimate_training(load_model("deepseek-v3"), load_system("hgx-h800", num_gpus=2048),
                               strategy, Workload(seq_length=4096, global_batch_size=15360))
    assert report.memory.fits
    assert report.memory.peak_bytes / GiB <= 72.0
    published = 1e12 / (180e3 * 3600)
    assert report.tokens_per_s_per_gpu == pytest.approx(published, rel=0.10)


def test_fp8_swiglu_inputs_halve_the_gate_and_up_outputs():
    """Routed experts keep k copies of the gate and up outputs (2·f values per copy), the
    shared expert one: FP8 saves one of their two bytes, 2·f·(k + shared)·s·b in all."""
    model = load_model("deepseek-v3")
    s, b = 4096, 1
    opts = ActivationOptions(recompute="selective", recompute_modules=("moe_act",),
                             fp8_linear_inputs=True)
    plain = layer_activation_bytes(model, s, b, opts, moe_layer=True)
    cached = layer_activation_bytes(model, s, b, ActivationOptions(
        recompute="selective", recompute_modules=("moe_act",), fp8_linear_inputs=True,
        fp8_moe_act_inputs=True), moe_layer=True)
    routed = 2 * model.expert_intermediate_size * model.num_experts_per_tok
    shared = 2 * model.shared_intermediate_size
    assert plain - cached == pytest.approx((routed + shared) * s * b)
    dense = ActivationOptions(fp8_linear_inputs=True, fp8_moe_act_inputs=True)
    assert layer_activation_bytes(model, s, b, dense) == layer_activation_bytes(
        model, s, b, ActivationOptions(fp8_linear_inputs=True))


def test_fp8_swiglu_inputs_need_fp8():
    with pytest.raises((ValueError, InputError), match="fp8_moe_act_inputs"):
        Strategy(num_gpus=8, ep=8, fp8_moe_act_inputs=True)


def test_cli_flag_lowers_the_peak():
    base = ["memory", "--model", "deepseek-v3", "--system", "hgx-h800", "--gpus", "256",
            "--pp", "8", "--ep", "32", "--use-distributed-optimizer", "--fp8", "--gbs", "64",
            "--recompute", "selective", "--recompute-modules", "moe_act", "--json"]
    plain = CliRunner().invoke(app, base)
    cached = CliRunner().invoke(app, [*base, "--fp8-moe-act-inputs"])
    assert cached.exit_code == 0, cached.output
    peak = {name: json.loads(r.stdout)["peak_bytes"] for name, r in
            (("plain", plain), ("cached", cached))}
    assert peak["cached"] < peak["plain"]


def test_fit_advice_offers_the_fp8_swiglu_cache():
    """Without the cache the published config needs 81.1 GiB; the lever alone makes it fit."""
    from perfcast.memory.estimate import estimate_memory
    from perfcast.search.fit_advice import candidate_changes

    model = load_model("deepseek-v3")
    system = load_system("hgx-h800", num_gpus=2048)
    workload = Workload(seq_length=4096, global_batch_size=15360)
    plain = _published_strategy(num_layers_in_first_pipeline_stage=3,
                                num_layers_in_last_pipeline_stage=2).model_copy(
        update={"fp8_moe_act_inputs": False})
    assert not estimate_memory(model, system, plain, workload).fits
    changes = dict(candidate_changes(model, plain))
    assert changes["--fp8-moe-act-inputs"] == {"fp8_moe_act_inputs": True}
    cached = plain.model_copy(update=changes["--fp8-moe-act-inputs"])
    assert estimate_memory(model, system, cached, workload).fits
