"""The busiest EP rank's expert count in a decode step (estimate.inference_ops): the step waits
for the rank that hit the most distinct experts, not the mean rank."""

from __future__ import annotations

import numpy as np
import pytest

from perfcast.estimate.inference_ops import busiest_rank_experts_hit, expected_experts_hit


def _monte_carlo(E: int, k: int, ep: int, T: int, samples: int = 3000) -> float:
    """Tokens route to k distinct experts uniformly (the balanced-routing assumption)."""
    rng = np.random.default_rng(0)
    scores = rng.random((samples, T, E))
    top = np.argpartition(scores, k, axis=-1)[..., :k]
    hit = np.zeros((samples, E), dtype=bool)
    np.put_along_axis(hit, top.reshape(samples, T * k), True, axis=-1)
    return float(hit.reshape(samples, ep, E // ep).sum(-1).max(-1).mean())


@pytest.mark.parametrize("E, k, ep, T", [(256, 8, 8, 1), (256, 8, 8, 8), (256, 8, 8, 32),
                                         (128, 8, 4, 8), (128, 8, 8, 32)])
def test_matches_a_routing_simulation(E, k, ep, T):
    """Independent binomial ranks vs uniform top-k routing: within 2% (measured <= 0.5%)."""
    assert busiest_rank_experts_hit(E, k, T, ep) == pytest.approx(_monte_carlo(E, k, ep, T),
                                                                  rel=0.02)


def test_one_rank_is_the_mean_and_many_tokens_hit_every_expert():
    assert busiest_rank_experts_hit(256, 8, 8, 1) == pytest.approx(expected_experts_hit(256, 8, 8))
    assert busiest_rank_experts_hit(256, 8, 4096, 8) == pytest.approx(32.0)


def test_busiest_rank_is_above_the_mean_and_grows_with_tokens():
    tokens = np.array([1.0, 2, 4, 8, 16, 64, 256])
    busiest = busiest_rank_experts_hit(256, 8, tokens, 8)
    mean = expected_experts_hit(256, 8, tokens) / 8
    assert np.all(busiest >= mean - 1e-9) and np.all(busiest <= 32.0)
    assert np.all(np.diff(busiest) > 0)
    assert busiest[3] / mean[3] == pytest.approx(1.48, abs=0.02)  # DeepSeek-V3 EP 8, 8 tokens


def _expert_gemm_rows(strategy):
    from perfcast.catalog.models import load_model
    from perfcast.estimate.inference_ops import step_layer_ops
    from perfcast.graph.ops import GemmOp

    model = load_model("qwen3-235b-a22b")
    ops = step_layer_ops(model, strategy, 8192.0, (), moe=True)
    gemms = [op for op in ops.compute if isinstance(op, GemmOp) and op.name.startswith("expert_")]
    assert gemms
    return model, float(np.asarray(gemms[0].m) * np.asarray(gemms[0].batch))


def test_the_busiest_ep_rank_gets_the_learned_routers_share_of_the_tokens():
    """An 8,192-token prefill step of Qwen3-235B at EP 8 hits every local expert; its busiest
    rank computes the learned-router imbalance (calibration/moe_routing.yaml, measured on this
    model at EP 8) times the balanced 8,192·k/8 routed rows; stated balance and EP 1 do not."""
    from perfcast.calibration.moe_routing import load_moe_routing
    from perfcast.specs.strategy import Strategy

    learned = load_moe_routing().dropless_load_imbalance.value
    assert learned > 1.2
    model, rows = _expert_gemm_rows(Strategy(num_gpus=8, tp=8, ep=8, etp=1))
    balanced = 8192 * model.num_experts_per_tok / 8
    assert rows == pytest.approx(learned * balanced, rel=1e-6)
    _, stated = _expert_gemm_rows(Strategy(num_gpus=8, tp=8, ep=8, etp=1, moe_load_imbalance=1.0))
    assert stated == pytest.approx(balanced, rel=1e-6)
    _, no_ep = _expert_gemm_rows(Strategy(num_gpus=8, tp=8))
    assert no_ep == pytest.approx(8192 * model.num_experts_per_tok, rel=1e-6)
