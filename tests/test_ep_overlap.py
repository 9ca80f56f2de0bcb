"""EP all-to-all overlap: Megatron-Core --overlap-moe-expert-parallel-comm, --delay-wgrad-compute
and DualPipe's paired chunks share one window rule and the TP/DP overlap physics."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from perfcast.catalog.models import load_model
from perfcast.catalog.systems import load_system
from perfcast.estimate.training import estimate_training
from perfcast.schedule.ep_overlap import (
    ExpertSeconds,
    ep_overlap_exposed_s,
    paired_ep_exposed_s,
    unpaired_pass_share,
)
from perfcast.specs.strategy import Strategy
from perfcast.specs.workload import Workload
from perfcast.validate.row_strategy import ep_overlap

MODEL = load_model("qwen3-30b-a3b")
SYSTEM = load_system("dgx-h100", num_gpus=32)
WORKLOAD = Workload(seq_length=4096, global_batch_size=64)


def _ep_s(**extra):
    strategy = Strategy(num_gpus=32, ep=32, distributed_optimizer=True, **extra)
    return estimate_training(MODEL, SYSTEM, strategy, WORKLOAD).breakdown.ep_comm_s


def test_overlap_hides_and_deferred_wgrad_hides_more():
    plain, overlapped = _ep_s(), _ep_s(ep_overlap=True)
    delayed = _ep_s(ep_overlap=True, delay_wgrad_compute=True)
    assert plain > overlapped >= delayed
    assert overlapped > 0  # the SM share of overlapped communication still costs time


def test_each_all_to_all_hides_only_behind_its_paired_node():
    """Combined 1F1B pairs: backward combine | forward attention side, forward dispatch |
    expert backward, backward dispatch | forward experts, forward combine | backward attention
    side. 1 s of all-to-all per pass (0.5 s per collective) beside a layer whose forward is
    all experts (attention side 0): the backward combine is exposed in full, though the
    pooled compute (1 + 2 s) would have covered all 2 s of communication."""
    experts = ExpertSeconds(forward_s=1.0, dgrad_s=0.6, wgrad_s=0.4)
    exposed = paired_ep_exposed_s(1.0, 1.0, 1.0, 2.0, experts, slowdown=0.0,
                                  deferred_wgrad=False)
    assert exposed == pytest.approx(0.5)
    # every node at least as long as its collective: only the SM share s of each pair is paid
    wide = ExpertSeconds(forward_s=1.0, dgrad_s=0.5, wgrad_s=0.5)
    assert paired_ep_exposed_s(1.0, 1.0, 2.0, 3.0, wide, 0.1, False) == pytest.approx(0.2)


def test_dualpipe_rearranges_its_components_under_the_whole_layer():
    """DualPipe (DeepSeek-V3 §3.2.1) is not bound to the node order: the example above, all
    2 s of communication under 3 s of compute, is hidden in full (SM share aside)."""
    experts = ExpertSeconds(forward_s=1.0, dgrad_s=0.6, wgrad_s=0.4)
    args = (1.0, 1.0, 1.0, 2.0, experts, 0.0, True)
    assert ep_overlap_exposed_s(*args, pooled=True) == pytest.approx(0.0)
    assert ep_overlap_exposed_s(*args, pooled=False) == pytest.approx(0.5)


def test_deferred_wgrad_moves_expert_wgrad_beside_the_dispatch_backward():
    """--delay-wgrad-compute: the expert wgrad leaves the node beside the forward dispatch
    and joins the forward experts beside the dispatch backward (Megatron-Core backward_dw)."""
    experts = ExpertSeconds(forward_s=0.2, dgrad_s=0.5, wgrad_s=0.5)
    kept = paired_ep_exposed_s(1.0, 1.0, 1.2, 3.0, experts, 0.0, deferred_wgrad=False)
    deferred = paired_ep_exposed_s(1.0, 1.0, 1.2, 3.0, experts, 0.0, deferred_wgrad=True)
    assert kept == pytest.approx(0.3)  # dispatch backward 0.5 beside 0.2 s of experts
    assert deferred == pytest.approx(0.0)  # 0.5 beside 0.7; dispatch 0.5 beside dgrad 0.5


def test_dualpipe_overlaps_ep_by_itself():
    assert Strategy(num_gpus=16, pp=2, ep=8, pipeline_schedule="dualpipe").overlaps_ep
    assert not Strategy(num_gpus=16, pp=2, ep=8).overlaps_ep


def test_delay_wgrad_needs_ep_overlap():
    with pytest.raises(ValidationError, match="ep_overlap"):
        Strategy(num_gpus=8, ep=8, delay_wgrad_compute=True)


@pytest.mark.parametrize("framework,notes,expected", [
    ("Megatron-Core; token dispatcher DeepEP; EP A2A overlap", "", True),
    ("Megatron-Core (moe_dev); token dispatcher DeepEP", "cross-node EP; +1F1B EP A2A overlap", True),
    ("Megatron-Core; token dispatcher HybridEP (SEGMENT 16, A2A_OVERLAP=1)", "", True),
    ("Megatron-Core; token dispatcher HybridEP (SEGMENT 8, A2A_OVERLAP=0)", "", False),
    ("Megatron-Core; token dispatcher DeepEP", "A2A_OVERLAP=0, OPTIMIZER_OFFLOAD=0", False),
    ("Megatron-Core; token dispatcher DeepEP", "", False),
])
def test_row_text(framework, notes, expected):
    assert ep_overlap({"framework": framework, "notes": notes}, 8, []) is expected
    assert ep_overlap({"framework": framework, "notes": notes}, 1, []) is False


def test_unpaired_share_of_warm_up_and_cool_down_passes():
    """Mean warm-up forwards per rank over its m·v forwards: v·p/(m·v) interleaved, (p + 1)/2
    per m for 1F1B (the pairing's extra warm-up forward included), capped at every pass."""
    assert unpaired_pass_share("interleaved", 8, 4, 128) == pytest.approx(8 / 128)
    assert unpaired_pass_share("1f1b", 1, 1, 128) == pytest.approx(1 / 128)
    assert unpaired_pass_share("1f1b", 4, 1, 10) == pytest.approx(0.25)
    assert unpaired_pass_share("interleaved", 8, 4, 2) == 1.0
    assert unpaired_pass_share("dualpipe", 8, 1, 16) == 0.0


def test_a_lone_micro_batch_has_nothing_to_pair_with():
    """One micro-batch per step (global batch = DP × micro-batch): every forward and backward
    runs alone, so EP overlap exposes the whole all-to-all, as without overlap."""
    system, workload = load_system("dgx-h100", num_gpus=8), Workload(seq_length=4096,
                                                                      global_batch_size=8)
    plain, overlapped = (estimate_training(MODEL, system, Strategy(
        num_gpus=8, ep=8, distributed_optimizer=True, ep_overlap=overlap), workload)
        for overlap in (False, True))
    assert overlapped.num_micro_batches == 1
    assert overlapped.breakdown.ep_comm_s == pytest.approx(plain.breakdown.ep_comm_s)


def test_expert_seconds_are_the_routed_mlp_of_moe_layers_only():
    """``LayerOpSeconds.experts``: the routed experts' GEMMs and activation (between dispatch
    and combine) of a MoE layer, a part of each pass; none in a dense layer."""
    from perfcast.calibration.bundle import load_calibration
    from perfcast.graph.stage import stage_graph
    from perfcast.kernels.backend import DEFAULT_KERNEL_BACKEND, get_backend
    from perfcast.schedule.stage_time import layer_op_seconds

    strategy = Strategy(num_gpus=8, ep=8, ep_overlap=True)
    backend = load_calibration().with_kernels(get_backend(DEFAULT_KERNEL_BACKEND))
    for group in stage_graph(MODEL, strategy, 4096, 0).layers:
        seconds = layer_op_seconds(group, SYSTEM, strategy, backend)
        experts = seconds.experts
        if not group.moe:
            assert (experts.forward_s, experts.dgrad_s, experts.wgrad_s) == (0.0, 0.0, 0.0)
            continue
        assert 0 < experts.forward_s < seconds.forward_s
        assert 0 < experts.dgrad_s + experts.wgrad_s < seconds.backward_s
        assert experts.wgrad_s < seconds.wgrad_s
