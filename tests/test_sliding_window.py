"""Sliding-window attention: only the model's windowed layers, at key-block granularity."""

from __future__ import annotations

import numpy as np
import pytest

from perfcast.catalog.models import load_model
from perfcast.catalog.systems import load_system
from perfcast.graph.ops import AttentionOp, Phase
from perfcast.graph.stage import layer_shape, sliding_window_share, stage_graph
from perfcast.kernels.backend import get_backend
from perfcast.kernels.tiles import sliding_window_keys_visited
from perfcast.schedule.op_time import compute_op_time_s
from perfcast.specs.strategy import Strategy


def test_keys_visited_at_block_granularity():
    # 128-token window, 128x128 blocks (FA3 on Hopper): 2 key blocks per query block = 256 keys,
    # less the causal start: 256 * (1 - 256 / 8192).
    assert sliding_window_keys_visited(128, 4096, 128, 128) == pytest.approx(256 * (1 - 1 / 32))
    # FA2 on Ampere (128 x 64): 2 + 2 blocks of 64 = 256 keys as well.
    assert sliding_window_keys_visited(128, 4096, 128, 64) == pytest.approx(248)
    # A window as long as the sequence costs full causal attention: s/2 keys per query.
    assert sliding_window_keys_visited(4096, 4096, 128, 128) == pytest.approx(2048)
    windows = np.array([64.0, 128.0, 130.0, 512.0])
    keys = sliding_window_keys_visited(windows, 8192, 128, 128)
    assert np.all(np.diff(keys) >= 0) and keys[0] == keys[1] < keys[2]  # 130 keys span 3 blocks


def test_only_the_windowed_layers_slide():
    oss = load_model("gpt-oss-120b")
    assert sliding_window_share(oss) == pytest.approx(18 / 36)
    assert sliding_window_share(load_model("mistral-7b-v0.1")) == 1.0  # window on every layer
    graph = stage_graph(oss, Strategy(num_gpus=8, ep=8), 4096, 0)
    forward = [op for op in graph.layers[0].compute
               if isinstance(op, AttentionOp) and op.phase == Phase.FORWARD]
    assert sorted((op.window, op.count) for op in forward if op.window) == [(128, 0.5)]
    assert [(op.window, op.count) for op in forward if op.window is None] == [(None, 0.5)]
    backward = [op for op in graph.layers[0].compute
                if isinstance(op, AttentionOp) and op.phase != Phase.FORWARD]
    assert sum(op.count for op in backward) == pytest.approx(1.0)


def test_windowed_kernel_costs_whole_key_blocks():
    system, backend = load_system("dgx-h100"), get_backend("analytical")
    strategy = Strategy(num_gpus=1)
    shape = layer_shape(load_model("gpt-oss-20b"), strategy, 4096, False)
    op = AttentionOp("attention", Phase.FORWARD, shape.micro_batch, 64, 4096, 4096, 64, 64,
                     window=128)
    windowed = compute_op_time_s(op, system, strategy, backend)
    # The same kernel over exactly the window's 128 keys (the previous model) is cheaper.
    exact = backend.attention_time_s(system.gpu, 1, 64, 4096, 128, 64, 64, False, False, "bf16")
    full = compute_op_time_s(AttentionOp("attention", Phase.FORWARD, 1, 64, 4096, 4096, 64, 64),
                             system, strategy, backend)
    assert exact < windowed < full


def test_inference_attention_slides_on_the_windowed_layers_only():
    """Decode and prefill attention of gpt-oss: half the layers read the whole cache."""
    from perfcast.calibration.kernel_roofline import load_kernel_roofline
    from perfcast.estimate import inference_kernels as K
    from perfcast.estimate.inference_ops import AttentionPass
    from perfcast.specs.inference import InferencePrecision

    model, strategy = load_model("gpt-oss-120b"), Strategy(num_gpus=1)
    system = load_system("dgx-h100")
    params = load_kernel_roofline().for_generation(system.gpu.generation)
    full_model = model.model_copy(update={"sliding_window": None, "sliding_window_layers": None})
    all_window = model.model_copy(update={"sliding_window_layers": None})
    decode = AttentionPass(num_seqs=64, seq_q=1, seq_kv=8192.0, causal=False)
    times = [K.decode_attention_time_s(m, strategy, decode, system.gpu, params, "bf16", 1.0)
             for m in (all_window, model, full_model)]
    assert times[0] < times[1] < times[2]
    assert times[1] == pytest.approx(0.5 * (times[0] + times[2]))
    prefill = AttentionPass(num_seqs=1, seq_q=8192, seq_kv=8192.0, causal=True)
    backend, precision = get_backend("analytical"), InferencePrecision()
    p_times = [K.prefill_attention_time_s(m, strategy, prefill, system.gpu, backend, precision)
               for m in (all_window, model, full_model)]
    assert p_times[0] < p_times[1] < p_times[2]
