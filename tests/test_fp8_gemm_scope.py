"""Which GEMMs an FP8/MX recipe converts (``Strategy.fp8_gemm_scope``): torchtitan quantizes
linear layers (``quantize.linear.mx``) and the routed experts' grouped GEMMs
(``quantize.grouped_mm.mx``) with separate converters; the torchao MoE rows 533-535 measure
each alone and both (issue 16)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from perfcast.catalog.models import load_model
from perfcast.catalog.systems import load_system
from perfcast.cli.main import app
from perfcast.estimate.training import estimate_training
from perfcast.graph.fp8_casts import fp8_weight_params
from perfcast.graph.ops import GemmOp, MemoryOp
from perfcast.graph.param_sharding import stage_params
from perfcast.graph.stage import stage_graph
from perfcast.specs import Strategy, Workload
from perfcast.validate.row_strategy import fp8_gemm_scope
from perfcast.validate.training_rows import parse_rows, read_rows

from conftest import shared_path

MODEL = load_model("mixtral-8x7b")
SYSTEM = load_system("dgx-b200")
WORKLOAD = Workload(seq_length=4096, global_batch_size=16)


def _strategy(scope: str = "all", precision: str = "fp8", **update) -> Strategy:
    fp8 = {"fp8_recipe": "mxfp8", "fp8_gemm_scope": scope} if precision == "fp8" else {}
    return Strategy(num_gpus=8, ep=8, fsdp=True, precision=precision, **fp8, **update)


def _layer_compute(scope: str):
    graph = stage_graph(MODEL, _strategy(scope), 4096, 0)
    (group,) = graph.layers
    return group.compute


@pytest.mark.parametrize("scope", ["linear", "grouped"])
def test_scope_keeps_the_other_gemms_in_bf16_without_casts(scope):
    compute = _layer_compute(scope)
    gemms = [op for op in compute if isinstance(op, GemmOp) and op.name != "router"
             and not op.name.startswith("router_")]
    experts = [op for op in gemms if op.routed_expert]
    others = [op for op in gemms if not op.routed_expert]
    # Forward, dgrad and wgrad of both expert projections are marked as routed-expert GEMMs.
    assert len(experts) == 6 and {op.name.split("_")[0] for op in experts} == {"expert"}
    assert all(op.fp8_eligible == (scope == "grouped") for op in experts)
    assert all(op.fp8_eligible == (scope == "linear") for op in others)
    casts = {op.name for op in compute if isinstance(op, MemoryOp) and "fp8_cast" in op.name}
    assert casts, "the scoped GEMMs keep their quantize kernels"
    assert all(name.startswith("expert_") == (scope == "grouped") for name in casts)


def test_all_scope_is_the_default_graph():
    assert _layer_compute("all") == stage_graph(
        MODEL, Strategy(num_gpus=8, ep=8, fsdp=True, precision="fp8", fp8_recipe="mxfp8"),
        4096, 0).layers[0].compute


def test_gemm_seconds_split_exactly_between_the_two_scopes():
    """Every GEMM runs in exactly one of the two formats, so GEMM seconds add up:
    linear + grouped = all-FP8 + all-BF16, with both partial scopes strictly between."""
    def gemm_s(strategy: Strategy) -> float:
        return float(estimate_training(MODEL, SYSTEM, strategy, WORKLOAD).breakdown.compute_gemm_s)

    fp8, bf16 = gemm_s(_strategy("all")), gemm_s(_strategy(precision="bf16"))
    linear, grouped = gemm_s(_strategy("linear")), gemm_s(_strategy("grouped"))
    assert fp8 < linear < bf16 and fp8 < grouped < bf16
    assert linear + grouped == pytest.approx(fp8 + bf16, rel=1e-9)


def test_report_states_the_scope():
    notes = estimate_training(MODEL, SYSTEM, _strategy("grouped"), WORKLOAD).assumptions
    assert any("fp8_gemm_scope grouped" in n and "linear layers stay BF16" in n for n in notes)
    plain = estimate_training(MODEL, SYSTEM, _strategy("all"), WORKLOAD).assumptions
    assert not any("fp8_gemm_scope" in n for n in plain)


def test_cached_weight_casts_cover_only_the_scoped_weights():
    params = stage_params(MODEL, _strategy(), 0)
    scoped = {scope: fp8_weight_params(params, _strategy(scope).fp8_gemm_scope)
              for scope in ("all", "linear", "grouped")}
    assert scoped["grouped"] == params.expert
    assert scoped["linear"] == params.dense - params.embedding
    assert scoped["all"] == pytest.approx(scoped["linear"] + scoped["grouped"])


def test_scope_needs_fp8():
    with pytest.raises(ValueError, match="fp8_gemm_scope='linear' needs precision='fp8'"):
        Strategy(num_gpus=8, fp8_gemm_scope="linear")


def test_cli_flag_reaches_the_strategy_and_rejects_bad_values():
    runner = CliRunner()
    base = ["train", "-m", "mixtral-8x7b", "--system", "dgx-b200", "--gpus", "8", "--ep", "8",
            "--precision", "fp8", "--fp8-recipe", "mxfp8", "--json"]
    import json

    out = {scope: json.loads(runner.invoke(app, base + ["--fp8-gemm-scope", scope]).stdout)
           for scope in ("all", "grouped")}
    assert out["grouped"]["strategy"]["fp8_gemm_scope"] == "grouped"
    assert out["grouped"]["step_time_s"] > out["all"]["step_time_s"]
    bad = runner.invoke(app, base + ["--fp8-gemm-scope", "experts"])
    assert bad.exit_code == 2 and "--fp8-gemm-scope" in bad.output
    bf16 = runner.invoke(app, base[:-5] + ["--fp8-gemm-scope", "linear"])
    assert bf16.exit_code == 2
    assert "fp8_gemm_scope='linear' needs precision='fp8'" in bf16.output
    assert "Traceback" not in bf16.output


@pytest.mark.parametrize("text, scope", [
    ("mxfp8 for linears only (torchao quantize.linear.mx)", "linear"),
    ("mxfp8 for routed-expert grouped gemms only (torchao quantize.grouped_mm.mx)", "grouped"),
    ("mxfp8 for linears + routed-expert grouped gemms", "all"),
    ("mxfp8 (te; 1x32 blocks, e8m0 scales)", "all"),
])
def test_precision_cell_states_the_scope(text, scope):
    assert fp8_gemm_scope(text) == scope


def test_torchao_moe_rows_read_their_scope():
    parsed, _ = parse_rows(read_rows(shared_path("ground_truth", "training.csv")))
    scope = {p.row_id: (p.strategy.precision, p.strategy.fp8_gemm_scope) for p in parsed
             if p.row_id in {"532", "533", "534", "535"}}
    assert scope == {"532": ("bf16", "all"), "533": ("fp8", "linear"),
                     "534": ("fp8", "grouped"), "535": ("fp8", "all")}


def test_fp8_parameters_follow_the_scope_in_gathers_and_memory():
    """FP8 parameters (``fp8_param``) are FP8 only where the scope converts the weight: the
    FSDP gathers of the other weights stay 16-bit, and so does their storage (one rule,
    ``graph.fp8_casts.scope_converts``)."""
    from perfcast.memory.states import state_bytes
    from perfcast.schedule.data_parallel import dense_gather_bytes, expert_gather_bytes

    dense, embedding, expert = 1e9, 1e8, 4e9
    gathers = {}
    for scope in ("all", "linear", "grouped"):
        s = _strategy(scope, fp8_param=True)
        gathers[scope] = (dense_gather_bytes(dense, embedding, s), expert_gather_bytes(expert, s))
    bf16 = 2 * dense, 2 * expert
    assert gathers["linear"][1] == bf16[1] and gathers["linear"][0] < bf16[0]
    assert gathers["grouped"][0] == bf16[0] and gathers["grouped"][1] < bf16[1]
    assert gathers["all"] == (gathers["linear"][0], gathers["grouped"][1])
    params = stage_params(MODEL, _strategy(), 0)
    weights = {scope: state_bytes(params, _strategy(scope, fp8_param=True)).weights
               for scope in ("all", "linear", "grouped")}
    saved = {scope: state_bytes(params, _strategy(scope)).weights - weights[scope]
             for scope in weights}
    # Storage saved (1 B per weight) minus the FP8 copies no longer cast per layer: grouped
    # saves on the routed experts only, linear on the rest, all on both.
    assert saved["all"] > saved["grouped"] > 0 and saved["all"] > saved["linear"]
