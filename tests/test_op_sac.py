"""torchtitan per-op selective activation checkpointing (``op_sac``): the matmuls it re-runs
(every second ``aten.mm`` of a block), the tensors it keeps, its time, and how rows, the
torchtitan profile and the CLI reach it."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from perfcast.catalog.framework_defaults import RunFacts, apply_framework_profile
from perfcast.catalog.frameworks import load_framework_profile
from perfcast.catalog.models import load_model
from perfcast.catalog.systems import load_system
from perfcast.cli.main import app
from perfcast.estimate.training import estimate_training
from perfcast.graph.layer import layer_ops
from perfcast.graph.op_sac import op_sac_gemm_shares, op_sac_recomputed, op_sac_saved
from perfcast.graph.ops import GemmOp, Phase
from perfcast.graph.recompute_modules import forward_recompute_share
from perfcast.graph.stage import layer_shape
from perfcast.memory.activations import ActivationOptions, layer_activation_bytes
from perfcast.memory.op_sac_activations import op_sac_layer_bytes
from perfcast.specs.strategy import Strategy
from perfcast.specs.workload import Workload
from perfcast.validate.vocabulary import read_recompute

runner = CliRunner()
OP_SAC = Strategy(num_gpus=8, recompute="selective", recompute_modules=("op_sac",))


def _recomputed_gemm_flops(model_name: str, moe: bool = False) -> tuple[float, float]:
    """(recomputed forward GEMM FLOPs, all forward linear-layer GEMM FLOPs) of one layer."""
    model = load_model(model_name)
    compute, _ = layer_ops(model, layer_shape(model, OP_SAC, 4096, moe))
    shares = op_sac_gemm_shares(model, moe)
    gemms = [op for op in compute if isinstance(op, GemmOp) and op.phase == Phase.FORWARD
             and op.name != "router"]
    redone = sum(op.flops * forward_recompute_share(op, ("op_sac",), frozenset(), shares)
                 for op in gemms)
    return redone, sum(op.flops for op in gemms)


def test_even_matmul_count_recomputes_half_the_matmul_flops():
    """GPT-3 (MHA, GELU MLP): q, k, v, o, fc1, fc2 = 6 mms in pairs of equal size; op-SAC
    re-runs k, o and fc2: exactly half the layer's linear forward FLOPs."""
    redone, total = _recomputed_gemm_flops("gpt3-175b")
    assert redone == pytest.approx(0.5 * total, rel=1e-12)


def test_llama_recomputes_wk_wo_w3():
    """Llama (7 mms: wq wk wv wo w1 w3 w2): the 2nd, 4th and 6th are re-run."""
    model = load_model("llama-3-8b")
    h, f, kv = model.hidden_size, model.intermediate_size, model.num_kv_heads * model.kv_channels
    redone = [(mm.op_name, mm.in_width, mm.out_width) for mm in op_sac_recomputed(model, False)]
    assert redone == [("qkv_proj", h, kv), ("out_proj", h, h), ("mlp_in_proj", h, f)]
    assert [mm.op_name for mm in op_sac_saved(model, False)] == [
        "qkv_proj", "qkv_proj", "mlp_in_proj", "mlp_out_proj"]
    shares = {s.name: s.share for s in op_sac_gemm_shares(model, False)}
    assert shares == pytest.approx({"qkv_proj": kv / (h + 2 * kv), "out_proj": 1.0,
                                    "mlp_in_proj": 0.5, "mlp_out_proj": 0.0})
    redone_flops, total = _recomputed_gemm_flops("llama-3-8b")
    assert redone_flops / total == pytest.approx(
        (kv * h + h * h + h * f) / ((h + 2 * kv) * h + h * h + 3 * h * f), rel=1e-12)


def test_moe_router_always_and_routed_experts_never_recomputed():
    shares = {s.name: s.share for s in op_sac_gemm_shares(load_model("mixtral-8x7b"), True)}
    assert shares["router"] == 1.0 and "expert_in_proj" not in shares


def test_saved_bytes_per_token_llama():
    """No TP: layer input h, wq a·d, wv g·d, w1 f, w2 h outputs, SDPA output a·d (16-bit) and
    its fp32 log-sum-exp per head."""
    model = load_model("llama-3-8b")
    h, f = model.hidden_size, model.intermediate_size
    a, d, g = model.num_attention_heads, model.kv_channels, model.num_kv_heads
    opts = ActivationOptions(recompute="selective", recompute_modules=("op_sac",))
    expected = 2 * (h + a * d + g * d + f + h) + 2 * a * d + 4 * a
    assert op_sac_layer_bytes(model, 1, 1, opts) == pytest.approx(expected)
    assert layer_activation_bytes(model, 1, 1, opts) == pytest.approx(expected)


def test_saved_bytes_between_full_and_core_attn_and_sharded_by_tp():
    model = load_model("llama-3-8b")
    s, b = 8192, 2
    sac = ActivationOptions(recompute="selective", recompute_modules=("op_sac",))
    core = ActivationOptions(recompute="selective")
    full = ActivationOptions(recompute="full")
    assert (layer_activation_bytes(model, s, b, full) < layer_activation_bytes(model, s, b, sac)
            < 0.5 * layer_activation_bytes(model, s, b, core))
    tp4 = ActivationOptions(tp=4, sequence_parallel=True, recompute="selective",
                            recompute_modules=("op_sac",))
    # Row-parallel wo/w2 partial sums stay full width per rank; the rest shards over TP.
    assert (layer_activation_bytes(model, s, b, sac) / 4 < layer_activation_bytes(model, s, b, tp4)
            < layer_activation_bytes(model, s, b, sac) / 2)


def test_time_and_memory_between_core_attn_and_full():
    model = load_model("llama-3-8b")
    system = load_system("dgx-h100", num_gpus=8)
    workload = Workload(seq_length=8192, global_batch_size=16)
    reports = {name: estimate_training(model, system, Strategy(num_gpus=8, micro_batch_size=2, **kw),
                                       workload)
               for name, kw in {"core": {"recompute": "selective"},
                                "sac": {"recompute": "selective", "recompute_modules": ("op_sac",)},
                                "full": {"recompute": "full"}}.items()}
    assert (reports["core"].breakdown.recompute_s < reports["sac"].breakdown.recompute_s
            < reports["full"].breakdown.recompute_s)
    assert (reports["full"].memory.peak_bytes < reports["sac"].memory.peak_bytes
            < reports["core"].memory.peak_bytes)


def test_tensor_parallel_gathers_are_re_run():
    """With TP + SP the forward all-gathers feeding the recomputed matmuls run again."""
    model = load_model("llama-3-8b")
    system = load_system("dgx-h100", num_gpus=8)
    workload = Workload(seq_length=8192, global_batch_size=8)
    kw = {"num_gpus": 8, "tp": 8, "sequence_parallel": True, "micro_batch_size": 1}
    sac = estimate_training(model, system, Strategy(recompute="selective",
                                                    recompute_modules=("op_sac",), **kw), workload)
    tp1 = estimate_training(model, system, Strategy(num_gpus=8, micro_batch_size=1,
                                                    recompute="selective",
                                                    recompute_modules=("op_sac",)), workload)
    assert sac.breakdown.recompute_s > tp1.breakdown.recompute_s / 8


def test_op_sac_takes_no_other_module():
    with pytest.raises(ValidationError, match="op_sac"):
        Strategy(num_gpus=8, recompute="selective", recompute_modules=("op_sac", "mlp"))


@pytest.mark.parametrize("text", ["per-op selective activation checkpointing",
                                  "selective op activation checkpointing",
                                  "selective (op) per default toml", "selective per-op SAC"])
def test_rows_stating_per_op_sac(text):
    stated = read_recompute(text)
    assert stated is not None and (stated.kind, stated.modules) == ("selective", ("op_sac",))


def test_torchtitan_main_default_is_op_sac_and_v022_every_second_layer():
    facts = RunFacts(tp=1, ep=1, precision="bf16", generation="hopper", layers_per_stage=32)
    main = apply_framework_profile(load_framework_profile("torchtitan"), {}, facts).fields
    assert (main["recompute"], main["recompute_modules"]) == ("selective", ("op_sac",))
    old = apply_framework_profile(load_framework_profile("torchtitan@0.2.2"), {}, facts).fields
    assert (old["recompute"], old["recompute_num_layers"]) == ("full", 16)


def test_cli_op_sac():
    base = ["memory", "--model", "llama-3-8b", "--gpus", "8", "--seq-length", "8192",
            "--micro-batch-size", "2", "--json"]
    core = json.loads(runner.invoke(app, base + ["--recompute", "selective"]).stdout)
    sac = runner.invoke(app, base + ["--recompute-modules", "op_sac"])
    assert sac.exit_code == 0, sac.output
    assert json.loads(sac.stdout)["peak_bytes"] < core["peak_bytes"]
    bad = runner.invoke(app, base + ["--recompute-modules", "op_sac,mlp"])
    assert bad.exit_code == 2 and "op_sac" in bad.output and "Traceback" not in bad.output


@pytest.mark.parametrize("model_name", ["llama-3-8b", "mixtral-8x7b"])
def test_bulk_search_layers_carry_the_estimator_shares(model_name):
    """The bulk search's per-shape layer ops carry the same op-SAC shares as the stage graph
    ``estimate_training`` times (one rule, ``graph.op_sac``, for both paths)."""
    from perfcast.graph.stage import stage_graph
    from perfcast.search.bulk import layer_group

    model = load_model(model_name)
    strategy = OP_SAC.model_copy(update={"ep": 8 if model.is_moe else 1})
    for group in stage_graph(model, strategy, 4096, 0).layers:
        bulk = layer_group(model, layer_shape(model, strategy, 4096, group.moe))
        assert bulk.op_sac_shares == group.op_sac_shares and bulk.op_sac_shares


def test_row_stating_per_op_sac_reads_op_sac():
    from perfcast.validate.training_rows import parse_rows, read_rows

    from conftest import shared_path

    raw = [r for r in read_rows(shared_path("ground_truth", "training.csv"))
           if r["row_id"] in ("105", "114", "518")]
    parsed, _ = parse_rows(raw)
    assert len(parsed) == 3
    for row in parsed:
        assert row.strategy.recompute == "selective"
        assert row.strategy.recompute_modules == ("op_sac",), row.row_id


def test_hfu_counts_the_recomputed_matmuls():
    """HFU - MFU = the recomputed mm FLOPs (wk, wo, w3 per Llama layer) over the peak."""
    model = load_model("llama-3-8b")
    h, f, kv = model.hidden_size, model.intermediate_size, model.num_kv_heads * model.kv_channels
    report = estimate_training(model, load_system("dgx-h100", num_gpus=8), OP_SAC,
                               Workload(seq_length=4096, global_batch_size=8))
    extra = report.hardware_flops_per_token - report.model_flops_per_token
    assert extra == pytest.approx(model.num_hidden_layers * 2 * (h * kv + h * h + h * f))


def test_torchtitan_search_proposes_its_own_selective_recompute():
    """The search's selective candidates under torchtitan run per-op SAC (what torchtitan's
    selective mode is), never Megatron's ``core_attn``; the bulk evaluation (TP, sequence
    parallelism and FSDP as arrays) equals ``estimate_training`` in step time and memory, and
    other blocks keep the default modules."""
    import random

    from perfcast.search.bulk import BulkEvaluator
    from perfcast.search.enumerate import enumerate_strategies
    from perfcast.search.framework_rules import LayoutRules, framework_options
    from perfcast.search.pins import Pin
    from perfcast.search.space import SearchConstraints

    model = load_model("llama-3-8b")
    system = load_system("dgx-h100", num_gpus=16)
    workload = Workload(seq_length=4096, global_batch_size=32)
    framework = load_framework_profile("torchtitan")
    options = framework_options(framework, "hopper")
    assert options.recompute_modules == ("op_sac",)
    c = SearchConstraints(max_vpp=1, max_micro_batch_size=2, fp8=False,
                          fixed=(Pin.parse("pp=1"),))
    space = enumerate_strategies(model, system, 16, workload, c,
                                 LayoutRules.of(framework, "hopper"), options)
    metrics = BulkEvaluator.for_space(model, system, workload, space).evaluate_all(space)
    seen = {"selective": 0, "other": 0}
    rng = random.Random(3)
    for _ in range(60):
        b = rng.randrange(len(space.blocks))
        i = rng.randrange(len(space.blocks[b]))
        strategy = space.blocks[b].strategy(i)
        if strategy.recompute == "selective":
            assert strategy.recompute_modules == ("op_sac",)
            seen["selective"] += 1
        else:
            assert strategy.recompute_modules == ("core_attn",)
            seen["other"] += 1
        report = estimate_training(model, system, strategy, workload)
        assert metrics[b].step_time_s[i] == pytest.approx(report.step_time_s, rel=1e-9)
        assert metrics[b].memory_bytes[i] == pytest.approx(report.memory.peak_bytes, rel=1e-9)
    assert seen["selective"] > 0 and seen["other"] > 0
