"""Ground-truth training rows parse into typed inputs; FLOP conventions; error statistics.

Row-level checks use small stand-in systems and the family defaults of ``row_model`` (no
catalog); the whole-file check uses the shipped catalog and ../shared/ground_truth/training.csv.
"""

from __future__ import annotations

import csv
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest

from perfcast.specs import GPUSpec, SystemSpec
from perfcast.validate.catalog_lookup import CatalogLookup
from perfcast.validate.compare import validate_training
from perfcast.validate.csv_fields import cell_fraction
from perfcast.validate.error_stats import error_stats, summarize
from perfcast.validate.flop_conventions import (
    convention_for,
    flops_per_token,
    narayanan_flops_per_token,
    tflops_from_mfu,
    tokens_per_s_from_tflops,
)
from perfcast.validate.training_rows import ParsedRow, SkippedRow, parse_row, read_rows

from conftest import shared_path

STAND_IN_GPU = GPUSpec(
    name="stand-in-gpu", display_name="stand-in", vendor="nvidia", generation="hopper",
    peak_bf16_flops=989e12, peak_fp8_flops=1979e12, hbm_capacity_bytes=80e9,
    hbm_bandwidth_Bps=3.35e12, source="test",
)
STAND_IN_SYSTEM = SystemSpec(
    name="stand-in-node", gpu=STAND_IN_GPU, gpus_per_node=8, scale_up_domain_gpus=8,
    scale_up_bandwidth_Bps=450e9, scale_out_bandwidth_Bps=50e9, source="test",
)
NO_CATALOG = CatalogLookup(model=lambda name: None, system=lambda gpu_type: STAND_IN_SYSTEM)


def _reason_kind(reason: str) -> str:
    """A skip reason with values blanked, for counting reasons by kind."""
    return re.sub(r"\d+", "N", re.sub(r"'[^']*'", "'…'", reason))


def _training_rows() -> dict[str, dict[str, str | None]]:
    path = shared_path("ground_truth", "training.csv")
    return {row["row_id"]: row for row in read_rows(path)}


def _parsed(row_id: str) -> ParsedRow:
    result = parse_row(_training_rows()[row_id], NO_CATALOG)
    assert isinstance(result, ParsedRow), getattr(result, "reason", result)
    return result


# ----- whole file ------------------------------------------------------------------------------

REMAINING_SKIP_REASONS = Counter({
    # missing information: the row gives no architecture and the catalog has none
    "model '…' is not in the catalog and the row lacks num_layers, hidden_size, num_heads": 8,
    # quality-C internal inconsistency: NeMo B200 long-sequence table (README caveat)
    "tp*pp*cp*dp = N*N*N*N = N != num_gpus=N": 8,
    # missing information: TP/PP split not stated (Narayanan Table 2 weak scaling, OPT)
    "tp*pp*cp*dp = N*N*N*N = N != num_gpus=N (tp/pp not stated, taken as N)": 6,
    "global_batch_size=N: not divisible by micro_batch_size*dp=N (micro_batch_size=N, dp=N) "
    "(tp/pp not stated, taken as N)": 1,
    # missing information: no global batch
    "no global batch: global_batch_seqs, global_batch_tokens and micro_batch*dp*grad_accum are "
    "all missing": 5,
    "seq_len is empty": 2,
    # missing information: a power-capped GPU whose cap is not stated (torchao B200 rows)
    "gpu_type='…': states a power limit without its value: the sustained clock cannot be "
    "forecast": 5,
    # quality C: a batch ramp, not one value (DeepSeek-V3 campaign average)
    "global_batch_seqs='…': not a count": 1,
    # no operator model for hybrid linear-attention layers (Qwen3-Next)
    "model '…': arch_type names '…' layers, which have no operator model (only attention + "
    "MLP/MoE decoder layers are modelled)": 1,
})
"""Every skip reason left in training.csv, by kind, with its count."""


def test_every_row_parses_or_skips_with_a_reason():
    pytest.importorskip("perfcast.catalog.models")
    pytest.importorskip("perfcast.catalog.systems")
    rows = list(_training_rows().values())
    results = [parse_row(row) for row in rows]
    assert all(isinstance(r, ParsedRow | SkippedRow) for r in results)
    skipped = [r for r in results if isinstance(r, SkippedRow)]
    assert all(s.reason for s in skipped)
    graded = [r for r, row in zip(results, rows, strict=True) if row["quality"] in ("A", "B")]
    parsed_ab = sum(isinstance(r, ParsedRow) for r in graded)
    reasons = Counter(_reason_kind(s.reason) for s in skipped)
    print(f"\nparsed {len(results) - len(skipped)} / {len(results)}; quality A/B parsed "
          f"{parsed_ab} / {len(graded)}")
    for reason, count in reasons.most_common():
        print(f"  {count:3d}  {reason}")
    assert (len(results), len(graded)) == (416, 387)
    assert len(results) - len(skipped) == 379
    assert parsed_ab == 374
    assert reasons == REMAINING_SKIP_REASONS


def test_nemo_b200_long_sequence_rows_are_skipped_as_inconsistent():
    rows = _training_rows()
    for row_id in ("352", "355", "359"):
        result = parse_row(rows[row_id], NO_CATALOG)
        assert isinstance(result, SkippedRow)
        assert "!= num_gpus" in result.reason


# ----- specific rows ---------------------------------------------------------------------------

def test_megatron_sc21_row_interleaved_pipeline_from_tflops():
    row = _parsed("6")  # GPT 76.1B on 1024 A100s, Narayanan 2021 Table 1
    s = row.strategy
    assert (s.num_gpus, s.tp, s.pp, s.vpp, s.cp, s.dp) == (1024, 8, 4, 3, 1, 32)
    assert (s.micro_batch_size, s.recompute, s.precision) == (2, "full", "fp16")
    assert not s.sequence_parallel and not s.flash_attention and s.sharding_stage == 0
    assert (row.workload.seq_length, row.workload.global_batch_size) == (2048, 1792)
    m = row.model
    assert (m.num_hidden_layers, m.hidden_size, m.num_attention_heads) == (60, 10240, 80)
    assert (m.activation, m.position_embedding, m.vocab_size) == ("gelu", "learned", 51200)
    assert row.measured_from == "tflops_per_gpu (narayanan_4pass)"
    # 140 TFLOP/s / (96·60·10240²·(1 + 2048/61440 + 51200/(16·60·10240))) = 223.2 tokens/s
    assert row.measured_tokens_per_s_per_gpu == pytest.approx(223.19, rel=1e-3)


def test_mpt_fsdp_row():
    row = _parsed("124")  # MPT-70b, 512 H100, FSDP FULL_SHARD, full AC, amp_bf16
    s = row.strategy
    assert (s.num_gpus, s.tp, s.pp, s.dp, s.micro_batch_size) == (512, 1, 1, 512, 8)
    assert s.fsdp and s.sharding_stage == 3 and s.recompute == "full"
    assert s.precision == "bf16" and s.grad_reduce_dtype == "fp32" and s.flash_attention
    assert row.workload.global_batch_size == 4096
    m = row.model
    assert (m.position_embedding, m.activation, m.attention_bias, m.mlp_bias) == (
        "alibi", "gelu", False, False)
    assert (m.vocab_size, m.intermediate_size, m.tie_word_embeddings) == (50368, 32768, True)
    assert row.measured_tokens_per_s_per_gpu == 1007 and row.measured_from == (
        "tokens_per_s_per_gpu")


def test_mpt_shard_grad_op_and_pure_bf16_rows():
    assert _parsed("136").strategy.zero_stage == 2  # PyTorch FSDP SHARD_GRAD_OP
    pure = _parsed("263").strategy  # A100 40GB, "bf16 (MP mode PURE)"
    assert pure.fsdp and pure.grad_reduce_dtype == "bf16"
    assert _parsed("517").strategy.grad_reduce_dtype == "fp32"  # NeMo AutoModel: FSDP2 default


def test_nemo_h100_fp8_row_with_tp_pp_vpp_cp():
    row = _parsed("351")  # LLAMA3-70B, NeMo 24.07, 64 H100, FP8
    s = row.strategy
    assert (s.tp, s.pp, s.vpp, s.cp, s.dp) == (4, 4, 5, 2, 2)
    assert s.sequence_parallel and s.distributed_optimizer and s.schedule == "interleaved"
    assert (s.precision, s.fp8_recipe, s.micro_batch_size) == ("fp8", "delayed", 1)
    assert s.fp8_weight_cache  # Megatron-Core: FP8 weights cast once per step
    assert s.grad_reduce_dtype == "bf16"  # NeMo performance recipes: grad_reduce_in_fp32=False
    assert row.model.num_key_value_heads == 8 and row.model.activation == "swiglu"
    assert row.measured_tokens_per_s_per_gpu == 1524


def test_torchtitan_2d_float8_row():
    row = _parsed("91")  # Llama 3.1 70B, 256 H100 (500 W), FSDP2 + TP 8, float8 tensorwise
    s = row.strategy
    assert (s.tp, s.dp, s.micro_batch_size) == (8, 32, 16)
    assert s.fsdp and s.sequence_parallel and s.recompute == "full"
    assert (s.precision, s.fp8_recipe) == ("fp8", "tensorwise")
    assert not s.fp8_weight_cache  # torchao casts weights in every forward
    assert row.measured_tokens_per_s_per_gpu == 829


def test_torchtitan_selective_layer_ac_is_every_second_layer():
    s = _parsed("113").strategy  # Llama 3 8B, 32 layers, "selective layer" AC
    assert (s.recompute, s.recompute_num_layers) == ("full", 16)
    assert _parsed("114").strategy.recompute == "selective"  # "selective op"


def test_gpus_per_node_column_overrides_catalog_system():
    row = dict(_training_rows()["6"], gpus_per_node="4")
    result = parse_row(row, NO_CATALOG)
    assert isinstance(result, ParsedRow)
    assert result.system.gpus_per_node == 4 and result.system.num_gpus == 1024


# ----- FLOP conventions ------------------------------------------------------------------------

def test_conventions_picked_from_tflops_definition_text():
    rows = _training_rows()
    expect = {"1": "narayanan_4pass", "11": "narayanan_4pass", "35": "narayanan_3pass",
              "124": "six_n_full_attention", "113": "six_n_full_attention",
              "344": "six_n_full_attention", "494": "six_n_full_attention"}
    for row_id, convention in expect.items():
        row = rows[row_id]
        assert convention_for(row["source_id"], row["tflops_definition"]) == convention


def test_nemo_tflops_convert_to_published_tokens_per_s():
    row = _parsed("344")  # LLAMA2-7B: 16934 tokens/s/GPU and 780 TFLOP/s/GPU published
    per_token = flops_per_token("six_n_full_attention", row.model, row.workload.seq_length)
    assert tokens_per_s_from_tflops(780, per_token) == pytest.approx(16934, rel=0.02)


def test_korthikanti_mfu_converts_to_derived_tokens_per_s():
    raw = _training_rows()["35"]  # GPT 22B, SP + selective: MFU 41.5%, 930.9 tokens/s/GPU
    row = _parsed("35")
    tflops = tflops_from_mfu(cell_fraction(raw, "mfu"), 312.0)
    per_token = flops_per_token("narayanan_3pass", row.model, row.workload.seq_length)
    assert tokens_per_s_from_tflops(tflops, per_token) == pytest.approx(930.9, rel=0.02)


def test_narayanan_formula_numbers():
    # 1.7B: l=24, h=2304, s=2048, V=51200 -> 96·24·2304²·(1 + 2048/13824 + 51200/884736)
    expected = 96 * 24 * 2304**2 * (1 + 2048 / 13824 + 51200 / 884736)
    assert narayanan_flops_per_token(24, 2304, 2048, 51200) == pytest.approx(expected, rel=1e-12)
    assert narayanan_flops_per_token(24, 2304, 2048, 51200, passes=3) == pytest.approx(
        expected * 0.75, rel=1e-12)


# ----- error statistics ------------------------------------------------------------------------

@dataclass(frozen=True)
class _Toy:
    row_id: str
    source_id: str
    error: float


def test_summary_on_toy_list_is_exact():
    toy = [_Toy("1", "a", 0.05), _Toy("2", "a", -0.10), _Toy("3", "b", 0.30),
           _Toy("4", "b", -0.15), _Toy("5", "b", 0.0)]
    stats = error_stats(toy)
    assert stats.count == 5
    assert stats.mape == pytest.approx(0.12, abs=1e-15)
    assert stats.median_abs_error == pytest.approx(0.10, abs=1e-15)
    assert (stats.within_10pct, stats.within_20pct) == (0.6, 0.8)
    assert [rid for rid, _ in stats.worst] == ["3", "4", "2", "1", "5"]
    summary = summarize(toy)
    assert [s for s, _ in summary.by_source] == ["a", "b"]
    a, b = summary.source("a"), summary.source("b")
    assert (a.count, a.mape, a.median_abs_error) == (2, pytest.approx(0.075), pytest.approx(0.075))
    assert (b.count, b.within_20pct, b.worst[0]) == (3, pytest.approx(2 / 3), ("3", 0.30))
    assert error_stats([]).count == 0


# ----- garbage input ---------------------------------------------------------------------------

GARBAGE = [
    {"row_id": "g1", "model": "MPT-1b", "num_gpus": "eight", "seq_len": "2048"},
    {"row_id": "g2", "model": "MPT-1b", "num_gpus": "8", "seq_len": "2048", "tp": "abc"},
    {"row_id": "g3", "model": "MPT-1b", "num_gpus": "8", "seq_len": "-5"},
    {"row_id": "g4", "model": "", "num_gpus": "8", "seq_len": "2048"},
    {"row_id": "g5", "model": "Mystery 9B", "num_gpus": "8", "seq_len": "2048", "dp": "8",
     "gpu_type": "A100 80GB", "global_batch_seqs": "64"},
    {"row_id": "g6", "model": "MPT-1b", "num_layers": "24", "hidden_size": "2048",
     "num_heads": "16", "num_gpus": "8", "seq_len": "2048", "global_batch_seqs": "64",
     "gpu_type": "A100 80GB", "precision": "int3", "tokens_per_s_per_gpu": "100"},
    {"row_id": "g7", "model": "MPT-1b", "num_layers": "24", "hidden_size": "2048",
     "num_heads": "16", "num_gpus": "8", "seq_len": "2048", "global_batch_seqs": "64",
     "gpu_type": "A100 80GB", "tokens_per_s_per_gpu": "fast"},
    {"row_id": "g8", "model": "MPT-1b", "num_layers": "24", "hidden_size": "2048",
     "num_heads": "16", "num_gpus": "8", "seq_len": "2048", "global_batch_seqs": "64",
     "gpu_type": "A100 80GB"},
    {"row_id": "g9", "model": "MPT-1b", "num_layers": "24", "hidden_size": "2000",
     "num_heads": "16", "num_gpus": "8", "seq_len": "2048", "global_batch_seqs": "64",
     "gpu_type": "A100 80GB", "tp": "3", "tokens_per_s_per_gpu": "100"},
]


def _write_csv(path: Path, rows: list[dict[str, str]]) -> Path:
    columns = sorted({key for row in rows for key in row})
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
    return path


def test_garbage_rows_are_skipped_not_raised(tmp_path):
    path = _write_csv(tmp_path / "garbage.csv", GARBAGE)
    results = [parse_row(row, NO_CATALOG) for row in read_rows(path)]
    assert all(isinstance(r, SkippedRow) for r in results), results
    reasons = {r.row_id: r.reason for r in results}
    assert "num_gpus='eight'" in reasons["g1"] and "tp='abc'" in reasons["g2"]
    assert "seq_len" in reasons["g3"] and "model is empty" in reasons["g4"]
    assert "Mystery 9B" in reasons["g5"] and "precision='int3'" in reasons["g6"]
    assert "tokens_per_s_per_gpu='fast'" in reasons["g7"]
    assert reasons["g8"] == "no throughput measurement"
    assert "tp" in reasons["g9"]
    assert parse_row({"row_id": None}, NO_CATALOG).reason  # type: ignore[arg-type]
    report = validate_training(path, estimator=lambda *a: None, catalog=NO_CATALOG)
    assert report.rows == () and len(report.skipped) == len(GARBAGE)
