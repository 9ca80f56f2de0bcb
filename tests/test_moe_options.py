"""MoE execution options: load imbalance, capacity factor, grouped vs per-expert GEMMs."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfcast import Strategy, Workload, estimate_training, load_model, load_system
from perfcast.graph.layer import LayerShape, layer_ops
from perfcast.graph.ops import CommOp, GemmOp

QWEN = load_model("qwen3-30b-a3b")
SYSTEM = load_system("dgx-h100", num_gpus=8)
WORKLOAD = Workload(seq_length=4096, global_batch_size=64)


def _step(**options) -> float:
    strategy = Strategy(num_gpus=8, ep=8, fsdp=True, micro_batch_size=2, **options)
    return estimate_training(QWEN, SYSTEM, strategy, WORKLOAD).step_time_s


def _expert_gemm(shape: LayerShape) -> GemmOp:
    compute, _ = layer_ops(QWEN, shape)
    return next(op for op in compute if op.name == "expert_in_proj")


def test_tokens_per_expert_hand_count():
    """b·s·k/(E/ep) tokens per local expert, times the imbalance at the busiest rank."""
    shape = LayerShape(micro_batch=2, seq_length=4096, ep=8, moe=True)
    op = _expert_gemm(shape)
    assert op.batch == 128 / 8 and op.m == 2 * 4096 * 8 / 16
    busy = _expert_gemm(LayerShape(micro_batch=2, seq_length=4096, ep=8, moe=True,
                                   moe_load_imbalance=1.5))
    assert busy.m == 1.5 * op.m


def test_capacity_factor_caps_the_busiest_rank():
    shape = LayerShape(micro_batch=2, seq_length=4096, ep=8, moe=True, moe_load_imbalance=2.0,
                       moe_capacity_factor=1.25)
    assert shape.routed_load == 1.25
    _, comm = layer_ops(QWEN, shape)
    balanced = layer_ops(QWEN, LayerShape(micro_batch=2, seq_length=4096, ep=8, moe=True))[1]
    a2a = [op.size_bytes for op in comm if isinstance(op, CommOp) and op.name == "ep_all_to_all"]
    a2a_balanced = [op.size_bytes for op in balanced if op.name == "ep_all_to_all"]
    assert a2a and a2a == [1.25 * b for b in a2a_balanced]


def test_per_expert_gemms_are_separate_kernels():
    op = _expert_gemm(LayerShape(micro_batch=2, seq_length=4096, ep=8, moe=True,
                                 moe_grouped_gemm=False))
    assert (op.batch, op.count) == (1, 16)


def test_per_expert_gemms_never_faster_than_grouped():
    assert _step(moe_grouped_gemm=False) >= _step()


@settings(max_examples=15, deadline=None)
@given(st.floats(1.0, 2.0), st.floats(0.0, 1.0))
def test_more_imbalance_never_faster(base, extra):
    assert _step(moe_load_imbalance=base + extra) >= _step(moe_load_imbalance=base)


def test_imbalance_below_one_is_rejected():
    with pytest.raises(ValueError, match="moe_load_imbalance"):
        Strategy(num_gpus=8, ep=8, moe_load_imbalance=0.9)


def test_mtp_costs_time_and_last_stage_memory_only():
    model = load_model("deepseek-v2-lite")
    system = load_system("dgx-h100", num_gpus=16)
    workload = Workload(seq_length=4096, global_batch_size=64)
    base = Strategy(num_gpus=16, pp=2, ep=8, distributed_optimizer=True)
    with_mtp = base.model_copy(update={"mtp_num_layers": 1})
    a = estimate_training(model, system, base, workload)
    b = estimate_training(model, system, with_mtp, workload)
    assert b.step_time_s > a.step_time_s
    assert b.model_flops_per_token == a.model_flops_per_token
    first_a, last_a = a.memory.stages
    first_b, last_b = b.memory.stages
    assert first_b.total_bytes == first_a.total_bytes
    assert last_b.total_bytes > last_a.total_bytes


def test_deepep_node_dedup_factor_hand_values():
    from perfcast.comm.dispatch import node_dedup_factor

    assert node_dedup_factor(8, 8) == pytest.approx(8 * (1 - (7 / 8) ** 8) / 8)
    assert node_dedup_factor(8, 4) == pytest.approx(4 * (1 - 0.75 ** 8) / 8)
    assert node_dedup_factor(8, 1) == 1.0  # one node: no network leg
    assert node_dedup_factor(1, 8) == 1.0  # top-1: nothing to deduplicate


def _ep_comm(dispatcher: str, gpus: int, ep: int) -> float:
    model = load_model("deepseek-v2-lite")
    strategy = Strategy(num_gpus=gpus, ep=ep, distributed_optimizer=True,
                        moe_token_dispatcher=dispatcher)
    system = load_system("dgx-h100", num_gpus=gpus)
    report = estimate_training(model, system, strategy, Workload(seq_length=4096,
                                                                 global_batch_size=gpus))
    return report.breakdown.ep_comm_s


def test_deepep_cuts_network_dispatch_not_in_node():
    assert _ep_comm("deepep", 64, 64) < 0.9 * _ep_comm("alltoall", 64, 64)
    assert _ep_comm("deepep", 8, 8) <= _ep_comm("alltoall", 8, 8) * (1 + 1e-9)


def test_node_limited_routing_hand_values():
    """DeepSeek-V3 §2.1.2: 4 of 8 groups, one group per node at 8 nodes -> at most 4 nodes."""
    from perfcast.comm.dispatch import node_dedup_factor, reachable_domains

    v3 = load_model("deepseek-v3")
    assert (v3.moe_router_num_groups, v3.moe_router_group_topk) == (8, 4)  # HF n_group, topk_group
    assert reachable_domains(8, 8, 4) == 4.0
    assert reachable_domains(16, 8, 4) == 8.0  # a group spans 2 nodes
    # 4 nodes of 2 groups each: a node is missed by all 4 drawn groups w.p. C(6,4)/C(8,4)
    assert reachable_domains(4, 8, 4) == pytest.approx(4 * (1 - 15 / 70))
    assert reachable_domains(8, 1, 1) == 8.0
    assert node_dedup_factor(8, 8, 8, 4) == pytest.approx(node_dedup_factor(8, 4))


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 16), st.sampled_from([1, 2, 4, 8, 16, 32]),
       st.sampled_from([(8, 1), (8, 3), (8, 4), (8, 8), (16, 2), (4, 4)]))
def test_group_limit_never_adds_network_bytes(k, nodes, groups):
    from perfcast.comm.dispatch import node_dedup_factor, reachable_domains

    assert reachable_domains(nodes, *groups) <= nodes + 1e-12
    assert node_dedup_factor(k, nodes, *groups) <= node_dedup_factor(k, nodes) + 1e-12


def test_node_limited_routing_cuts_deepseek_v3_dispatch():
    v3 = load_model("deepseek-v3")
    unlimited = v3.model_copy(update={"moe_router_num_groups": 1, "moe_router_group_topk": 1})
    strategy = Strategy(num_gpus=512, pp=8, ep=64, distributed_optimizer=True,
                        moe_token_dispatcher="deepep")
    system, workload = load_system("dgx-h100", num_gpus=512), Workload(seq_length=4096,
                                                                        global_batch_size=512)
    limited_s = estimate_training(v3, system, strategy, workload).breakdown.ep_comm_s
    unlimited_s = estimate_training(unlimited, system, strategy, workload).breakdown.ep_comm_s
    assert limited_s < 0.8 * unlimited_s


def test_router_groups_must_tile_the_experts():
    mixtral = load_model("mixtral-8x7b")
    with pytest.raises(ValueError, match="moe_router_num_groups=3"):
        mixtral.model_validate({**mixtral.model_dump(), "moe_router_num_groups": 3})
