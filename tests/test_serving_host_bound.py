"""Host-bound eager steps (``EngineConfig.eager_launch``, ``inference_phases.host_bound_s``).

An engine whose forward runs as PyTorch modules from Python issues an eager step op by op from
the host (~10 us an op, ``calibration/host_launch.yaml`` ``host_s_per_op``): the step cannot end
before the host has issued its last kernel. DeepSeek-V3 decodes ~1,400 ops a step, so with
CUDA graphs off (TensorRT-LLM's PyTorch backend before 1.0) a small-batch decode step is
host-bound; a replayed graph is one launch, and a native runtime (NIM's TensorRT engines) has no
Python dispatch.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from perfcast.calibration.host_launch import load_host_launch
from perfcast.catalog.models import load_model
from perfcast.catalog.serving_engines import engine_config
from perfcast.catalog.systems import load_system
from perfcast.estimate.inference_phases import eager_host_floor_s, host_bound_s, step_time
from perfcast.estimate.serving import serving_setup
from perfcast.estimate.serving_step_cost import build_step_cost
from perfcast.specs.strategy import Strategy
from perfcast.units import GiB


@pytest.mark.parametrize("engine, expected", [
    ("vllm", "python"), ("sglang", "python"), ("tensorrt-llm", "python"), ("atom", "python"),
    ("nim", "native")])
def test_eager_launch_by_engine(engine, expected):
    config = engine_config(engine, 141 * GiB)
    assert config.eager_launch == expected
    assert config.source("eager_launch")


def _trt_017_setup(engine: str = "tensorrt-llm"):
    """DeepSeek-V3 FP8 on 8 H200, TP 8, TensorRT-LLM 0.17 (PyTorch backend, graphs off)."""
    return serving_setup(load_model("deepseek-v3"), load_system("dgx-h200"),
                         Strategy(num_gpus=8, tp=8), engine=engine, engine_version="0.17",
                         precision="fp8")


def test_python_engines_take_the_host_launch_prior_per_op():
    ctx = _trt_017_setup().ctx
    assert ctx.eager_host_s_per_op == load_host_launch().host_s_per_op.value == 1e-5


def test_the_floor_counts_every_layer_op_and_the_head():
    ctx = _trt_017_setup().ctx
    model = load_model("deepseek-v3")
    floor = eager_host_floor_s(ctx, 4.0, ())
    # 3 dense + 58 MoE layers of >= 16 ops each, plus the final norm and the LM head
    ops = floor / ctx.eager_host_s_per_op
    assert ops == pytest.approx(round(ops))
    assert ops >= 16 * model.num_hidden_layers + 2
    assert floor == pytest.approx(eager_host_floor_s(ctx, 64.0, ()))  # ops, not tokens


def test_no_floor_for_a_graphed_step_or_a_native_runtime():
    ctx = _trt_017_setup().ctx
    assert host_bound_s(ctx, 1e-3, 4.0, (), graphed=True) == 1e-3
    assert host_bound_s(ctx, 1e-3, 4.0, (), graphed=False) == pytest.approx(
        eager_host_floor_s(ctx, 4.0, ()))
    assert host_bound_s(ctx, 1.0, 4.0, (), graphed=False) == 1.0  # GPU-bound: unchanged
    native = replace(ctx, eager_host_s_per_op=0.0)
    assert eager_host_floor_s(native, 4.0, ()) == 0.0
    assert host_bound_s(native, 1e-3, 4.0, (), graphed=False) == 1e-3


def test_trt_017_small_batch_decode_of_deepseek_is_host_bound():
    setup = _trt_017_setup()
    assert setup.config.cuda_graph_max_batch == 0  # graphs off before 1.0
    cost = build_step_cost(setup.ctx, setup.config, 64, 4000)
    bare = build_step_cost(replace(setup.ctx, eager_host_s_per_op=0.0), setup.config, 64, 4000)
    floor = eager_host_floor_s(setup.ctx, 4.0, ())
    assert cost.body_eager(4.0) == pytest.approx(floor, rel=1e-6)
    assert bare.body_eager(4.0) < floor  # the GPU alone would finish earlier
    assert cost.decode_s(4.0, 4 * 3600.0) > bare.decode_s(4.0, 4 * 3600.0)
    # a large prefill step is GPU-bound: the floor does not touch it
    assert cost.body_prefill(8192.0) == pytest.approx(bare.body_prefill(8192.0))


def test_graphed_decode_steps_are_unchanged():
    setup = serving_setup(load_model("deepseek-v3"), load_system("dgx-h200"),
                          Strategy(num_gpus=8, tp=8), engine="sglang", engine_version="0.5.12",
                          precision="fp8")
    assert setup.config.cuda_graph_max_batch >= 4
    cost = build_step_cost(setup.ctx, setup.config, 64, 4000)
    bare = build_step_cost(replace(setup.ctx, eager_host_s_per_op=0.0), setup.config, 64, 4000)
    assert cost.decode_s(4.0, 4 * 3600.0) == pytest.approx(bare.decode_s(4.0, 4 * 3600.0))


def test_the_step_breakdown_itself_is_unchanged():
    """The floor applies to the whole step (``host_bound_s``), not to ``step_time``'s parts."""
    ctx = _trt_017_setup().ctx
    tokens = np.array([4.0])
    with_floor = float(np.asarray(step_time(ctx, tokens, (), tokens).total_s)[0])
    bare = replace(ctx, eager_host_s_per_op=0.0)
    assert with_floor == pytest.approx(float(np.asarray(step_time(bare, tokens, (), tokens).total_s)[0]))
