"""ZeRO-3 collectives as DeepSpeed <= 0.5 issues them (issue 21, SC21 Table 2 rows 11-16): one
all-gather / reduce-scatter per weight matrix, and 2 host tensor operations per data-parallel
rank per collective (tensor-list all_gather / reduce_scatter up to DeepSpeed 0.5.4), charged in
series. Identities on counts and seconds, their scaling with DP and with micro-batches, the
profile's version ranges, and the SC21 rows' DP scaling."""

from __future__ import annotations

import random

import pytest

from perfcast.calibration.host_launch import load_host_launch
from perfcast.catalog.framework_defaults import RunFacts, apply_framework_profile
from perfcast.catalog.frameworks import framework_of_text, load_framework_profile
from perfcast.catalog.models import load_model
from perfcast.catalog.systems import load_system
from perfcast.estimate.training import estimate_training
from perfcast.graph.ops import Collective, CommOp, Group, Phase
from perfcast.graph.param_sharding import stage_params
from perfcast.graph.weight_tensors import (
    dense_layer_weight_matrices,
    moe_layer_weight_matrices,
)
from perfcast.memory.states import grad_bytes_per_param
from perfcast.schedule.data_parallel import (
    data_parallel_time,
    zero3_collectives_per_layer,
    zero3_gathers_per_micro_batch,
    zero3_host_s_per_collective,
)
from perfcast.schedule.op_time import comm_op_time_s
from perfcast.schedule.stage_time import StageTime
from perfcast.search.bulk import BulkEvaluator
from perfcast.search.enumerate import enumerate_strategies
from perfcast.search.framework_rules import LayoutRules, framework_options
from perfcast.search.space import SearchConstraints
from perfcast.specs.strategy import Strategy
from perfcast.specs.workload import Workload
from perfcast.validate.row_framework import framework_fields
from perfcast.validate.training_rows import parse_rows, read_rows

from conftest import megatron_gpt, shared_path

GPT3 = megatron_gpt("gpt3-175b", 96, 12288, 96)
FACTS = RunFacts(tp=1, ep=1, precision="fp16", generation="ampere", layers_per_stage=96)
HOST_S_PER_OP = load_host_launch().host_s_per_op.value


def _deepspeed_2021(num_gpus: int, **update) -> Strategy:
    """ZeRO-3 with the DeepSpeed 0.3.13 behaviours, full recompute (SC21 §5.3.2)."""
    fields = {"zero3_max_live_params": 1e9, "zero3_prefetch_params": 5e7,
              "zero3_per_tensor_collectives": True, "zero3_host_ops_per_rank": 2.0}
    return Strategy(num_gpus=num_gpus, fsdp=True, recompute="full", **(fields | update))


def test_weight_matrices_per_layer():
    # Megatron-LM layout: fused QKV, output projection, h->4h, 4h->h.
    assert dense_layer_weight_matrices(GPT3) == 4
    moe = load_model("deepseek-v3")
    # MLA with a q LoRA: q_down, q_up, kv_down, kv_up, out = 5; router 1; 2 per local expert;
    # 2 for the shared experts.
    assert moe_layer_weight_matrices(moe, 8) == 5 + 1 + 2 * 8 + 2
    params = stage_params(GPT3, Strategy(num_gpus=8, fsdp=True), 0)
    assert params.weight_tensors_per_layer == 4


def test_collectives_per_layer_follow_the_framework():
    params = stage_params(GPT3, Strategy(num_gpus=384, fsdp=True), 0)
    assert zero3_collectives_per_layer(_deepspeed_2021(384), params) == 4
    assert zero3_collectives_per_layer(Strategy(num_gpus=384, fsdp=True), params) == 1


def test_host_seconds_per_collective_are_two_ops_per_rank_and_scale_with_dp():
    for gpus in (384, 768, 1536):
        assert zero3_host_s_per_collective(_deepspeed_2021(gpus), HOST_S_PER_OP) == (
            pytest.approx(2 * gpus * HOST_S_PER_OP))
    # cp ranks are data-parallel ranks of the ZeRO-3 group too (Group.DP_CP).
    assert zero3_host_s_per_collective(_deepspeed_2021(768, cp=2), HOST_S_PER_OP) == (
        pytest.approx(2 * 768 * HOST_S_PER_OP))
    assert zero3_host_s_per_collective(Strategy(num_gpus=768, fsdp=True), HOST_S_PER_OP) == 0


def _dp_time(strategy: Strategy, system):
    params = stage_params(GPT3, strategy, 0)
    times = StageTime(gemm_s=0.0, attention_s=0.0, memory_bound_s=0.0, recompute_s=0.05 * 96,
                      tp_comm_s=0.0, cp_comm_s=0.0, ep_comm_s=0.0, layer_forward_s=0.05,
                      layer_backward_s=0.1, backward_compute_s=0.1 * 96, forward_s=0.05 * 96,
                      wgrad_s=0.0)
    return data_parallel_time(params, times, system, strategy), params


def test_host_time_per_micro_batch_identity(a100_system):
    """Host seconds = (gathers + reduce-scatters per micro-batch) × collectives per layer ×
    2·p·host_s_per_op: 3 gathers (forward, recompute forward, backward: 1.81e9-parameter layers
    exceed the 1e9 live limit) and 1 reduce-scatter per layer, 4 weight matrices, p = 384."""
    with_host, params = _dp_time(_deepspeed_2021(384), a100_system)
    without, _ = _dp_time(_deepspeed_2021(384, zero3_host_ops_per_rank=0.0), a100_system)
    gathers = zero3_gathers_per_micro_batch(_deepspeed_2021(384), 96, params.dense / 96)
    assert gathers == 3 * 96
    host_s = (gathers + 96) * 4 * 2 * 384 * HOST_S_PER_OP
    assert with_host.total_s - without.total_s == pytest.approx(host_s)
    assert with_host.exposed_per_micro_batch_s - without.exposed_per_micro_batch_s == (
        pytest.approx(host_s))
    # Doubling the DP group doubles the host seconds (α·p per collective).
    wide, _ = _dp_time(_deepspeed_2021(768), a100_system)
    wide_flat, _ = _dp_time(_deepspeed_2021(768, zero3_host_ops_per_rank=0.0), a100_system)
    assert wide.total_s - wide_flat.total_s == pytest.approx(2 * host_s)


def test_per_tensor_collectives_move_the_same_bytes_with_more_latency(a100_system):
    """Splitting a layer's gather into its 4 weight matrices keeps the bytes (same bandwidth
    seconds) and adds 3 collectives' latency: slower, by less than 4× the per-layer time."""
    per_tensor, _ = _dp_time(_deepspeed_2021(384, zero3_host_ops_per_rank=0.0), a100_system)
    per_layer, _ = _dp_time(_deepspeed_2021(384, zero3_host_ops_per_rank=0.0,
                                            zero3_per_tensor_collectives=False), a100_system)
    assert per_layer.total_s < per_tensor.total_s < 1.5 * per_layer.total_s


def test_dense_model_pays_no_expert_collective(a100_system):
    """FSDP on a dense model: the DP time per micro-batch is exactly 2 gathers of each layer's
    16-bit weights and 1 reduce-scatter of its gradients, over dp ranks; the expert-DP group
    moves 0 bytes and costs 0 (it used to add a collective's latency per layer and pass)."""
    fsdp = Strategy(num_gpus=384, fsdp=True)
    result, params = _dp_time(fsdp, a100_system)
    assert params.expert == 0
    layer = params.dense / 96
    gather = comm_op_time_s(CommOp("g", Phase.BACKWARD_WGRAD, Group.DP_CP,
                                   Collective.ALL_GATHER, 2 * layer), a100_system, fsdp)
    scatter = comm_op_time_s(CommOp("s", Phase.BACKWARD_WGRAD, Group.DP_CP,
                                    Collective.REDUCE_SCATTER,
                                    grad_bytes_per_param(fsdp) * layer), a100_system, fsdp)
    assert result.total_s == pytest.approx(2 * 96 * gather + 96 * scatter, rel=1e-12)


def test_host_time_scales_with_micro_batches(a100_system):
    """ZeRO-3 gathers every micro-batch: at a fixed DP group, 4 micro-batches per step pay 4×
    the per-micro-batch host seconds (the host part is in series, so the identity is exact)."""
    model, workload = GPT3, Workload(seq_length=2048, global_batch_size=1536)
    strategy = _deepspeed_2021(384, micro_batch_size=1)  # 1536 / (384·1) = 4 micro-batches
    flat = strategy.model_copy(update={"zero3_host_ops_per_rank": 0.0})
    step = estimate_training(model, a100_system, strategy, workload)
    step_flat = estimate_training(model, a100_system, flat, workload)
    gathers_and_scatters = 3 * 96 + 96
    host_per_mb = gathers_and_scatters * 4 * 2 * 384 * HOST_S_PER_OP
    assert step.breakdown.dp_comm_s - step_flat.breakdown.dp_comm_s == pytest.approx(
        4 * host_per_mb, rel=1e-9)


@pytest.mark.parametrize(("spec", "per_tensor", "ops"), [
    ("deepspeed@0.3.13", True, 2.0),
    ("deepspeed@0.5.4", True, 2.0),
    ("deepspeed@0.5.10", True, 0.0),
    ("deepspeed@0.6.0", False, 0.0),
    ("deepspeed@2021-04", True, 2.0),
    ("deepspeed@2022-01", True, 0.0),
    ("deepspeed", False, 0.0),
])
def test_deepspeed_profile_versions(spec, per_tensor, ops):
    fields = apply_framework_profile(load_framework_profile(spec), {"fsdp": True}, FACTS).fields
    assert fields["zero3_per_tensor_collectives"] is per_tensor
    assert fields["zero3_host_ops_per_rank"] == ops


@pytest.mark.parametrize("name", ["pytorch-fsdp", "torchtitan", "llm-foundry", "megatron-core"])
def test_fsdp_profiles_keep_flat_collectives(name):
    fields = apply_framework_profile(load_framework_profile(name), {"fsdp": True}, FACTS).fields
    assert "zero3_per_tensor_collectives" not in fields
    assert "zero3_host_ops_per_rank" not in fields


def test_a_bare_year_selects_dated_defaults():
    resolved = framework_of_text("DeepSpeed", "2021")
    assert resolved is not None and resolved.version.parts == {"date": (2021,)}
    row = {"framework": "Megatron-LM + DeepSpeed ZeRO-3", "version_or_date": "2021"}
    notes: list[str] = []
    fields = framework_fields(row, {"fsdp": True}, FACTS, notes)
    assert fields["zero3_per_tensor_collectives"] is True
    assert fields["zero3_host_ops_per_rank"] == 2.0
    assert any("walks the data-parallel ranks" in note for note in notes)


def test_sc21_zero3_rows_lose_throughput_with_dp_as_measured():
    """SC21 Table 2 keeps the global batch while DP doubles: measured tokens/s/GPU falls
    100.4 -> 61.4 -> 30.7 (175B, DP 384/768/1536) and 32.1 -> 22.8 -> 11.2 (530B, DP
    640/1120/2240). The forecast must fall at each step and its end-to-end ratio be within
    20% of the measured one (flat-buffer collectives gave 0.64 and 0.65 where 0.31 and 0.35
    were measured)."""
    rows = [r for r in read_rows(shared_path("ground_truth", "training.csv"))
            if r["row_id"] in {"11", "12", "13", "14", "15", "16"}]
    parsed, skipped = parse_rows(rows)
    assert not skipped and len(parsed) == 6
    by_id = {p.row_id: p for p in parsed}
    for ids in (("11", "12", "13"), ("14", "15", "16")):
        forecast = [estimate_training(by_id[i].model, by_id[i].system, by_id[i].strategy,
                                      by_id[i].workload).tokens_per_s_per_gpu for i in ids]
        measured = [by_id[i].measured_tokens_per_s_per_gpu for i in ids]
        assert forecast[0] > forecast[1] > forecast[2]
        ratio, measured_ratio = forecast[2] / forecast[0], measured[2] / measured[0]
        assert ratio == pytest.approx(measured_ratio, rel=0.2), (ids, ratio, measured_ratio)


def test_search_bulk_path_charges_the_same_zero3_collectives():
    """The bulk search evaluates DeepSpeed 0.3.13's ZeRO-3 exactly as estimate_training does
    (framework options carry the per-tensor and host-op settings; StageParams carries the
    weight matrices)."""
    framework = load_framework_profile("deepspeed@0.3.13")
    options = framework_options(framework, "ampere")
    assert options.zero3_per_tensor_collectives and options.zero3_host_ops_per_rank == 2.0
    model, system = load_model("llama-3-8b"), load_system("dgx-a100-80gb", num_gpus=64)
    workload = Workload(seq_length=4096, global_batch_size=128)
    constraints = SearchConstraints(sharding=("fsdp",), recompute=("full",), max_vpp=1,
                                    max_micro_batch_size=2, max_cp=1, fp8=False)
    space = enumerate_strategies(model, system, 64, workload, constraints,
                                 LayoutRules.of(framework, "ampere"), options)
    metrics = BulkEvaluator.for_space(model, system, workload, space).evaluate_all(space)
    rng, checked = random.Random(3), 0
    for _ in range(40):
        b = rng.randrange(len(space.blocks))
        i = rng.randrange(len(space.blocks[b]))
        strategy = space.blocks[b].strategy(i)
        if strategy.sharding_stage < 3:
            continue
        checked += 1
        assert strategy.zero3_host_ops_per_rank == 2.0
        report = estimate_training(model, system, strategy, workload)
        assert metrics[b].step_time_s[i] == pytest.approx(report.step_time_s, rel=1e-9)
    assert checked > 0
