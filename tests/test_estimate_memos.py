"""The warm-forecast memos (issue 18) change no number: stages share one set of op tuples per
kind of layer and one ``layer_time`` per set, stages with equal parameters share
``state_bytes``, and the per-device work of one-directional schedules is the diagonal."""

from __future__ import annotations

from perfcast.calibration.bundle import load_calibration
from perfcast.catalog.models import load_model
from perfcast.catalog.systems import load_system
from perfcast.estimate.training import _device_stage_work
from perfcast.graph.param_sharding import stage_params
from perfcast.graph.stage import stage_graph
from perfcast.kernels.backend import DEFAULT_KERNEL_BACKEND, get_backend
from perfcast.memory.estimate import estimate_memory, stage_memory
from perfcast.memory.states import state_bytes
from perfcast.schedule.stage_time import layer_time, stage_time
from perfcast.specs import Strategy, Workload

DENSE = ("llama-3.1-405b", Strategy(num_gpus=16384, tp=8, pp=16, sequence_parallel=True,
                                    recompute="selective", distributed_optimizer=True))
MOE = ("deepseek-v3", Strategy(num_gpus=1024, tp=2, pp=8, ep=64, sequence_parallel=True,
                               recompute="selective", distributed_optimizer=True))


def test_stages_share_op_tuples_and_layer_times() -> None:
    """First, middle and last stages of the 405B layout hold the very same op tuples for their
    decoder layers, and a memo shared over them gives each stage the unshared stage time."""
    cal = load_calibration()
    backend = cal.with_kernels(get_backend(DEFAULT_KERNEL_BACKEND))
    system = load_system("dgx-h100", num_gpus=DENSE[1].num_gpus)
    model, strategy = load_model(DENSE[0]), DENSE[1]
    graphs = [stage_graph(model, strategy, 8192, stage) for stage in (0, 7, 15)]
    first = graphs[0].layers[0]
    for graph in graphs[1:]:
        assert graph.layers[0].compute is first.compute
        assert graph.layers[0].comm is first.comm
    memo: dict = {}
    for graph in graphs:
        shared = stage_time(graph, system, strategy, backend, cal.comm_overlap, cal.host_launch,
                            memo)
        assert shared == stage_time(graph, system, strategy, backend, cal.comm_overlap,
                                    cal.host_launch)
    assert len(memo) == 1  # one kind of layer, timed once
    (parts, seconds), = memo.values()
    assert seconds == layer_time(first, system, strategy, backend, cal.comm_overlap,
                                 cal.host_launch)


def test_layer_memo_ignores_a_group_with_other_tuples() -> None:
    """An entry whose tuples are not the group's own (another layer kind, an equal but
    distinct build) is never returned: the MoE model's dense and MoE layers time apart."""
    cal = load_calibration()
    backend = cal.with_kernels(get_backend(DEFAULT_KERNEL_BACKEND))
    system = load_system("dgx-h100", num_gpus=MOE[1].num_gpus)
    model, strategy = load_model(MOE[0]), MOE[1]
    graph = stage_graph(model, strategy, 4096, 0)
    assert {group.moe for group in graph.layers} == {False, True}
    memo: dict = {}
    stage_time(graph, system, strategy, backend, cal.comm_overlap, cal.host_launch, memo)
    assert len(memo) == 2
    times = [seconds for _, seconds in memo.values()]
    assert times[0] != times[1]


def test_memory_states_shared_between_equal_stages_are_each_stages_own() -> None:
    """Every stage's memory equals ``stage_memory`` with its own ``state_bytes``."""
    model, strategy = load_model(DENSE[0]), DENSE[1]
    workload = Workload(seq_length=8192, global_batch_size=2048)
    report = estimate_memory(model, load_system("dgx-h100", num_gpus=strategy.num_gpus),
                             strategy, workload)
    from perfcast.calibration.memory_overheads import load_memory_overheads

    for stage, memory in enumerate(report.stages):
        params = stage_params(model, strategy, stage)
        own = stage_memory(model, strategy, params, workload.seq_length,
                           report.num_micro_batches, load_memory_overheads(),
                           states=state_bytes(params, strategy))
        assert memory == own


def test_one_directional_work_is_the_diagonal() -> None:
    """Each device works m micro-batches of its own stage (1F1B); DualPipe's two stages."""
    assert _device_stage_work(DENSE[1], 128) == [[(d, 128.0)] for d in range(16)]
    dualpipe = Strategy(num_gpus=64, pp=4, pipeline_schedule="dualpipe")
    work = _device_stage_work(dualpipe, 8)
    assert [sorted(i for i, _ in row) for row in work] == [[0, 3], [1, 2], [1, 2], [0, 3]]
    assert all(w > 0 for row in work for _, w in row)
