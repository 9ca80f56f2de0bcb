"""Cumulative optimization-history rows carry every earlier step into their Strategy
(validate/row_history.py), and the MoE fusion options those steps set cost what they say
(unfused router / permute kernels, graph/layer.py)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from perfcast.catalog.models import load_model
from perfcast.cli.main import app
from perfcast.graph.layer import (
    UNFUSED_PERMUTE_PASSES,
    UNFUSED_ROUTER_PASSES,
    LayerShape,
    mlp_forward_ops,
)
from perfcast.validate.row_history import annotate_histories, history_settings
from perfcast.validate.training_rows import ParsedRow, parse_row, parse_rows, read_rows

from conftest import shared_path

HISTORY = [str(i) for i in range(542, 555)]
"""DeepSeek-V3 on GB200 NVL72, one row per step of the optimization-history table."""


@pytest.fixture(scope="module")
def history_rows() -> dict[str, ParsedRow]:
    rows = read_rows(shared_path("ground_truth", "training.csv"))
    parsed, _ = parse_rows([r for r in rows if r["row_id"] in HISTORY])
    return {p.row_id: p for p in parsed}


def _fusions(parsed: ParsedRow) -> tuple[bool, bool, str, bool]:
    s = parsed.strategy
    return s.moe_permute_fusion, s.moe_router_fusion, s.cuda_graphs, s.fp8_fused_casts


def test_every_history_row_parses(history_rows):
    assert sorted(history_rows) == HISTORY


def test_baseline_has_none_of_the_later_steps(history_rows):
    assert _fusions(history_rows["542"]) == (False, False, "none", False)
    assert history_rows["542"].strategy.moe_token_dispatcher == "alltoall"


def test_steps_accumulate_in_table_order(history_rows):
    assert _fusions(history_rows["543"]) == (True, False, "none", False)  # permute
    assert _fusions(history_rows["544"]) == (True, True, "none", False)  # router fusion
    assert _fusions(history_rows["547"]) == (True, True, "attention", False)  # CUDA graphs
    assert _fusions(history_rows["554"]) == (True, True, "attention", True)  # quant in norm
    assert history_rows["552"].strategy.moe_token_dispatcher == "hybridep"


def test_steps_without_a_mechanism_are_named_in_the_notes(history_rows):
    notes = " ".join(history_rows["549"].notes)
    assert "no modelled mechanism" in notes and "CPU-side optimization" in notes
    assert "Baseline" not in " ".join(history_rows["542"].notes)


def test_forecast_rises_with_each_modelled_step(history_rows):
    """Measured 1,902 -> 3,731 tokens/s/GPU over the table; the modelled steps (fusions,
    DeepEP, recompute, quantization in the norm) give 3,252 -> 3,500: never a step down."""
    from perfcast.estimate.training import estimate_training

    rates = [estimate_training(p.model, p.system, p.strategy, p.workload).tokens_per_s_per_gpu
             for p in (history_rows[i] for i in HISTORY)]
    assert all(b >= a - 1e-6 for a, b in zip(rates, rates[1:], strict=False))
    assert rates[-1] / rates[0] > 1.05


def test_a_row_alone_reads_only_its_own_step():
    row = {r["row_id"]: r for r in read_rows(shared_path("ground_truth", "training.csv"))}["547"]
    alone = parse_row(row)
    assert isinstance(alone, ParsedRow)
    assert alone.strategy.cuda_graphs == "attention"
    assert alone.strategy.moe_permute_fusion  # the Strategy default: earlier steps unknown


def test_rows_outside_a_history_are_untouched():
    rows = [{"row_id": "1", "notes": "plain run", "url": "u", "table_ref": "t"}]
    assert annotate_histories(rows) == rows
    assert history_settings(rows[0], []) == {}


def test_unfused_router_and_permute_bytes():
    model = load_model("deepseek-v3")
    fused = LayerShape(micro_batch=1, seq_length=4096, ep=32, moe=True)
    unfused = LayerShape(micro_batch=1, seq_length=4096, ep=32, moe=True,
                         moe_permute_fusion=False, moe_router_fusion=False)
    extra = {op.name: op for op in mlp_forward_ops(model, unfused)}
    assert {op.name for op in mlp_forward_ops(model, fused)} | {
        "router_unfused", "moe_permute_unfused"} == set(extra)
    T, E, k, h = 4096, model.num_experts, model.num_experts_per_tok, model.hidden_size
    router = extra["router_unfused"]
    assert router.count == UNFUSED_ROUTER_PASSES
    assert router.bytes_moved * router.count == UNFUSED_ROUTER_PASSES * 2 * 4 * T * E
    permute = extra["moe_permute_unfused"]
    assert permute.count == UNFUSED_PERMUTE_PASSES
    assert permute.bytes_moved * permute.count == pytest.approx(
        2 * 2 * T * k * h + T * E + 8 * T * k)


def test_cli_unfused_permute_is_slower():
    base = ["train", "--model", "deepseek-v3", "--system", "gb200-nvl72", "--gpus", "256",
            "--pp", "8", "--ep", "32", "--use-distributed-optimizer", "--gbs", "2048",
            "--recompute", "full", "--json"]
    steps = {}
    for flag in ("--moe-permute-fusion", "--no-moe-permute-fusion"):
        result = CliRunner().invoke(app, [*base, flag])
        assert result.exit_code == 0, result.output
        steps[flag] = json.loads(result.stdout)["step_time_s"]
    assert steps["--no-moe-permute-fusion"] > steps["--moe-permute-fusion"]
