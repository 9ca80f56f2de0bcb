"""Decoder layers kept in BF16 under an FP8/FP4 recipe (Megatron-Core --first-last-layers-bf16,
torchao filter_fqns): their GEMMs run at BF16 and they have no quantize kernels; rows that state
"layers A-B bf16" read them (issue 21: torchtitan NVFP4 rows 536, 539)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from perfcast.catalog.models import load_model
from perfcast.catalog.systems import load_system
from perfcast.cli.main import app
from perfcast.estimate.training import estimate_training, stage_kinds
from perfcast.graph.ops import GemmOp
from perfcast.graph.stage import stage_graph
from perfcast.specs import Strategy, Workload
from perfcast.validate.csv_fields import RowError
from perfcast.validate.row_strategy import bf16_layers
from perfcast.validate.training_rows import parse_rows, read_rows

from conftest import shared_path

MODEL = load_model("llama-3-8b")  # 32 decoder layers
SYSTEM = load_system("dgx-b200")
WORKLOAD = Workload(seq_length=4096, global_batch_size=16)


def _strategy(**update) -> Strategy:
    return Strategy(num_gpus=8, fsdp=True, precision="fp8", fp8_recipe="nvfp4", **update)


def test_bf16_layers_form_their_own_group_without_casts():
    graph = stage_graph(MODEL, _strategy(num_layers_at_end_in_bf16=5), 4096, 0)
    assert sorted(g.count for g in graph.layers) == [5, 27]
    low = next(g for g in graph.layers if g.count == 27)
    high = next(g for g in graph.layers if g.count == 5)
    assert all(op.fp8_eligible for op in low.compute if isinstance(op, GemmOp))
    assert not any(op.fp8_eligible for op in high.compute if isinstance(op, GemmOp))
    # The BF16 layers are the FP8 layer without its quantize kernels.
    gemms = [op.name for op in low.compute if isinstance(op, GemmOp)]
    assert gemms == [op.name for op in high.compute if isinstance(op, GemmOp)]
    assert len(high.compute) < len(low.compute)


def test_gemm_seconds_mix_the_two_precisions_by_layer_count():
    """One stage: GEMM seconds = 27/32 of the all-NVFP4 step's + 5/32 of the all-BF16 layers'
    (the LM head is BF16 in all three)."""
    def gemm_s(strategy: Strategy) -> float:
        return float(estimate_training(MODEL, SYSTEM, strategy, WORKLOAD).breakdown.compute_gemm_s)

    fp4 = gemm_s(_strategy())
    bf16 = gemm_s(Strategy(num_gpus=8, fsdp=True))
    mixed = gemm_s(_strategy(num_layers_at_end_in_bf16=5))
    assert fp4 < mixed < bf16
    assert mixed == pytest.approx(27 / 32 * fp4 + 5 / 32 * bf16, rel=1e-9)
    start = gemm_s(_strategy(num_layers_at_start_in_bf16=3, num_layers_at_end_in_bf16=2))
    assert start == pytest.approx(mixed, rel=1e-9)


def test_pipeline_stages_with_bf16_layers_are_distinct_kinds():
    plain = Strategy(num_gpus=8, pp=4, precision="fp8")
    assert stage_kinds(MODEL, plain) == [0, 1, 1, 2]
    kept = plain.model_copy(update={"num_layers_at_start_in_bf16": 12})
    # Stage 0 holds layers 0-7 (all BF16), stage 1 layers 8-15 (4 BF16), stage 2 none.
    assert stage_kinds(MODEL, kept) == [0, 1, 2, 3]
    step = estimate_training(MODEL, SYSTEM, kept, WORKLOAD).step_time_s
    assert step > estimate_training(MODEL, SYSTEM, plain, WORKLOAD).step_time_s


def test_bf16_layers_need_fp8_and_fit_the_model():
    with pytest.raises(ValueError, match="need precision='fp8'"):
        Strategy(num_gpus=8, num_layers_at_end_in_bf16=1)
    with pytest.raises(ValueError, match="exceeds the model's 32 decoder layers"):
        stage_graph(MODEL, _strategy(num_layers_at_start_in_bf16=20,
                                     num_layers_at_end_in_bf16=13), 4096, 0)


@pytest.mark.parametrize(("args", "message"), [
    (["--fp8", "--num-layers-at-end-in-bf16", "33"],
     "error: num_layers_at_start_in_bf16 + num_layers_at_end_in_bf16=33: exceeds the model's "
     "32 decoder layers"),
    (["--num-layers-at-start-in-bf16", "2"], "need precision='fp8'"),
])
def test_cli_rejects_bad_bf16_layer_counts(args, message):
    result = CliRunner().invoke(app, ["train", "--model", "llama3-8b", "--gpus", "8", *args])
    assert result.exit_code == 2
    assert message in result.output
    assert "Traceback" not in result.output and len(result.output.strip().splitlines()) == 1


def test_rows_read_the_bf16_layer_range():
    notes: list[str] = []
    cell = {"precision": "NVFP4 (torchao; layers 0-26 NVFP4, layers 27-31 + LM head bf16)"}
    assert bf16_layers(cell, 32, notes) == {"num_layers_at_end_in_bf16": 5}
    assert notes == ["layers 27-31 keep BF16 GEMMs (row)"]
    assert bf16_layers({"precision": "FP8 (layers 0-1 bf16)"}, 32, []) == {
        "num_layers_at_start_in_bf16": 2}
    assert bf16_layers({"precision": "MXFP8 (torchao; all decoder linears)"}, 32, []) == {}
    with pytest.raises(RowError, match="neither start nor end"):
        bf16_layers({"precision": "FP8 (layers 4-6 bf16)"}, 32, [])
    with pytest.raises(RowError, match="outside the model's 32 layers"):
        bf16_layers({"precision": "FP8 (layers 27-40 bf16)"}, 32, [])


def test_torchtitan_nvfp4_rows_keep_their_last_layers_in_bf16():
    parsed, _ = parse_rows(read_rows(shared_path("ground_truth/training.csv")))
    kept = {p.row_id: (p.strategy.num_layers_at_start_in_bf16,
                       p.strategy.num_layers_at_end_in_bf16)
            for p in parsed
            if p.strategy.num_layers_at_start_in_bf16 or p.strategy.num_layers_at_end_in_bf16}
    assert kept == {"536": (0, 5), "539": (0, 6)}
