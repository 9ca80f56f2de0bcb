"""Published rows read as their authors meant them: negated sharding, system names, custom
models from row columns, KV heads that follow a row's head count, Megatron's FLOP convention."""

from __future__ import annotations

import pytest

from perfcast.catalog.models import load_model
from perfcast.validate.catalog_lookup import CatalogLookup, default_catalog
from perfcast.validate.flop_conventions import (
    convention_for,
    flops_per_token,
    megatron_flops_per_token,
)
from perfcast.validate.training_rows import ParsedRow, SkippedRow, parse_row, read_rows

from conftest import shared_path

MEGATRON_TEXT = ("Megatron-LM num_floating_point_operations (training.py): causal attention, "
                 "MoE top-k experts (+shared), no recompute")


def _rows() -> dict[str, dict[str, str | None]]:
    return {r["row_id"]: r for r in read_rows(shared_path("ground_truth", "training.csv"))}


def _parsed(row_id: str) -> ParsedRow:
    result = parse_row(_rows()[row_id])
    assert isinstance(result, ParsedRow), getattr(result, "reason", result)
    return result


def _lookup(models: dict) -> CatalogLookup:
    return CatalogLookup(model=models.get, system=default_catalog().system)


def test_ddp_with_fsdp_zero_is_not_fsdp():
    row = _parsed("555")  # NeMo 25.07 GB200 LLAMA3-8B, dp_sharding "DDP (FSDP=0)"
    assert not row.strategy.fsdp and row.strategy.sharding_stage < 3
    assert row.strategy.distributed_optimizer  # Megatron-Core DDP = distributed optimizer


def test_fsdp_flag_one_is_fsdp():
    row = _parsed("556")  # NeMo 25.07 GB200 LLAMA3-70B, dp_sharding "FSDP (FSDP=1)"
    assert row.strategy.fsdp


def test_gb300_system_from_parenthesised_name():
    row = _parsed("575")  # Qwen3-235B on "GB300 (NVL72)"
    assert (row.system.name, row.system.gpu.name) == ("gb300-nvl72", "b300")


def test_megatron_convention_from_tflops_definition_text():
    assert convention_for("any_source", MEGATRON_TEXT) == "megatron_causal"
    assert convention_for("any_source", "Megatron-LM num_floating_point_operations: causal "
                          "attention (half of S^2), MLA + MoE + MTP layer") == "megatron_causal_mtp"
    assert convention_for("any_source", "NeMo 2.0 flops_formulas: attention counted "
                          "non-causally") == "six_n_full_attention"
    row = _parsed("573")
    assert row.measured_from == "tflops_per_gpu (megatron_causal)"
    assert _parsed("554").measured_from == "tflops_per_gpu (megatron_causal_mtp)"


def test_megatron_flops_dense_gqa_matches_training_py():
    """Llama 3 8B, s 8192, in the form of Megatron-LM ``transformer_flops``:
    12·L·h·(1.5·f) + 12·L·h²·((1 + g/a + s/(2h))·q/h) + 6·h·V per token."""
    m = load_model("llama-3-8b")
    L, h, f, a, g, V, s = 32, 4096, 14336, 32, 8, 128256, 8192
    expected = 12 * L * h * (1.5 * f) + 12 * L * h * h * ((1 + g / a + s / h / 2) * 4096 / h) \
        + 6 * h * V
    assert megatron_flops_per_token(m, s) == pytest.approx(expected, rel=1e-12)


def test_megatron_flops_moe_mla_mtp_by_hand():
    """DeepSeek-V3, s 4096, MTP 1: 3 dense + 58 MoE layers (+1 MTP MoE layer), MLA terms."""
    m = load_model("deepseek-v3")
    h, s, a, V = 7168, 4096, 128, 129280
    d_nope, d_rope, d_v, r_q, r_kv = 128, 64, 128, 1536, 512
    mlp = 12 * h * 1.5 * (18432 * 3 + (2048 * 8 + 2048) * (58 + 1))
    attn = 6 * (r_q * (h + a * (d_nope + d_rope) + 1) + r_kv * (h + a * (d_nope + d_v) + 1)
                + h * d_rope + a * d_v * h + s * a * (d_nope + d_rope) / 2 + s * a * d_v / 2)
    expected = mlp + 62 * attn + 6 * (3 * h + 2 * h * h) + 6 * h * V * 2
    assert flops_per_token("megatron_causal_mtp", m, s) == pytest.approx(expected, rel=1e-12)
    assert flops_per_token("megatron_causal", m, s) < expected


def test_causal_convention_counts_less_than_full_attention():
    m = load_model("qwen3-235b-a22b")
    assert flops_per_token("megatron_causal", m, 4096) < flops_per_token(
        "six_n_full_attention", m, 4096)


def test_custom_model_from_row_columns():
    row = _parsed("558")  # "LLAMA4-Scout-LLM (17B-16E, text backbone)": not in the catalog
    assert any(n.startswith("model: from row columns") for n in row.notes)
    assert (row.model.num_hidden_layers, row.model.hidden_size, row.model.num_experts) == (
        48, 5120, 16)


def test_hybrid_linear_attention_model_is_refused_by_name():
    result = parse_row(_rows()["564"])  # Qwen3-Next-80B-A3B (Gated DeltaNet)
    assert isinstance(result, SkippedRow) and "Gated DeltaNet" in result.reason


def test_catalog_model_given_heads_takes_kv_heads():
    gpt = load_model("gpt3-175b")  # multi-head
    lookup = _lookup({"GPT X": gpt})
    row = {**_rows()["1"], "model": "GPT X", "num_heads": "64", "num_kv_heads": "",
           "hidden_size": "12288", "num_layers": "96"}
    result = parse_row(row, lookup)
    assert isinstance(result, ParsedRow), getattr(result, "reason", result)
    assert (result.model.num_attention_heads, result.model.num_kv_heads) == (64, 64)
    row = {**row, "num_kv_heads": "8"}
    result = parse_row(row, lookup)
    assert isinstance(result, ParsedRow) and result.model.num_kv_heads == 8


def test_gqa_catalog_model_with_non_dividing_heads_and_no_kv_is_skipped():
    llama = load_model("llama-3-8b")  # 32 heads, 8 KV heads
    lookup = _lookup({"L": llama})
    row = {**_rows()["518"], "model": "L", "num_heads": "36", "num_kv_heads": ""}
    result = parse_row(row, lookup)
    assert isinstance(result, SkippedRow) and "num_kv_heads is not stated" in result.reason
