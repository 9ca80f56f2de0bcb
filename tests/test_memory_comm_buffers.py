"""``LayerCommBuffers``: computed once per forecast, the same bytes as per-stage computing."""

from __future__ import annotations

import pytest

from perfcast.calibration.memory_overheads import load_memory_overheads
from perfcast.catalog.models import load_model
from perfcast.catalog.systems import load_system
from perfcast.graph.context_parallel import cp_comm_buffer_bytes
from perfcast.graph.param_sharding import stage_params
from perfcast.memory.estimate import LayerCommBuffers, estimate_memory, stage_memory
from perfcast.specs.strategy import Strategy
from perfcast.specs.workload import Workload

CASES = [
    dict(num_gpus=64, tp=8, pp=4, cp=2),
    dict(num_gpus=64, tp=4, pp=2, cp=4, cp_comm_type="a2a"),
    dict(num_gpus=64, tp=8, pp=8),
]


@pytest.mark.parametrize("fields", CASES)
def test_shared_buffers_give_the_same_stage_memory(fields: dict) -> None:
    model = load_model("llama-3-70b")
    strategy = Strategy(**fields)
    s = 8192 / strategy.cp
    shared = LayerCommBuffers.of(model, strategy, s, strategy.micro_batch_size)
    assert shared.cp_bytes == cp_comm_buffer_bytes(
        model, s * strategy.micro_batch_size, strategy.tp, strategy.cp, strategy.cp_a2a_size,
        strategy.cp_kv_all_gather)
    assert (shared.cp_bytes > 0) == (strategy.cp > 1)
    cal = load_memory_overheads()
    for stage in range(strategy.pp):
        params = stage_params(model, strategy, stage)
        alone = stage_memory(model, strategy, params, 8192, 16, cal)
        assert stage_memory(model, strategy, params, 8192, 16, cal, buffers=shared) == alone


def test_estimate_memory_stages_match_stage_memory() -> None:
    model, strategy = load_model("llama-3-70b"), Strategy(**CASES[0])
    report = estimate_memory(model, load_system("dgx-h100", num_gpus=64), strategy,
                             Workload(seq_length=8192, global_batch_size=64))
    cal = load_memory_overheads()
    m = 64 // (strategy.dp * strategy.micro_batch_size)
    for stage in report.stages:
        params = stage_params(model, strategy, stage.stage)
        assert stage == stage_memory(model, strategy, params, 8192, m, cal)
