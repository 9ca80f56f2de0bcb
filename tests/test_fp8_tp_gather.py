"""FP8 tensor-parallel all-gathers (``Strategy.fp8_tp_gather``; torchao float8 TP styles, which
torchtitan applies under tensorwise scaling): exact collective and cast bytes, the framework
default, validation and the CLI flag."""

from __future__ import annotations

from dataclasses import replace

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from perfcast.catalog.framework_defaults import RunFacts, apply_framework_profile
from perfcast.catalog.frameworks import framework_of_text
from perfcast.catalog.models import load_model
from perfcast.catalog.systems import load_system
from perfcast.cli.main import app
from perfcast.estimate.training import estimate_training
from perfcast.graph.fp8_casts import fp8_cast_ops, gathered_quantize_bytes
from perfcast.graph.layer import layer_ops
from perfcast.graph.ops import Collective, GemmOp, Phase
from perfcast.graph.stage import layer_shape
from perfcast.specs import Strategy, Workload

MODEL = load_model("llama-3-8b")
SYSTEM = load_system("dgx-h100")
WORKLOAD = Workload(seq_length=4096, global_batch_size=16)


def _strategy(**options) -> Strategy:
    fields = {"num_gpus": 8, "tp": 8, "sequence_parallel": True, "precision": "fp8",
              "micro_batch_size": 2} | options
    return Strategy(**fields)


def _collective_bytes(strategy: Strategy) -> dict[tuple[str, Phase], float]:
    _, comm = layer_ops(MODEL, layer_shape(MODEL, strategy, 4096, False))
    return {(op.name, op.phase): op.size_bytes for op in comm}


def test_all_gathers_carry_fp8_and_reduce_scatters_stay_bf16():
    # T = 2·4096 tokens × h = 4096: 2 B per element in BF16, 1 B in FP8.
    elements = 2 * 4096 * 4096
    bf16 = _collective_bytes(_strategy())
    fp8 = _collective_bytes(_strategy(fp8_tp_gather=True))
    for phase in (Phase.FORWARD, Phase.BACKWARD_DGRAD):
        assert bf16[("tp_all_gather", phase)] == 2 * elements
        assert fp8[("tp_all_gather", phase)] == elements
        assert fp8[("tp_reduce_scatter", phase)] == bf16[("tp_reduce_scatter", phase)] == 2 * elements
    # Still one all-gather and one reduce-scatter kind: only the gathers' element size changed.
    collectives = {op.collective for op in layer_ops(MODEL, layer_shape(
        MODEL, _strategy(fp8_tp_gather=True), 4096, False))[1]}
    assert collectives == {Collective.ALL_GATHER, Collective.REDUCE_SCATTER}


def test_gathered_operand_is_cast_on_its_shard():
    # X[8, 4] gathered over tp 4 (E = 32): the shard's tensorwise cast (amax read 2·8 B, cast
    # read 2·8 B, write 8 B) plus an FP8 transpose of the gathered tensor for wgrad (2·32 B).
    assert gathered_quantize_bytes(8, 4, 1, ("cols", "rows"), "tensorwise", False, 4) == \
        pytest.approx(16 + 16 + 8 + 64)
    gemm = GemmOp("proj", Phase.FORWARD, m=8, n=6, k=4, tp_gathered="input")
    local = {op.name: op.bytes_moved for op in fp8_cast_ops([gemm], "tensorwise", tp_gather=4)}
    full = {op.name: op.bytes_moved for op in fp8_cast_ops([gemm], "tensorwise")}
    assert local["proj_input_fp8_cast"] == pytest.approx(104)
    assert full["proj_input_fp8_cast"] == pytest.approx(64 + 64 + 64)  # whole X, two layouts
    assert local["proj_grad_fp8_cast"] == full["proj_grad_fp8_cast"]  # dY not gathered here
    with pytest.raises(Exception, match="fp8_recipe='rowwise'"):
        gathered_quantize_bytes(8, 4, 1, ("cols",), "rowwise", False, 4)


def test_llama_layer_marks_the_gathered_operands():
    compute, _ = layer_ops(MODEL, layer_shape(MODEL, _strategy(), 4096, False))
    marks = {op.name: op.tp_gathered for op in compute
             if isinstance(op, GemmOp) and op.phase == Phase.FORWARD}
    assert marks == {"qkv_proj": "input", "out_proj": "grad", "mlp_in_proj": "input",
                     "mlp_out_proj": "grad"}
    no_sp = layer_ops(MODEL, layer_shape(MODEL, _strategy(sequence_parallel=False), 4096,
                                         False))[0]
    assert all(op.tp_gathered == "" for op in no_sp if isinstance(op, GemmOp))


def test_fp8_gathers_make_the_step_faster_and_bf16_layers_keep_bf16_gathers():
    base = _strategy()
    faster = estimate_training(MODEL, SYSTEM, replace_strategy(base, fp8_tp_gather=True),
                               WORKLOAD)
    slower = estimate_training(MODEL, SYSTEM, base, WORKLOAD)
    assert faster.breakdown.tp_comm_s < slower.breakdown.tp_comm_s
    assert faster.step_time_s < slower.step_time_s
    shape = replace(layer_shape(MODEL, replace_strategy(base, fp8_tp_gather=True), 4096, False),
                    fp8_recipe=None)  # a BF16 layer under the FP8 recipe (stage.layer_classes)
    gathers = [op.size_bytes for op in layer_ops(MODEL, shape)[1] if op.name == "tp_all_gather"]
    assert gathers == [2 * 2 * 4096 * 4096] * 2


def replace_strategy(strategy: Strategy, **update) -> Strategy:
    return Strategy(**(strategy.model_dump() | update))


@pytest.mark.parametrize("options", [{"precision": "bf16"}, {"fp8_recipe": "rowwise"},
                                     {"fp8_recipe": "mxfp8"}])
def test_needs_a_per_tensor_fp8_recipe(options):
    with pytest.raises(ValidationError, match="fp8_tp_gather=True needs precision='fp8'"):
        _strategy(fp8_tp_gather=True, **options)


@pytest.mark.parametrize(("recipe", "tp", "expected"), [
    ("tensorwise", 8, True), ("rowwise", 8, None), ("tensorwise", 1, None)])
def test_torchtitan_gathers_fp8_under_tensorwise_tp_only(recipe, tp, expected):
    framework = framework_of_text("torchtitan", "2025-06")
    assert framework is not None
    facts = RunFacts(tp=tp, ep=1, precision="fp8", generation="hopper", layers_per_stage=32)
    fields = apply_framework_profile(framework, {"fp8_recipe": recipe}, facts).fields
    assert fields.get("fp8_tp_gather") is expected
    bf16 = RunFacts(tp=tp, ep=1, precision="bf16", generation="hopper", layers_per_stage=32)
    assert "fp8_tp_gather" not in apply_framework_profile(framework, {}, bf16).fields


def test_megatron_core_keeps_bf16_tp_gathers():
    framework = framework_of_text("Megatron-Core", "")
    assert framework is not None
    facts = RunFacts(tp=8, ep=1, precision="fp8", generation="hopper", layers_per_stage=32)
    assert "fp8_tp_gather" not in apply_framework_profile(framework, {}, facts).fields


def test_cli_flag_and_one_line_error():
    base = ["train", "--model", "llama3-8b", "--gpus", "8", "--tp", "8", "--fp8",
            "--global-batch-size", "16", "--json"]
    ok = CliRunner().invoke(app, base + ["--fp8-tp-gather"])
    assert ok.exit_code == 0, ok.output
    assert '"fp8_tp_gather": true' in ok.stdout
    bad = CliRunner().invoke(app, base + ["--fp8-tp-gather", "--fp8-recipe", "rowwise"])
    assert bad.exit_code == 2
    lines = bad.stderr.strip().splitlines()
    assert len(lines) == 1 and "fp8_tp_gather=True" in lines[0] and "'rowwise'" in lines[0]
