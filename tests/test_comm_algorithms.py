"""Collective algorithms, NCCL protocols, default selection, topology tiers, placement order.

The measured table holds the issue's acceptance cases (shared/reference/collectives.md):
busbw within 15% for 8-GPU H100/H200/B200 all-reduce and all-gather, multi-node all-reduce and
MI300X at 2 vs 8 GPUs; small-message latency within 2x.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfcast.catalog.systems import load_system
from perfcast.comm import (
    Algorithm,
    Collective,
    bus_bandwidth_Bps,
    estimate_collective,
    group_collective_time_s,
    group_topology,
    supported_algorithms,
)
from perfcast.comm.placement import dimension_strides
from perfcast.errors import InputError
from perfcast.graph.ops import Group
from perfcast.schedule.op_time import group_size_and_stride
from perfcast.specs.strategy import Strategy
from test_comm_alpha_beta import A3_MEGA, DGX_A100, MI300X_NODE, P6_B200

KiB, MiB, GiB = 2**10, 2**20, 2**30
DGX_H100 = load_system("dgx-h100")
DGX_H200 = load_system("dgx-h200")
DGX_B200 = load_system("dgx-b200")
MI300X = load_system("mi300x-8")
NVLS = {"nvls": True}
A3_MEGA_NVLS = A3_MEGA.model_copy(update=NVLS)   # GCP A3 Mega: H100, NVSwitch gen3
P6_B200_NVLS = P6_B200.model_copy(update=NVLS)   # AWS P6-B200: NVSwitch gen4

# (label, system, collective, GPUs, bytes, measured busbw GB/s), NCCL default algorithm.
MEASURED_BUSBW = [
    ("5b 8xH100 NVLS all-reduce peak (nccl-tests #212)", DGX_H100, "all_reduce", 8, 16 * GiB,
     480.0),
    ("5b 8xH200 all-reduce 16GiB", DGX_H200, "all_reduce", 8, 16 * GiB, 482.26),
    ("5b 8xH200 all-reduce 1GiB", DGX_H200, "all_reduce", 8, 1 * GiB, 463.58),
    ("5b 8xH200 all-reduce 256MiB", DGX_H200, "all_reduce", 8, 256 * MiB, 436.15),
    ("5b 8xH200 all-gather 16GiB", DGX_H200, "all_gather", 8, 16 * GiB, 361.4),
    ("5b 8xH200 reduce-scatter 16GiB", DGX_H200, "reduce_scatter", 8, 16 * GiB, 362.9),
    ("5b 8xH100 all-gather (H200 NVLink 4 value)", DGX_H100, "all_gather", 8, 16 * GiB, 361.4),
    ("5b 5xH200 NVLS 8GiB", DGX_H200, "all_reduce", 5, 8 * GiB, 414.2),
    ("5b 4xH200 ring 8GiB", DGX_H200, "all_reduce", 4, 8 * GiB, 363.3),
    ("5c 8xB200 all-reduce 16GiB", DGX_B200, "all_reduce", 8, 16 * GiB, 845.67),
    ("5c 8xB200 all-reduce 1GiB", DGX_B200, "all_reduce", 8, 1 * GiB, 723.34),
    ("5c 5xB200 ring 8GiB", DGX_B200, "all_reduce", 5, 8 * GiB, 677.8),
    ("5c 8xB200 all-gather (ring-only 8GiB value)", DGX_B200, "all_gather", 8, 8 * GiB, 682.2),
    ("5a 8xA100 all-reduce 16GiB", DGX_A100, "all_reduce", 8, 16 * GiB, 234.89),
    ("5e 8xMI300X all-reduce 4GiB", MI300X, "all_reduce", 8, 4 * GiB, 312.9),
    ("5e 2xMI300X all-reduce 4GiB", MI300X, "all_reduce", 2, 4 * GiB, 47.7),
    ("6a 4x8 B200 EFA 4GiB", P6_B200_NVLS, "all_reduce", 32, 4 * GiB, 377.34),
    ("6a 4x8 B200 EFA 16GiB", P6_B200_NVLS, "all_reduce", 32, 16 * GiB, 381.80),
    ("6b 2x8 H100 TCPXO 1GiB", A3_MEGA_NVLS, "all_reduce", 16, 1 * GiB, 297.86),
    ("6b 2x8 H100 TCPXO 8GiB", A3_MEGA_NVLS, "all_reduce", 16, 8 * GiB, 338.82),
]
BUSBW_BOUND = 0.15


@pytest.mark.parametrize("label, system, kind, gpus, size, measured_GBps", MEASURED_BUSBW,
                         ids=[row[0] for row in MEASURED_BUSBW])
def test_busbw_within_15_percent_of_measured(label, system, kind, gpus, size, measured_GBps):
    time_s = group_collective_time_s(kind, size, system, gpus)
    predicted = bus_bandwidth_Bps(kind, size, gpus, time_s) / 1e9
    assert predicted == pytest.approx(measured_GBps, rel=BUSBW_BOUND), (label, predicted)


def test_mi300x_two_gpus_are_six_times_slower_than_eight():
    # collectives.md 5e: 312.9 vs 47.7 GB/s busbw (6.5x): one 64 GB/s link per pair.
    busbw = {n: bus_bandwidth_Bps("all_reduce", 4 * GiB, n, group_collective_time_s(
        "all_reduce", 4 * GiB, MI300X, n)) for n in (2, 8)}
    assert 5.5 <= busbw[8] / busbw[2] <= 7.5


# (label, system, GPUs, measured small-message all-reduce time in seconds)
MEASURED_LATENCY = [
    ("5a 8xA100 32KiB all_reduce_perf", DGX_A100, 8, 32 * KiB, 43.83e-6),
    ("5b 8xH200 32KiB (busbw 1.44)", DGX_H200, 8, 32 * KiB, 32 * KiB * 1.75 / 1.44e9),
    ("5c 8xB200 32KiB (busbw 1.20)", DGX_B200, 8, 32 * KiB, 32 * KiB * 1.75 / 1.20e9),
    ("6c 2x8 H20 NDR 1KB (NVLSTree)", DGX_H100, 16, 1024, 46.5e-6),
]


@pytest.mark.parametrize("label, system, gpus, size, measured_s", MEASURED_LATENCY,
                         ids=[row[0] for row in MEASURED_LATENCY])
def test_small_message_latency_within_2x(label, system, gpus, size, measured_s):
    predicted = group_collective_time_s("all_reduce", size, system, gpus)
    assert measured_s / 2 <= predicted <= 2 * measured_s, (label, predicted)


# --- default selection (what NCCL picks) ------------------------------------------------------

def test_h200_picks_ring_ll_for_small_and_nvls_for_large():
    # collectives.md 5b: "On H200 NCCL uses Ring/LL up to 1 MiB and NVLS/SIMPLE from 2 MiB".
    small = estimate_collective("all_reduce", 256 * KiB, DGX_H200, 8)
    large = estimate_collective("all_reduce", 64 * MiB, DGX_H200, 8)
    assert (small.algorithm, small.protocol.value) == (Algorithm.RING, "ll")
    assert (large.algorithm, large.protocol.value) == (Algorithm.NVLS, "simple")


@pytest.mark.parametrize("system, gpus, expected", [
    (DGX_H200, 4, Algorithm.RING), (DGX_H200, 5, Algorithm.NVLS),   # 5b: NVLS above 4 GPUs
    (DGX_B200, 5, Algorithm.RING), (DGX_B200, 6, Algorithm.NVLS),   # 5c table
    (DGX_A100, 8, Algorithm.RING), (MI300X, 8, Algorithm.RING),     # no NVLS
])
def test_nvls_only_where_nccl_enables_it(system, gpus, expected):
    assert estimate_collective("all_reduce", 8 * GiB, system, gpus).algorithm is expected


def test_multi_node_small_all_reduce_uses_a_tree():
    assert estimate_collective("all_reduce", 1024, DGX_A100, 64).algorithm is Algorithm.TREE


def test_forcing_an_algorithm_and_rejecting_unsupported_ones():
    ring = estimate_collective("all_reduce", GiB, DGX_H100, 8, algorithm="ring")
    assert ring.algorithm is Algorithm.RING
    assert ring.busbw_Bps / 1e9 == pytest.approx(367.2, rel=0.05)  # 5b NVLS off
    with pytest.raises(InputError, match="supported: ring, hierarchical"):
        estimate_collective("all_gather", GiB, DGX_H100, 8, algorithm="nvls")
    with pytest.raises(InputError, match="cannot run"):
        estimate_collective("all_reduce", GiB, DGX_A100, 8, algorithm="nvls")
    assert set(supported_algorithms(Collective.ALL_TO_ALL)) == {
        Algorithm.HIERARCHICAL, Algorithm.DIRECT, Algorithm.PXN}


def test_estimate_reports_tiers_and_bandwidths():
    e = estimate_collective("all_reduce", GiB, DGX_H100, 16)
    assert e.tiers_crossed == ("scale_up", "scale_out")
    assert (e.ranks_per_domain, e.num_domains) == (8, 2)
    assert e.algbw_Bps == pytest.approx(GiB / e.time_s)
    assert e.busbw_Bps == pytest.approx(e.algbw_Bps * 2 * 15 / 16)
    assert estimate_collective("all_reduce", GiB, DGX_H100, 16, stride=8).tiers_crossed == (
        "scale_out",)
    assert set(e.to_dict()) >= {"time_s", "algbw_GBps", "busbw_GBps", "algorithm"}


# --- topology tiers ---------------------------------------------------------------------------

def test_mesh_group_drives_r_minus_1_links():
    for ranks, links in ((2, 1), (4, 3), (8, 7)):
        topo = group_topology(MI300X_NODE, ranks, 1)
        assert topo.scale_up_Bps == pytest.approx(
            links * 64e9 * group_topology(MI300X_NODE, 8, 1).scale_up_Bps / 448e9)


def test_pod_oversubscription_slows_groups_that_leave_the_pod():
    pods = DGX_H100.model_copy(update={"pod_gpus": 256, "pod_oversubscription": 2.0})
    inside = group_collective_time_s("all_reduce", GiB, pods, 32, 8)     # spans 256 GPUs
    across = group_collective_time_s("all_reduce", GiB, pods, 64, 8)     # spans 512 GPUs
    flat = group_collective_time_s("all_reduce", GiB, DGX_H100, 64, 8)
    assert inside == pytest.approx(group_collective_time_s("all_reduce", GiB, DGX_H100, 32, 8))
    assert across > 1.5 * flat


KINDS = list(Collective)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(KINDS), st.floats(0, 1e10), st.sampled_from([2, 4, 8, 16, 64, 256]),
       st.sampled_from([1, 2, 8]), st.sampled_from(["scale_up_bandwidth_Bps",
                                                     "scale_out_bandwidth_Bps"]),
       st.floats(1.0, 50.0), st.sampled_from([DGX_H100, DGX_A100, MI300X, DGX_B200]))
def test_more_bandwidth_is_never_slower(kind, size, n, stride, field, factor, system):
    faster = system.model_copy(update={field: getattr(system, field) * factor})
    assert group_collective_time_s(kind, size, faster, n, stride) <= (
        group_collective_time_s(kind, size, system, n, stride) * (1 + 1e-12))


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(KINDS), st.floats(0, 1e10), st.sampled_from([2, 4, 8]),
       st.sampled_from([DGX_H100, DGX_A100, DGX_B200]))
def test_group_inside_a_node_is_never_slower_than_spread_over_nodes(kind, size, n, system):
    inside = group_collective_time_s(kind, size, system, n, 1)
    spread = group_collective_time_s(kind, size, system, n, 8)  # one rank per node
    assert inside <= spread * (1 + 1e-12)


def test_group_time_is_array_friendly():
    sizes = np.geomspace(1e3, 1e10, 6)
    groups = np.array([2, 8, 16, 64, 8, 4])
    strides = np.array([1, 1, 1, 8, 2, 8])
    for kind in KINDS:
        vector = group_collective_time_s(kind, sizes, DGX_H100, groups, strides)
        loop = [group_collective_time_s(kind, s, DGX_H100, g, st_)
                for s, g, st_ in zip(sizes, groups, strides, strict=True)]
        np.testing.assert_allclose(vector, loop, rtol=1e-12)
        assert group_collective_time_s(kind, 1e9, DGX_H100, 1) == 0.0


# --- placement order --------------------------------------------------------------------------

def test_dimension_strides_follow_the_order():
    sizes = {"tp": 8, "cp": 2, "dp": 4, "pp": 2}
    assert dimension_strides("tp-cp-ep-dp-pp", sizes) == {
        "tp": 1, "cp": 8, "ep": 16, "dp": 16, "pp": 64}
    assert dimension_strides("dp-tp-cp-ep-pp", sizes)["tp"] == 4


def test_placement_order_moves_groups_between_tiers():
    default = Strategy(num_gpus=64, tp=8, cp=1)
    dp_inner = Strategy(num_gpus=64, tp=8, placement_order="dp-tp-cp-ep-pp")
    assert group_size_and_stride(Group.TP, default) == (8, 1)
    assert group_size_and_stride(Group.DP, default) == (8, 8)
    assert group_size_and_stride(Group.TP, dp_inner) == (8, 8)
    assert group_size_and_stride(Group.DP, dp_inner) == (8, 1)
    with pytest.raises(ValueError, match="placement_order"):
        Strategy(num_gpus=8, placement_order="tp-dp-pp")
