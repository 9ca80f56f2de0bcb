"""Alpha-beta collectives: exact formulas, monotonicity, placement, measured bus bandwidth."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfcast.calibration.comm_alpha_beta import load_comm_alpha_beta
from perfcast.comm import (
    Collective,
    LinkTier,
    achievable_bandwidth_Bps,
    achievable_group_link,
    bus_bandwidth_Bps,
    collective_time_s,
    group_link,
    hierarchical_collective_time_s,
    num_domains,
    ranks_per_domain,
)
from perfcast.specs import GPUSpec, SystemSpec

GiB, MiB = 2**30, 2**20

# Hand-built hardware (no catalog): shared/reference/hardware_specs.csv and collectives.md.
A100 = GPUSpec(name="a100-test", display_name="A100 SXM4 80GB", vendor="nvidia",
               generation="ampere", peak_bf16_flops=312e12, hbm_capacity_bytes=80e9,
               hbm_bandwidth_Bps=2.039e12, source="test")
H100 = GPUSpec(name="h100-test", display_name="H100 SXM5", vendor="nvidia", generation="hopper",
               peak_bf16_flops=989e12, peak_fp8_flops=1979e12, hbm_capacity_bytes=80e9,
               hbm_bandwidth_Bps=3.35e12, source="test")
B200 = GPUSpec(name="b200-test", display_name="B200", vendor="nvidia", generation="blackwell",
               peak_bf16_flops=2250e12, peak_fp8_flops=4500e12, hbm_capacity_bytes=180e9,
               hbm_bandwidth_Bps=8e12, source="test")
MI300X = GPUSpec(name="mi300x-test", display_name="MI300X", vendor="amd", generation="cdna3",
                 peak_bf16_flops=1307.4e12, peak_fp8_flops=2614.9e12, hbm_capacity_bytes=192e9,
                 hbm_bandwidth_Bps=5.3e12, source="test")


def node_system(name: str, gpu: GPUSpec, up_GBps: float, nic_GBps: float) -> SystemSpec:
    """8 GPUs per node, the node is the scale-up domain; bandwidths per GPU, unidirectional."""
    return SystemSpec(name=name, gpu=gpu, gpus_per_node=8, scale_up_domain_gpus=8,
                      scale_up_bandwidth_Bps=up_GBps * 1e9, scale_out_bandwidth_Bps=nic_GBps * 1e9,
                      source="test")


DGX_A100 = node_system("dgx-a100", A100, 300, 25)      # NVLink 3; HDR 200 Gb/s per GPU
DGX_H100 = node_system("dgx-h100", H100, 450, 50)      # NVLink 4; NDR 400 Gb/s per GPU
A3_MEGA = node_system("a3-mega", H100, 450, 25)        # GCP A3 Mega: 8x200 Gb/s per node
P6_B200 = node_system("p6-b200", B200, 900, 50)        # AWS P6-B200: 8x400 Gb/s EFA per node
MI300X_NODE = node_system("mi300x", MI300X, 448, 50).model_copy(  # xGMI mesh, 64 GB/s per peer
    update={"scale_up_topology": "mesh", "scale_up_link_bandwidth_Bps": 64e9})

KINDS = list(Collective)
bandwidths = st.floats(min_value=1e8, max_value=1e13)


# --- exact formulas --------------------------------------------------------------------------

@pytest.mark.parametrize("kind, expected", [
    (Collective.ALL_REDUCE, 2 * 3 / 4 * 2.0 + 2 * 3 * 1e-5),
    (Collective.ALL_GATHER, 3 / 4 * 2.0 + 3 * 1e-5),
    (Collective.REDUCE_SCATTER, 3 / 4 * 2.0 + 3 * 1e-5),
    (Collective.ALL_TO_ALL, 3 / 4 * 2.0 + 3 * 1e-5),
    (Collective.SEND_RECV, 2.0 + 1e-5),
])
def test_formulas_exact_for_four_ranks(kind, expected):
    # S = 2 GB over B = 1 GB/s, alpha = 10 us, n = 4.
    assert collective_time_s(kind, 2e9, 4, 1e9, 1e-5) == pytest.approx(expected, rel=1e-12)


def test_two_rank_all_reduce_is_one_send_each_way():
    # n = 2: 2(n-1)/n = 1, i.e. S/B; two latency steps.
    assert collective_time_s("all_reduce", 1e9, 2, 1e9, 0.0) == pytest.approx(1.0)
    assert collective_time_s("all_reduce", 0.0, 2, 1e9, 5e-6) == pytest.approx(1e-5)


@pytest.mark.parametrize("kind", KINDS)
def test_one_rank_costs_nothing(kind):
    assert collective_time_s(kind, 1e9, 1, 1e9, 1e-5) == 0.0
    sizes = np.array([0.0, 1e3, 1e9])
    np.testing.assert_array_equal(collective_time_s(kind, sizes, 1, 1e9, 1e-5), 0.0)
    assert hierarchical_collective_time_s(kind, 1e9, DGX_H100, 1, 8) == 0.0


def test_bus_bandwidth_recovers_link_bandwidth():
    for kind in KINDS:
        t = collective_time_s(kind, 4e9, 8, 2e11, 0.0)
        assert bus_bandwidth_Bps(kind, 4e9, 8, t) == pytest.approx(2e11)


# --- monotonicity ----------------------------------------------------------------------------

@settings(max_examples=100, deadline=None)
@given(st.sampled_from(KINDS), st.floats(0, 1e11), st.integers(1, 4096), bandwidths, bandwidths,
       st.floats(0, 1e-4))
def test_more_bandwidth_is_never_slower(kind, size, n, b1, b2, latency):
    lo, hi = sorted((b1, b2))
    assert collective_time_s(kind, size, n, hi, latency) <= collective_time_s(
        kind, size, n, lo, latency)


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(KINDS), st.floats(0, 1e11), st.sampled_from([1, 2, 4, 8, 16, 64, 256]),
       st.sampled_from([1, 2, 4, 8, 16, 64]), st.sampled_from(["scale_up_bandwidth_Bps",
                                                              "scale_out_bandwidth_Bps"]),
       st.floats(1.0, 100.0))
def test_more_link_bandwidth_never_slows_a_placed_group(kind, size, n, stride, field, factor):
    faster = DGX_H100.model_copy(update={field: getattr(DGX_H100, field) * factor})
    assert hierarchical_collective_time_s(kind, size, faster, n, stride) <= (
        hierarchical_collective_time_s(kind, size, DGX_H100, n, stride) * (1 + 1e-12))


def test_array_inputs_match_a_scalar_loop():
    sizes = np.geomspace(1e3, 1e10, 12)
    groups = np.array([1, 2, 4, 8, 16, 32, 64, 128, 2, 4, 8, 16])
    strides = np.array([1, 1, 2, 1, 1, 8, 8, 1, 8, 4, 16, 2])
    for kind in KINDS:
        vector = hierarchical_collective_time_s(kind, sizes, DGX_H100, groups, strides)
        loop = [hierarchical_collective_time_s(kind, s, DGX_H100, g, st_)
                for s, g, st_ in zip(sizes, groups, strides, strict=True)]
        np.testing.assert_allclose(vector, loop, rtol=1e-12)


# --- placement -------------------------------------------------------------------------------

def test_tp8_on_an_8_gpu_node_uses_scale_up():
    assert group_link(DGX_H100, 8, 1) == (450e9, DGX_H100.scale_up_latency_s)
    assert ranks_per_domain(DGX_H100, 8, 1) == 8 and num_domains(DGX_H100, 8, 1) == 1


def test_dp_across_nodes_uses_scale_out():
    # tp = 8, cp = 1, dp = 4: the DP group has stride 8, one rank per node.
    assert group_link(DGX_H100, 4, 8) == (50e9, DGX_H100.scale_out_latency_s)
    assert ranks_per_domain(DGX_H100, 4, 8) == 1 and num_domains(DGX_H100, 4, 8) == 4
    # tp = 2, dp = 8: stride 2, four ranks per node over two nodes.
    assert group_link(DGX_H100, 8, 2)[0] == 50e9
    assert ranks_per_domain(DGX_H100, 8, 2) == 4 and num_domains(DGX_H100, 8, 2) == 2
    # tp = 2, dp = 4 fits in one node.
    assert group_link(DGX_H100, 4, 2)[0] == 450e9


def test_group_link_is_array_friendly():
    bandwidth, latency = group_link(DGX_H100, np.array([8, 16, 2, 4]), np.array([1, 1, 8, 2]))
    np.testing.assert_array_equal(bandwidth, [450e9, 50e9, 50e9, 450e9])
    np.testing.assert_array_equal(latency > DGX_H100.scale_up_latency_s, [0, 1, 1, 0])


def test_nvl72_domain_keeps_tp_and_dp_inside():
    nvl72 = DGX_H100.model_copy(update={"scale_up_domain_gpus": 72, "gpus_per_node": 4})
    assert group_link(nvl72, 8, 8)[0] == nvl72.scale_up_bandwidth_Bps  # 64 GPUs: inside
    assert group_link(nvl72, 16, 8)[0] == nvl72.scale_out_bandwidth_Bps  # 128: across


def test_achievable_link_applies_tier_efficiency():
    cal = load_comm_alpha_beta()
    bandwidth, _ = achievable_group_link(DGX_H100, 8, 1)
    assert bandwidth == pytest.approx(450e9 * cal.scale_up_efficiency("hopper"))
    assert achievable_bandwidth_Bps(DGX_H100, LinkTier.SCALE_OUT) == pytest.approx(
        50e9 * cal.scale_out_efficiency)


@pytest.mark.parametrize("kind", KINDS)
def test_hierarchical_reduces_to_flat_ring_at_the_extremes(kind):
    up, up_lat = achievable_group_link(DGX_H100, 8, 1)
    assert hierarchical_collective_time_s(kind, 1e9, DGX_H100, 8, 1) == pytest.approx(
        collective_time_s(kind, 1e9, 8, up, up_lat))
    out, out_lat = achievable_group_link(DGX_H100, 16, 8)  # one rank per node
    assert hierarchical_collective_time_s(kind, 1e9, DGX_H100, 16, 8) == pytest.approx(
        collective_time_s(kind, 1e9, 16, out, out_lat))


# --- measured bus bandwidth (shared/reference/collectives.md) --------------------------------

# (section, system, collective, ranks, bytes, measured busbw GB/s). Ring numbers only (NVLS
# off); multi-node rows are NCCL's default (hierarchical) algorithm. Bound: 25%.
MEASURED_BUSBW = [
    ("5a 8xA100 256MiB", DGX_A100, "all_reduce", 8, 256 * MiB, 194.07),
    ("5a 8xA100 1GiB", DGX_A100, "all_reduce", 8, 1 * GiB, 229.04),
    ("5a 8xA100 16GiB", DGX_A100, "all_reduce", 8, 16 * GiB, 234.89),
    ("5b 8xH100 ring (nccl#1455)", DGX_H100, "all_reduce", 8, 8 * GiB, 367.0),
    ("5b 8xH200 ring 16GiB", DGX_H100, "all_reduce", 8, 16 * GiB, 367.2),
    ("5b 8xH200 all-gather 16GiB", DGX_H100, "all_gather", 8, 16 * GiB, 361.4),
    ("5b 8xH200 reduce-scatter 16GiB", DGX_H100, "reduce_scatter", 8, 16 * GiB, 362.9),
    ("5c 8xB200 ring 8GiB", P6_B200, "all_reduce", 8, 8 * GiB, 682.2),
    ("6a 4x8 B200 EFA 1GiB", P6_B200, "all_reduce", 32, 1 * GiB, 361.99),
    ("6a 4x8 B200 EFA 4GiB", P6_B200, "all_reduce", 32, 4 * GiB, 377.34),
    ("6a 4x8 B200 EFA 16GiB", P6_B200, "all_reduce", 32, 16 * GiB, 381.80),
    ("6b 2x8 H100 TCPXO 1GiB", A3_MEGA, "all_reduce", 16, 1 * GiB, 297.86),
    ("6b 2x8 H100 TCPXO 8GiB", A3_MEGA, "all_reduce", 16, 8 * GiB, 338.82),
]


@pytest.mark.parametrize("label, system, kind, ranks, size, measured_GBps", MEASURED_BUSBW,
                         ids=[row[0] for row in MEASURED_BUSBW])
def test_predicted_busbw_within_25_percent_of_measured(label, system, kind, ranks, size,
                                                       measured_GBps):
    time_s = hierarchical_collective_time_s(kind, size, system, ranks, 1)
    predicted = bus_bandwidth_Bps(kind, size, ranks, time_s) / 1e9
    assert predicted == pytest.approx(measured_GBps, rel=0.25), label


def test_multi_node_all_reduce_is_not_one_nic_wide():
    # A flat ring over per-GPU NICs would give busbw = 25 GB/s x 0.82 on 2x8 H100; NCCL's
    # hierarchical algorithm measures 338.8 (collectives.md 6b). Guard the hierarchy.
    time_s = hierarchical_collective_time_s("all_reduce", 8 * GiB, A3_MEGA, 16, 1)
    assert bus_bandwidth_Bps("all_reduce", 8 * GiB, 16, time_s) > 10 * 25e9


def test_mi300x_two_gpu_all_reduce_is_link_starved():
    # collectives.md 5e: 47.7 GB/s busbw with 2 GPUs (one 64 GB/s link per pair) at 4 GiB.
    time_s = hierarchical_collective_time_s("all_reduce", 4 * GiB, MI300X_NODE, 2, 1)
    predicted = bus_bandwidth_Bps("all_reduce", 4 * GiB, 2, time_s) / 1e9
    assert predicted == pytest.approx(47.7, rel=0.25)


# --- calibration -----------------------------------------------------------------------------

def test_calibration_has_sources_and_a_default():
    cal = load_comm_alpha_beta()
    assert 0.7 <= cal.scale_up_efficiency("hopper") <= 0.85
    assert 0.7 <= cal.scale_out_efficiency <= 0.95
    assert cal.uses_default("volta") and not cal.uses_default("ampere")
    assert cal.scale_up_efficiency("volta") == cal.scale_up["default"].efficiency
    assert all("section" in entry.source for entry in cal.scale_up.values())
