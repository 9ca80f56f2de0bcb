"""The tiers one placed group crosses and the bandwidth and latency it gets on each.

A group of n ranks placed r per scale-up domain over k domains (``comm.placement``) sees:

* scale-up (NVLink / xGMI / PCIe) at the per-GPU achievable bandwidth
  link × efficiency (``calibration/comm_alpha_beta.yaml``). On a switch (NVSwitch, PCIe) every
  GPU reaches any peer at its full per-GPU bandwidth. On AMD's fully connected xGMI mesh one
  link joins each pair of GPUs, so a group with r members in the domain drives only r−1 links:
  min(aggregate, (r−1)·link) (shared/reference/collectives.md §5e: 8×MI300X all-reduce busbw
  312.9 GB/s vs 47.7 GB/s on 2 GPUs, "only one 64 GB/s link joins any pair").
* scale-out (NICs) at the per-GPU NIC share × efficiency: every member drives its own NIC share
  (rail-aligned NICs). ``SystemSpec.scale_out_bandwidth_Bps`` is the node's NIC bandwidth over
  its GPUs, so with every group of the run communicating at once (all TP, or all DP, groups in
  step) r members of a group get r shares of their node's NICs — the NICs its members use.
* the optional third tier: a group spanning more than ``pod_gpus`` GPUs leaves its pod, and its
  scale-out traffic sees the pod uplinks: bandwidth / ``pod_oversubscription`` and
  ``pod_latency_s`` per hop (a fat tree with oversubscribed spine; NVIDIA DGX SuperPOD
  reference architecture names the scalable unit as that pod).

All quantities broadcast as numpy arrays over group size and stride.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from perfcast.arrays import Floats
from perfcast.calibration.comm_alpha_beta import CommAlphaBetaCalibration, load_comm_alpha_beta
from perfcast.comm.placement import group_span_gpus, num_domains, ranks_per_domain
from perfcast.specs.hardware import SystemSpec


@dataclass(frozen=True)
class GroupTopology:
    """Where one group sits and what its links deliver (per GPU, unidirectional, achievable)."""

    num_ranks: Floats
    """n: ranks in the group."""
    ranks_per_domain: Floats
    """r: the group's ranks inside one scale-up domain."""
    num_domains: Floats
    """k: scale-up domains the group spans."""
    scale_up_Bps: Floats
    """Achievable scale-up bandwidth per GPU for this group (mesh: the r−1 links it drives)."""
    scale_out_Bps: Floats
    """Achievable NIC bandwidth per GPU (divided by the pod oversubscription when it leaves a pod)."""
    scale_up_latency_s: Floats
    scale_out_latency_s: Floats
    crosses_pod: Floats
    """True where the group spans more GPUs than one pod (third tier)."""
    nvlink_Bps: float
    """Nominal per-GPU scale-up link bandwidth (NVLS efficiency applies to it)."""

    @property
    def multi_domain(self) -> Floats:
        """True where the group leaves its scale-up domain."""
        return np.asarray(self.num_domains) > 1


def scale_up_link_Bps(system: SystemSpec, ranks_in_domain: Floats) -> Floats:
    """Nominal scale-up bandwidth per GPU a group with ``ranks_in_domain`` members uses, B/s:
    the per-GPU bandwidth on a switch; min(aggregate, (r−1)·per-peer link) on a mesh
    (collectives.md §5e, §8 point 5)."""
    r = np.asarray(ranks_in_domain, dtype=float)
    if system.scale_up_topology != "mesh" or system.scale_up_link_bandwidth_Bps is None:
        return np.full_like(r, system.scale_up_bandwidth_Bps)[()]
    peers = np.maximum(r - 1.0, 1.0)
    return np.minimum(system.scale_up_bandwidth_Bps, peers * system.scale_up_link_bandwidth_Bps)[()]


def group_topology(
    system: SystemSpec,
    group_size: Floats,
    stride: Floats,
    calibration: CommAlphaBetaCalibration | None = None,
) -> GroupTopology:
    """The ``GroupTopology`` of ``group_size`` ranks spaced ``stride`` apart on ``system``."""
    cal = calibration or load_comm_alpha_beta()
    n = np.asarray(group_size, dtype=float)
    r = np.asarray(ranks_per_domain(system, n, stride), dtype=float)
    k = np.asarray(num_domains(system, n, stride), dtype=float)
    up = scale_up_link_Bps(system, r) * cal.scale_up_efficiency(system.gpu.generation)
    out: Floats = system.scale_out_bandwidth_Bps * cal.scale_out_efficiency
    out_latency = np.full_like(n, system.scale_out_latency_s)
    crosses_pod = np.zeros_like(n, dtype=bool)
    if system.pod_gpus is not None:
        crosses_pod = (group_span_gpus(n, stride) > system.pod_gpus) & (k > 1)
        pod_latency = (system.pod_latency_s if system.pod_latency_s is not None
                       else system.scale_out_latency_s)
        out = np.where(crosses_pod, out / system.pod_oversubscription, out)
        out_latency = np.where(crosses_pod, pod_latency, out_latency)
    return GroupTopology(
        num_ranks=n[()], ranks_per_domain=r[()], num_domains=k[()],
        scale_up_Bps=np.asarray(up)[()], scale_out_Bps=np.asarray(out, dtype=float)[()],
        scale_up_latency_s=system.scale_up_latency_s, scale_out_latency_s=out_latency[()],
        crosses_pod=crosses_pod[()], nvlink_Bps=system.scale_up_bandwidth_Bps,
    )


def tiers_crossed(topology: GroupTopology) -> tuple[str, ...]:
    """Names of the tiers a (scalar) group's traffic uses: 'scale_up', 'scale_out', 'pod'."""
    tiers = []
    if float(topology.ranks_per_domain) > 1:
        tiers.append("scale_up")
    if float(topology.num_domains) > 1:
        tiers.append("scale_out")
    if bool(topology.crosses_pod):
        tiers.append("pod")
    return tuple(tiers)
