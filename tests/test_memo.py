"""PerObjectMemo (perfcast.memo): identity fast path, equality fallback, same values as the
unmemoized function; the backend and collective memos built on it return identical times."""

from __future__ import annotations

from perfcast import memo as memo_module
from perfcast.catalog.systems import load_system
from perfcast.kernels.analytical import AnalyticalBackend
from perfcast.memo import PerObjectMemo
from perfcast.schedule import op_time


def test_memo_per_object_identity_and_equality():
    calls = []

    def power(base: tuple, exponent: int) -> int:
        calls.append((base, exponent))
        return sum(base) ** exponent

    memo = PerObjectMemo(power, maxsize=16)
    a, b = (1, 2), (1, 2)  # equal, built separately
    assert memo(a)(3) == 27 and memo(a)(3) == 27
    assert memo(a) is memo(b)  # an equal object finds the same table
    assert memo(b)(3) == 27 and len(calls) == 1
    assert memo((2, 2))(2) == 16 and memo(a)(2) == 9  # distinct objects, distinct tables
    assert len(calls) == 3
    memo.cache_clear()
    assert memo(a)(3) == 27 and len(calls) == 4


def test_memo_drops_tables_past_the_bound(monkeypatch):
    monkeypatch.setattr(memo_module, "MAX_OBJECTS", 2)
    memo = PerObjectMemo(lambda x, y: x * y, maxsize=4)
    for x in range(5):
        assert memo(x)(3) == 3 * x
    assert len(memo._tables) <= 2
    assert memo(1)(7) == 7


def test_backend_memo_matches_unmemoized_formula():
    system = load_system("dgx-h100", num_gpus=8)
    gpu = system.gpu
    backend = AnalyticalBackend()
    shapes = [(4096.0, 4096.0, 4096.0, 1.0), (8192.0, 1024.0, 7168.0, 8.0), (1.0, 2.0, 3.0, 1.0)]
    for m, n, k, batch in shapes:
        for grouped in (False, True):
            expected = backend._gemm_time_s(gpu, m, n, k, batch, "bf16", grouped)
            assert backend.gemm_time_s(gpu, m, n, k, batch, "bf16", grouped=grouped) == expected
            copy = gpu.model_copy()  # equal, not identical: same table, same value
            assert backend.gemm_time_s(copy, m, n, k, batch, "bf16", grouped=grouped) == expected
    faster = gpu.model_copy(update={"hbm_bandwidth_Bps": gpu.hbm_bandwidth_Bps * 2})
    assert backend.memory_bound_time_s(faster, 1e9) < backend.memory_bound_time_s(gpu, 1e9)
    assert backend.memory_bound_time_s(gpu, 1e9) == backend._memory_bound_time_s(gpu, 1e9)


def test_collective_memo_matches_unmemoized_formula():
    system = load_system("dgx-h100", num_gpus=64)
    other = load_system("dgx-a100", num_gpus=64)
    for sys_spec in (system, other, system):
        for size, stride in ((8, 1), (8, 8), (64, 1)):
            memoized = op_time._collective_memo(sys_spec)("all_reduce", 2.0**26, size, stride,
                                                          None)
            assert memoized == op_time._system_collective_s(sys_spec, "all_reduce", 2.0**26,
                                                            size, stride, None)
    assert (op_time._collective_memo(system)("all_reduce", 2.0**26, 64, 1, None)
            != op_time._collective_memo(other)("all_reduce", 2.0**26, 64, 1, None))


def test_group_sizes_follow_the_strategy_object():
    from perfcast.graph.ops import Group
    from perfcast.specs import Strategy

    first = Strategy(num_gpus=1024, tp=2, pp=8, ep=64)
    second = Strategy(num_gpus=1024, tp=8, pp=4, ep=8, placement_order="tp-cp-dp-ep-pp")
    for strategy in (first, first, second, first, second, second):
        expected = op_time._group_table(
            strategy.placement_order, strategy.tp, strategy.cp, strategy.dp, strategy.pp,
            strategy.expert_tp, strategy.ep, strategy.expert_dp, strategy.cp_a2a_size,
            strategy.tp2d_rows)
        for group in (Group.TP, Group.DP, Group.EP, Group.EDP, Group.PP):
            assert op_time.group_size_and_stride(group, strategy) == expected[group]
    assert op_time.group_size_and_stride(Group.TP, first) == (2, 1)
    assert op_time.group_size_and_stride(Group.TP, second) == (8, 1)


def test_last_pair_table_follows_identity():
    from perfcast.memo import LastPairTable

    pairs = LastPairTable()
    a, b = [1], [1]  # equal, distinct objects
    table = pairs.table(a, b)
    table["x"] = 1
    assert pairs.table(a, b) is table
    assert pairs.table(b, a) == {}  # another pair starts empty
    assert pairs.table(a, b) == {}  # and the old table is gone
    assert pairs.table(None, None) is not pairs.table(None, None)  # None is never a key


def test_stage_params_and_graphs_equal_the_equality_memo():
    from perfcast.catalog.models import load_model
    from perfcast.graph import param_sharding, stage
    from perfcast.specs import Strategy

    model = load_model("deepseek-v3")
    first = Strategy(num_gpus=1024, tp=2, pp=8, ep=64)
    second = Strategy(num_gpus=1024, tp=4, pp=4, ep=64)
    for strategy in (first, second, first, first.model_copy(), second):
        for s in range(strategy.pp):
            assert (param_sharding.stage_params(model, strategy, s)
                    == param_sharding._stage_params(model, strategy, s))
            assert stage.stage_graph(model, strategy, 4096, s) == stage._stage_graph(
                model, strategy, 4096, s)
    assert (param_sharding.stage_params(model, first, 0)
            != param_sharding.stage_params(model, second, 0))


def test_array_content_memo_finds_equal_arrays_and_shares_read_only_values():
    import numpy as np

    from perfcast.memo import ArrayContentMemo

    calls = []

    def double(x, factor):
        calls.append(1)
        return np.asarray(x) * factor

    memo = ArrayContentMemo(double, maxsize=2, max_elements=8)
    a = memo(np.arange(4.0).reshape(4, 1), 2.0)
    b = memo(np.arange(4.0).reshape(4, 1), 2.0)  # another array, the same numbers
    assert b is a and len(calls) == 1
    assert not a.flags.writeable  # shared: in-place changes would reach later callers
    memo(np.arange(4.0).reshape(1, 4), 2.0)  # same bytes, another shape: another key
    memo(np.arange(4.0).reshape(4, 1), 3.0)  # another scalar argument
    assert len(calls) == 3
    memo(np.arange(4.0).reshape(4, 1), 2.0)  # dropped: 2 keys kept, the oldest first out
    assert len(calls) == 4
    big = np.arange(9.0)
    assert memo(big, 2.0) is not memo(big, 2.0)  # over max_elements: not remembered
    assert len(calls) == 6
