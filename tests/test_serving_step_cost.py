"""Per-step cost tables of the serving simulation (estimate/serving_step_cost.py): which steps
replay a graph and which run eager."""

from __future__ import annotations

from dataclasses import replace

import pytest

from perfcast.catalog.models import load_model
from perfcast.catalog.systems import load_system
from perfcast.estimate.serving import serving_setup
from perfcast.estimate.serving_step_cost import build_step_cost
from perfcast.specs.strategy import Strategy


@pytest.fixture(scope="module")
def vllm_setup():
    return serving_setup(load_model("llama-3.1-8b"), load_system("dgx-h100", num_gpus=1),
                         Strategy(num_gpus=1), engine="vllm", engine_version="0.21.0")


def test_mixed_steps_above_the_capture_size_run_eager(vllm_setup):
    config = vllm_setup.config
    assert config.mixed_step_graph_max_tokens == 512
    cost = build_step_cost(vllm_setup.ctx, config, 64, 4096)
    uncapped = build_step_cost(vllm_setup.ctx, replace(config, mixed_step_graph_max_tokens=None),
                               64, 4096)
    # 32 decodes + 400 prompt tokens: inside the captured sizes, the same graph either way
    small = (32, 32 * 1000.0, 400, 0.0, 33)
    assert cost.mixed_s(*small) == pytest.approx(uncapped.mixed_s(*small), rel=1e-12)
    # 32 decodes + 2048 prompt tokens: beyond 512 tokens the step pays its launch overheads
    large = (32, 32 * 1000.0, 2048, 0.0, 33)
    assert cost.mixed_s(*large) > uncapped.mixed_s(*large)
    assert cost.mixed_s(*large) == pytest.approx(
        replace(cost, mixed_graphs=False).mixed_s(*large), rel=1e-12)


def test_decode_batches_beyond_both_graph_sizes_run_eager(vllm_setup):
    cost = build_step_cost(vllm_setup.ctx, vllm_setup.config, 1024, 2048)
    assert cost.graph_max_batch == 512
    graphed = cost.decode_s(512, 512 * 1000.0)
    eager_cost = replace(cost, graph_max_batch=0, mixed_graphs=False)
    assert cost.decode_s(600, 600 * 1000.0) == pytest.approx(
        eager_cost.decode_s(600, 600 * 1000.0), rel=1e-12)
    assert graphed < eager_cost.decode_s(512, 512 * 1000.0)
