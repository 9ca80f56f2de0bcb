"""ZeRO-3 as DeepSpeed runs it (issue 21, SC21 Table 2 rows): gathers per micro-batch, the
prefetch-bucket limit, the deepspeed profile values, and how a "Megatron-LM + DeepSpeed" row
picks them up. FSDP (no limits) must keep two gathers per layer and full prefetch."""

from __future__ import annotations

import pytest

from perfcast.catalog.framework_defaults import RunFacts, apply_framework_profile
from perfcast.catalog.frameworks import load_framework_profile
from perfcast.estimate.training import estimate_training
from perfcast.schedule.data_parallel import (
    prefetch_hideable_fraction,
    zero3_gathers_per_micro_batch,
)
from perfcast.specs.strategy import Strategy
from perfcast.validate.row_framework import added_frameworks, framework_fields
from perfcast.validate.training_rows import parse_rows, read_rows

from conftest import shared_path

GPT3_LAYER_PARAMS = 12 * 12288**2
"""Parameters of one GPT-3 175B layer (h = 12288): 1.81e9, above DeepSpeed's 1e9 live limit."""
FACTS = RunFacts(tp=1, ep=1, precision="fp16", generation="ampere", layers_per_stage=96)


def _zero3(**update) -> Strategy:
    return Strategy(num_gpus=384, fsdp=True, recompute="full", **update)


def test_deepspeed_regathers_a_recomputed_layer_over_its_live_limit():
    deepspeed = _zero3(zero3_max_live_params=1e9, zero3_prefetch_params=5e7)
    assert zero3_gathers_per_micro_batch(deepspeed, 96, GPT3_LAYER_PARAMS) == 3 * 96
    # A layer that fits under stage3_max_live_parameters stays gathered for its backward.
    assert zero3_gathers_per_micro_batch(deepspeed, 96, 5e8) == 2 * 96
    # Only the recomputed layers take the third gather.
    partial = _zero3(zero3_max_live_params=1e9, recompute_num_layers=10)
    assert zero3_gathers_per_micro_batch(partial, 96, GPT3_LAYER_PARAMS) == 2 * 96 + 10
    no_recompute = Strategy(num_gpus=384, fsdp=True, zero3_max_live_params=1e9)
    assert zero3_gathers_per_micro_batch(no_recompute, 96, GPT3_LAYER_PARAMS) == 2 * 96


def test_fsdp_gathers_twice_and_prefetches_the_whole_layer():
    fsdp = _zero3()
    assert zero3_gathers_per_micro_batch(fsdp, 96, GPT3_LAYER_PARAMS) == 2 * 96
    assert prefetch_hideable_fraction(fsdp, GPT3_LAYER_PARAMS) == 1.0


def test_prefetch_bucket_limits_the_hideable_share():
    deepspeed = _zero3(zero3_prefetch_params=5e7)
    assert prefetch_hideable_fraction(deepspeed, GPT3_LAYER_PARAMS) == pytest.approx(
        5e7 / GPT3_LAYER_PARAMS)
    assert prefetch_hideable_fraction(deepspeed, 1e7) == 1.0


def test_deepspeed_profile_values_and_sources():
    applied = apply_framework_profile(load_framework_profile("deepspeed"), {"fsdp": True}, FACTS)
    assert applied.fields["zero3_prefetch_params"] == 5e7
    assert applied.fields["zero3_max_live_params"] == 1e9
    sources = {a.setting: a.source for a in applied.assumptions}
    assert "stage3_prefetch_bucket_size" in sources["zero3_prefetch_params"]
    assert "stage3_max_live_parameters" in sources["zero3_max_live_params"]


@pytest.mark.parametrize("name", ["pytorch-fsdp", "torchtitan", "llm-foundry", "megatron-core"])
def test_other_profiles_set_no_zero3_limits(name):
    fields = apply_framework_profile(load_framework_profile(name), {}, FACTS).fields
    assert "zero3_prefetch_params" not in fields
    assert "zero3_max_live_params" not in fields


def test_explicit_zero3_settings_win():
    applied = apply_framework_profile(load_framework_profile("deepspeed"),
                                      {"zero3_prefetch_params": 1e9}, FACTS)
    assert "zero3_prefetch_params" not in applied.fields


def test_megatron_plus_deepspeed_row_takes_both_profiles():
    row = {"framework": "Megatron-LM + DeepSpeed ZeRO-3", "version_or_date": "2021"}
    assert [f.profile.name for f in added_frameworks(row)] == ["deepspeed"]
    notes: list[str] = []
    fields = framework_fields(row, {"fsdp": True}, FACTS, notes)
    assert fields["recompute"] == "full"  # Megatron-LM's, not DeepSpeed's "none"
    assert fields["flash_attention"] is False
    assert fields["zero3_prefetch_params"] == 5e7
    assert fields["zero3_max_live_params"] == 1e9
    assert any("deepspeed" in note and "prefetch" in note for note in notes)


@pytest.mark.parametrize("text", ["metaseq (FSDP + Megatron-LM tensor parallelism)",
                                  "torchtitan + torch.compile (async TP)", "JAX + T5X (Pathways)"])
def test_plus_inside_parentheses_or_unknown_adds_no_profile(text):
    assert added_frameworks({"framework": text, "version_or_date": ""}) == []


def test_sc21_zero3_row_exposes_three_gathers_of_comm():
    """GPT-3 175B ZeRO-3 on 384 A100s (training.csv row 11): the DeepSpeed behaviour adds
    exposed DP time over the same run with FSDP's prefetch and gather count."""
    rows = [r for r in read_rows(shared_path("ground_truth", "training.csv"))
            if r["row_id"] == "11"]
    (parsed,), _ = parse_rows(rows)
    assert parsed.strategy.zero3_max_live_params == 1e9
    assert parsed.strategy.zero3_prefetch_params == 5e7
    fsdp_like = parsed.strategy.model_copy(
        update={"zero3_max_live_params": None, "zero3_prefetch_params": None})
    deepspeed = estimate_training(parsed.model, parsed.system, parsed.strategy, parsed.workload)
    fsdp = estimate_training(parsed.model, parsed.system, fsdp_like, parsed.workload)
    assert deepspeed.breakdown.dp_comm_s > 1.3 * fsdp.breakdown.dp_comm_s
    assert deepspeed.step_time_s > fsdp.step_time_s
