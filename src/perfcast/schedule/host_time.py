"""Host (CPU) time to issue a layer's GPU work, and when it sets the pace instead of the GPU.

The host enqueues kernels asynchronously: while it issues them faster than the GPU runs them it
runs ahead, and the GPU stream alone sets the time. When a pass issues more host work than GPU
work (small kernels: a small model, micro-batch 1-2, small experts) the GPU waits for launches
and the pass takes the host's time. A blocking device-to-host read (a *sync*) empties the queue:
the host cannot run ahead across it, so the time of the pass is the sum over the segments
between syncs of max(GPU seconds, host seconds), plus the sync's own latency (PyTorch CUDA
semantics: kernels are asynchronous, ``.cpu()``/``.item()`` synchronize; NVIDIA "Getting Started
with CUDA Graphs", 2019: launch overhead is exposed when kernels are short).

Host seconds of a segment = eager ops × ``host_s_per_op`` + captured regions × ``graph_launch_s``
(``calibration/host_launch.yaml``): a CUDA graph (``Strategy.cuda_graphs``; Megatron-Core
``--cuda-graph-impl``/``--cuda-graph-scope``, frameworks.md §1.5) replays all its kernels from
one host call. Dropless MoE routing reads the token count per expert back to the host once per
MoE layer forward (Megatron-Core ``MoEAlltoAllTokenDispatcher``: all-to-all splits and grouped
GEMM sizes live on the host); a captured MoE scope needs static shapes (padded to capacity,
frameworks.md §1.5), so it has no sync.

Op scopes follow the graph's op names (``graph.layer``): the attention block (projections, core
attention, rotary, CP exchange) and the MoE block (router, permutation, experts, EP
all-to-all); the rest (norms, residual adds, dense MLP, TP collectives) is captured only by
``full``. Array-friendly: GPU seconds may be numpy arrays.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum
from functools import lru_cache

import numpy as np

from perfcast.arrays import Floats
from perfcast.calibration.host_launch import HostLaunchCalibration


class HostScope(str, Enum):
    """Which CUDA-graph scope an op belongs to."""

    ATTENTION = "attention"
    MOE = "moe"
    OTHER = "other"


_SCOPE_PREFIXES = (
    (HostScope.MOE, ("router", "moe_", "expert_", "shared_expert_", "ep_")),
    (HostScope.ATTENTION, ("qkv_", "q_", "kv_", "attention", "out_proj", "rotary", "cp_")),
)


@lru_cache(maxsize=1024)
def op_scope(name: str) -> HostScope:
    """Scope of the graph op named ``name`` (its backward and FP8-cast ops share the prefix).
    Memoized: a pure look-up over a few dozen op names, asked for every op of every pass."""
    for scope, prefixes in _SCOPE_PREFIXES:
        if name.startswith(prefixes):
            return scope
    return HostScope.OTHER


@lru_cache(maxsize=8)
def captured_scopes(cuda_graphs: str) -> frozenset[HostScope]:
    """Scopes a ``--cuda-graphs`` choice captures: none, attention, moe, or full (all)."""
    return {
        "none": frozenset(),
        "attention": frozenset({HostScope.ATTENTION}),
        "moe": frozenset({HostScope.MOE}),
        "full": frozenset(HostScope),
    }[cuda_graphs]


def host_issue_s(num_eager_ops: Floats, num_graph_launches: Floats,
                 calib: HostLaunchCalibration) -> Floats:
    """Host seconds to issue a segment: n_eager·t_op + n_graphs·t_graph (module docstring)."""
    return (np.multiply(num_eager_ops, calib.host_s_per_op.value)
            + np.multiply(num_graph_launches, calib.graph_launch_s.value))


def segment_time_s(gpu_s: Floats, host_s: Floats) -> Floats:
    """Seconds of a segment with no sync inside: max(GPU stream, host issue) — the host runs
    ahead of the GPU when it is faster, else the GPU waits for each launch."""
    return np.maximum(gpu_s, host_s)


def sync_time_s(num_syncs: Floats, calib: HostLaunchCalibration) -> Floats:
    """Seconds the blocking device-host reads add: n_sync · t_sync."""
    return np.multiply(num_syncs, calib.sync_s.value)


@dataclass(frozen=True)
class Segment:
    """GPU seconds and the host's issue counts of one stretch of a pass between syncs."""

    gpu_s: Floats
    eager_ops: float
    graph_launches: float
    kernels: float = 0.0
    """Kernels on the GPU stream, eager or captured (each followed by ``kernel_gap_s``)."""


def pass_segments(ops: Iterable[tuple[str, float, Floats]], cuda_graphs: str,
                  sync_before_moe: bool, extra_gpu_s: dict[HostScope, Floats] | None = None
                  ) -> list[Segment]:
    """Segments of one pass from its ops as (name, count, GPU seconds): one segment, or two
    split before the MoE block when dropless routing syncs (``sync_before_moe``).
    ``extra_gpu_s`` adds exposed communication seconds to a scope's segment (TP to the rest,
    EP to the MoE block). Each captured scope present costs one graph launch."""
    return with_extra_gpu_s(op_segments(ops, cuda_graphs, sync_before_moe), extra_gpu_s or {},
                            sync_before_moe)


def op_segments(ops: Iterable[tuple[str, float, Floats]], cuda_graphs: str,
                sync_before_moe: bool) -> list[Segment]:
    """``pass_segments`` of the ops alone (no communication added; ``with_extra_gpu_s`` adds
    it to segments built once per layer and scope, ``LayerOpSeconds.segments``)."""
    captured = captured_scopes(cuda_graphs)
    split = (HostScope.MOE,) if sync_before_moe else ()
    gpu: dict[bool, Floats] = {False: 0.0, True: 0.0}
    eager = {False: 0.0, True: 0.0}
    kernels = {False: 0.0, True: 0.0}
    scopes_seen: dict[bool, set[HostScope]] = {False: set(), True: set()}
    for name, count, seconds in ops:
        scope = op_scope(name)
        after = scope in split
        gpu[after] = gpu[after] + seconds
        kernels[after] += count
        if scope in captured:
            scopes_seen[after].add(scope)
        else:
            eager[after] += count
    parts = (False, True) if sync_before_moe else (False,)
    return [Segment(gpu[p], eager[p], float(len(scopes_seen[p])), kernels[p]) for p in parts]


def with_extra_gpu_s(segments: list[Segment], extra_gpu_s: dict[HostScope, Floats],
                     sync_before_moe: bool) -> list[Segment]:
    """``segments`` (from ``op_segments``) with each scope's exposed communication seconds
    added to its segment: the one after the MoE sync for the MoE scope when split, else the
    first."""
    if not extra_gpu_s:
        return segments
    gpu = [seg.gpu_s for seg in segments]
    for scope, seconds in extra_gpu_s.items():
        index = 1 if sync_before_moe and scope == HostScope.MOE else 0
        gpu[index] = gpu[index] + seconds
    return [Segment(g, seg.eager_ops, seg.graph_launches, seg.kernels)
            for g, seg in zip(gpu, segments, strict=True)]


def gpu_stream_s(kernel_s: Floats, num_kernels: Floats, calib: HostLaunchCalibration) -> Floats:
    """GPU stream seconds of a segment: its kernels' seconds + n_kernels · ``kernel_gap_s`` (the
    idle between queued kernels beyond the kernel model's own launch floor)."""
    return kernel_s + np.multiply(num_kernels, calib.kernel_gap_s.value)


def pass_time_s(segments: list[Segment], num_syncs: float,
                calib: HostLaunchCalibration) -> Floats:
    """Seconds of a pass: Σ_segments max(GPU stream, host issue) + syncs · t_sync."""
    total: Floats = sync_time_s(num_syncs, calib)
    for seg in segments:
        total = total + segment_time_s(
            gpu_stream_s(seg.gpu_s, seg.kernels, calib),
            host_issue_s(seg.eager_ops, seg.graph_launches, calib))
    return total
