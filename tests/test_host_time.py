"""Host launch time, device-host syncs and CUDA graphs (schedule.host_time, --cuda-graphs)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from perfcast.calibration.host_launch import load_host_launch
from perfcast.catalog.models import load_model
from perfcast.catalog.systems import load_system
from perfcast.cli.main import app
from perfcast.estimate.training import estimate_training
from perfcast.graph.stage import stage_graph
from perfcast.kernels.backend import get_backend
from perfcast.schedule.host_time import (
    HostScope,
    Segment,
    captured_scopes,
    host_issue_s,
    op_scope,
    pass_segments,
    pass_time_s,
    segment_time_s,
)
from perfcast.schedule.stage_time import layer_time
from perfcast.specs.strategy import Strategy
from perfcast.specs.workload import Workload

CALIB = load_host_launch()
OP_S = CALIB.host_s_per_op.value
SYNC_S = CALIB.sync_s.value


@pytest.mark.parametrize(("name", "scope"), [
    ("qkv_proj", HostScope.ATTENTION), ("qkv_proj_dgrad", HostScope.ATTENTION),
    ("q_down_proj", HostScope.ATTENTION), ("attention_backward", HostScope.ATTENTION),
    ("out_proj_wgrad", HostScope.ATTENTION), ("rotary", HostScope.ATTENTION),
    ("cp_kv_all_gather", HostScope.ATTENTION), ("router", HostScope.MOE),
    ("router_topk", HostScope.MOE), ("moe_permute", HostScope.MOE),
    ("expert_in_proj_x_fp8_cast", HostScope.MOE), ("shared_expert_out_proj", HostScope.MOE),
    ("ep_all_to_all", HostScope.MOE), ("norm", HostScope.OTHER), ("mlp_in_proj", HostScope.OTHER),
    ("residual_add", HostScope.OTHER), ("tp_all_reduce", HostScope.OTHER),
])
def test_op_scope(name, scope):
    assert op_scope(name) == scope


def test_captured_scopes():
    assert captured_scopes("none") == frozenset()
    assert captured_scopes("attention") == {HostScope.ATTENTION}
    assert captured_scopes("moe") == {HostScope.MOE}
    assert captured_scopes("full") == set(HostScope)


def test_host_runs_ahead_unless_it_is_slower():
    assert host_issue_s(10, 2, CALIB) == pytest.approx(10 * OP_S + 2 * CALIB.graph_launch_s.value)
    assert segment_time_s(1e-3, 1e-4) == 1e-3  # GPU-bound: launches hidden
    assert segment_time_s(1e-5, 1e-4) == 1e-4  # host-bound: the GPU waits
    gpu = np.array([1e-5, 1e-3])
    assert np.allclose(segment_time_s(gpu, 1e-4), [1e-4, 1e-3])


def test_a_sync_splits_the_pass():
    """Host-heavy MoE block after a sync cannot hide under the GPU-heavy attention before it."""
    ops = [("qkv_proj", 1, 1e-3), ("attention", 1, 1e-3), ("router", 1, 1e-6),
           ("moe_permute", 1, 1e-6), ("expert_in_proj", 8, 1e-6), ("expert_out_proj", 8, 1e-6)]
    whole = pass_time_s(pass_segments(ops, "none", sync_before_moe=False), 0, CALIB)
    split = pass_time_s(pass_segments(ops, "none", sync_before_moe=True), 1, CALIB)
    assert whole == pytest.approx(2.004e-3)  # 20 ops x 10 us hide under 2 ms of GPU
    assert split == pytest.approx(2e-3 + 18 * OP_S + SYNC_S)  # 2 ops before, 18 after the sync
    graphed = pass_segments(ops, "moe", sync_before_moe=False)
    assert graphed == [Segment(gpu_s=pytest.approx(2.004e-3), eager_ops=2, graph_launches=1.0,
                               kernels=20)]


def _layer(model: str, strategy: Strategy, seq: int, moe: bool):
    graph = stage_graph(load_model(model), strategy, seq, 0)
    group = next(g for g in graph.layers if any(op.name == "router" for op in g.compute) == moe)
    return layer_time(group, load_system("dgx-h100"), strategy, get_backend("analytical"))


def test_small_dense_layer_is_host_bound_and_graphs_remove_it():
    eager = _layer("llama-3.2-1b", Strategy(num_gpus=1), 128, moe=False)
    graphed = _layer("llama-3.2-1b", Strategy(num_gpus=1, cuda_graphs="full"), 128, moe=False)
    assert eager.host_forward_s > 0  # 11 ops x 10 us > 81 us of forward kernels
    assert graphed.host_forward_s < eager.host_forward_s
    big = _layer("llama-3-8b", Strategy(num_gpus=1), 8192, moe=False)
    assert big.host_forward_s == 0 and big.host_backward_s == 0  # GPU-bound: launches hidden


def test_dropless_moe_syncs_once_per_forward():
    dropless = _layer("qwen3-30b-a3b", Strategy(num_gpus=8, ep=8), 4096, moe=True)
    # exposed host = pass time - GPU stream: two sums of the same seconds in different
    # orders, equal up to float rounding (~1e-17 s here)
    assert dropless.host_forward_s >= SYNC_S * (1 - 1e-9) and dropless.host_backward_s == 0
    capacity = _layer("qwen3-30b-a3b", Strategy(num_gpus=8, ep=8, moe_capacity_factor=1.0), 4096,
                      moe=True)
    graphed = _layer("qwen3-30b-a3b", Strategy(num_gpus=8, ep=8, cuda_graphs="moe"), 4096, moe=True)
    assert capacity.host_forward_s < SYNC_S and graphed.host_forward_s < SYNC_S
    dense = _layer("llama-3-8b", Strategy(num_gpus=8), 4096, moe=False)
    assert dense.host_forward_s == 0


@pytest.mark.parametrize("model", ["llama-3.2-1b", "qwen3-30b-a3b"])
def test_graphs_never_slow_a_step_and_breakdown_sums(model):
    m, system = load_model(model), load_system("dgx-h100")
    workload = Workload(seq_length=128, global_batch_size=8)
    steps = {}
    for scope in ("none", "attention", "moe", "full"):
        ep = 8 if m.is_moe else 1
        report = estimate_training(m, system, Strategy(num_gpus=8, ep=ep, cuda_graphs=scope),
                                   workload)
        assert report.breakdown.total_s == pytest.approx(report.step_time_s, rel=1e-9)
        steps[scope] = report.step_time_s
    assert steps["full"] <= min(steps["attention"], steps["moe"]) <= steps["none"]
    assert steps["full"] < steps["none"]


def test_cli_cuda_graphs_flag():
    runner = CliRunner()
    base = ["train", "-m", "llama-3.2-1b", "--gpus", "8", "--seq-length", "128", "--json"]
    eager = json.loads(runner.invoke(app, base).stdout)
    graphed = json.loads(runner.invoke(app, base + ["--cuda-graphs", "full"]).stdout)
    assert eager["strategy"]["cuda_graphs"] == "none"
    assert graphed["strategy"]["cuda_graphs"] == "full"
    assert eager["breakdown_s"]["host"] > graphed["breakdown_s"]["host"] >= 0
    bad = runner.invoke(app, base + ["--cuda-graphs", "layers"])
    assert bad.exit_code == 2
