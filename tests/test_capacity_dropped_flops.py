"""Tokens dropped by an expert capacity below 1 do no expert work: their FLOPs are not model
FLOPs, so MFU stays a fraction of the peak (issue 22: capacity 0.01 gave MFU 1.24)."""

from __future__ import annotations

import pytest

from perfcast import Strategy, Workload, estimate_training, load_model, load_system
from perfcast.graph.flops import dropped_token_flops_per_token, model_flops_per_token
from perfcast.graph.params import routed_expert_params

QWEN = load_model("qwen3-30b-a3b")
SYSTEM = load_system("dgx-h100", num_gpus=8)
WORKLOAD = Workload(seq_length=4096, global_batch_size=64)


def _report(capacity):
    strategy = Strategy(num_gpus=8, ep=8, fsdp=True, micro_batch_size=2,
                        moe_capacity_factor=capacity)
    return estimate_training(QWEN, SYSTEM, strategy, WORKLOAD)


def test_dropped_flops_hand_count():
    """6·L_moe·k·N_expert·(1 − c): half the routed assignments dropped at c = 0.5."""
    expected = 6 * QWEN.num_moe_layers * QWEN.num_experts_per_tok * routed_expert_params(QWEN) / 2
    assert dropped_token_flops_per_token(QWEN, 0.5) == pytest.approx(expected)
    assert dropped_token_flops_per_token(QWEN, None) == 0.0
    assert dropped_token_flops_per_token(QWEN, 1.25) == 0.0


def test_tiny_capacity_keeps_mfu_below_one():
    report = _report(0.01)
    assert report.model_flops_per_token < model_flops_per_token(QWEN, 4096)
    assert 0 < report.mfu < 1


def test_capacity_at_or_above_one_drops_nothing_from_model_flops():
    assert _report(1.0).model_flops_per_token == _report(None).model_flops_per_token
