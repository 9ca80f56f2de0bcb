"""Where a process group's ranks sit on the system, and which link tier carries its traffic.

Ranks are numbered by a placement order of named parallel dimensions, innermost first
(Megatron-LM ``parallel_state.RankGenerator``: default order 'tp-cp-ep-dp-pp'), and consecutive
ranks fill a scale-up domain (NVLink/xGMI) before the next one. A dimension's ranks are spaced
by the product of the sizes of the dimensions inside it (``dimension_strides``), so with the
default order a process group is ``group_size`` ranks spaced ``stride`` apart:

========= ========== ====================
group     group_size stride
========= ========== ====================
TP        tp         1
CP        cp         tp
DP        dp         tp·cp
PP        pp         tp·cp·dp
========= ========== ====================

A group over several dimensions (e.g. dp·cp for gradient reduction) is one strided group when
they are adjacent in the order; otherwise it is treated as strided by its innermost dimension
(an approximation: its ranks per domain are counted as if it were one strided group).

A group spans ``group_size·stride`` consecutive ranks; it stays inside one scale-up domain of
D = ``SystemSpec.scale_up_domain_gpus`` GPUs iff group_size·stride ≤ D (domains aligned at
multiples of D, sizes powers of two). Otherwise its ranks sit in k domains, r per domain
(``ranks_per_domain``, ``num_domains``): the hierarchical view of ``comm.hierarchical``.

All functions are array-friendly in ``group_size`` and ``stride``.
"""

from __future__ import annotations

from enum import StrEnum

import numpy as np

from perfcast.arrays import Floats
from perfcast.calibration.comm_alpha_beta import CommAlphaBetaCalibration, load_comm_alpha_beta
from perfcast.specs.hardware import SystemSpec


class LinkTier(StrEnum):
    """Network tiers: the scale-up domain (NVLink/xGMI) and the scale-out network (NICs)."""

    SCALE_UP = "scale_up"
    SCALE_OUT = "scale_out"


def dimension_strides(order: str, sizes: dict[str, int]) -> dict[str, int]:
    """Rank distance between neighbours of each dimension: the product of the sizes of the
    dimensions before it in ``order`` ('-' separated, innermost first; Megatron-LM
    ``RankGenerator``). Dimensions missing from ``sizes`` have size 1."""
    strides, stride = {}, 1
    for dim in order.split("-"):
        strides[dim] = stride
        stride = stride * sizes.get(dim, 1)  # not *=: numpy arrays would alias
    return strides


def group_span_gpus(group_size: Floats, stride: Floats) -> Floats:
    """Consecutive ranks a group of ``group_size`` ranks spaced ``stride`` apart covers."""
    return np.multiply(group_size, stride)


def within_scale_up(system: SystemSpec, group_size: Floats, stride: Floats) -> Floats:
    """True where the group fits in one scale-up domain: group_size·stride ≤ D."""
    return group_span_gpus(group_size, stride) <= system.scale_up_domain_gpus


def group_link(
    system: SystemSpec, group_size: Floats, stride: Floats
) -> tuple[Floats, Floats]:
    """(bandwidth_Bps, latency_s) of the links a flat ring over the group runs on.

    Inside one scale-up domain: the per-GPU unidirectional scale-up bandwidth and latency.
    Otherwise the ring crosses the scale-out network, each rank through its own NIC: the
    per-GPU NIC bandwidth and the scale-out latency. This flat view is exact for groups with
    one rank per domain (DP and PP across nodes at tp·cp = domain size); groups with several
    ranks per domain are better served by ``comm.hierarchical``. Nominal link values: apply
    ``achievable_group_link`` for protocol efficiency.
    """
    inside = within_scale_up(system, group_size, stride)
    bandwidth = np.where(inside, system.scale_up_bandwidth_Bps, system.scale_out_bandwidth_Bps)
    latency = np.where(inside, system.scale_up_latency_s, system.scale_out_latency_s)
    return bandwidth[()], latency[()]


def tier_efficiency(
    system: SystemSpec, tier: LinkTier, calibration: CommAlphaBetaCalibration | None = None
) -> float:
    """Achievable fraction of ``tier``'s link bandwidth (``calibration/comm_alpha_beta.yaml``;
    the scale-up value is looked up by the system's GPU generation)."""
    cal = calibration or load_comm_alpha_beta()
    if tier is LinkTier.SCALE_UP:
        return cal.scale_up_efficiency(system.gpu.generation)
    return cal.scale_out_efficiency


def achievable_bandwidth_Bps(
    system: SystemSpec, tier: LinkTier, calibration: CommAlphaBetaCalibration | None = None
) -> float:
    """Per-GPU unidirectional bandwidth a ring achieves on ``tier``: link × efficiency, B/s."""
    link = (system.scale_up_bandwidth_Bps if tier is LinkTier.SCALE_UP
            else system.scale_out_bandwidth_Bps)
    return link * tier_efficiency(system, tier, calibration)


def achievable_group_link(
    system: SystemSpec,
    group_size: Floats,
    stride: Floats,
    calibration: CommAlphaBetaCalibration | None = None,
) -> tuple[Floats, Floats]:
    """``group_link`` with the bandwidth scaled by its tier's protocol efficiency."""
    inside = within_scale_up(system, group_size, stride)
    bandwidth = np.where(
        inside,
        achievable_bandwidth_Bps(system, LinkTier.SCALE_UP, calibration),
        achievable_bandwidth_Bps(system, LinkTier.SCALE_OUT, calibration),
    )
    return bandwidth[()], group_link(system, group_size, stride)[1]


def ranks_per_domain(system: SystemSpec, group_size: Floats, stride: Floats) -> Floats:
    """r: the group's ranks inside one scale-up domain, clip(D // stride, 1, group_size).

    A stride of at least D puts every rank in its own domain (r = 1); a group that fits in
    one domain has r = group_size.
    """
    per_domain = np.floor_divide(system.scale_up_domain_gpus, stride)
    return np.clip(per_domain, 1, group_size)


def num_domains(system: SystemSpec, group_size: Floats, stride: Floats) -> Floats:
    """k: scale-up domains the group spans, ceil(group_size / r); 1 when it fits in one."""
    r = ranks_per_domain(system, group_size, stride)
    return np.ceil(np.divide(group_size, r))
