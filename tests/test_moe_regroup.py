"""The all-to-all dispatcher's regrouping copies (graph.layer.moe_regroup_op): received chunks
sorted into local-expert order and back, a pass the flex dispatchers (DeepEP, HybridEP) do
not run."""

from __future__ import annotations

import pytest

from perfcast import Strategy, Workload, estimate_training, load_model, load_system
from perfcast.graph.layer import LayerShape, mlp_forward_ops
from perfcast.graph.ops import MemoryOp
from perfcast.graph.stage import stage_graph

QWEN = load_model("qwen3-30b-a3b")  # 128 experts, top-8
WORKLOAD = Workload(seq_length=4096, global_batch_size=64)


def _memory_ops(shape: LayerShape) -> dict[str, MemoryOp]:
    return {op.name: op for op in mlp_forward_ops(QWEN, shape) if isinstance(op, MemoryOp)}


def test_regroup_copies_every_received_copy_twice():
    """Read + write of the busiest rank's routed copies, after the dispatch and before the
    combine: the bytes of the permute/unpermute pair."""
    ops = _memory_ops(LayerShape(micro_batch=2, seq_length=4096, ep=8, moe=True,
                                 moe_load_imbalance=1.5, moe_regroup_by_expert=True))
    routed = 2 * 4096 * 8 * 1.5
    assert ops["moe_regroup"].bytes_moved == pytest.approx(2 * 2 * 2 * routed * QWEN.hidden_size)
    assert ops["moe_regroup"].bytes_moved == ops["moe_permute"].bytes_moved


@pytest.mark.parametrize("ep", [1, 128])
def test_no_regroup_without_several_local_experts(ep):
    """EP 1 has no all-to-all; EP = experts leaves one expert per rank (Megatron-Core skips
    ``sort_chunks_by_idxs`` when ``num_local_experts`` is 1)."""
    ops = _memory_ops(LayerShape(micro_batch=1, seq_length=4096, ep=ep, moe=True,
                                 moe_regroup_by_expert=True))
    assert "moe_regroup" not in ops


@pytest.mark.parametrize("dispatcher, regroups", [("alltoall", True), ("deepep", False),
                                                  ("hybridep", False)])
def test_training_graph_regroups_only_for_the_all_to_all(dispatcher, regroups):
    strategy = Strategy(num_gpus=8, ep=8, micro_batch_size=2, moe_token_dispatcher=dispatcher)
    graph = stage_graph(QWEN, strategy, 4096, 0)
    names = {op.name for group in graph.layers for op in group.compute}
    assert ("moe_regroup" in names) is regroups
    assert "moe_permute" in names


def test_all_to_all_step_pays_the_regroup_pass():
    """Inside one NVLink domain (8 H100) the all-to-all's memory-bound time exceeds HybridEP's
    by the regroup pass, forward and backward."""
    system = load_system("dgx-h100", num_gpus=8)

    def memory_bound_s(dispatcher: str) -> float:
        strategy = Strategy(num_gpus=8, ep=8, fsdp=True, micro_batch_size=2,
                            moe_token_dispatcher=dispatcher)
        return estimate_training(QWEN, system, strategy, WORKLOAD).breakdown.compute_memory_bound_s

    assert memory_bound_s("alltoall") > 1.05 * memory_bound_s("hybridep")


def test_serving_layers_are_unchanged():
    """Serving builds its own layer shapes: the training dispatchers' regroup is not charged."""
    ops = _memory_ops(LayerShape(micro_batch=1, seq_length=4096, ep=8, moe=True))
    assert "moe_regroup" not in ops
