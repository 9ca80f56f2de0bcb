"""The simulated pipeline phase of an estimated training step, and its operators' roofline points.

``training_timeline`` re-runs the schedule simulator on the per-stage F/B/W times the estimator
used (``TrainingReport.stage_passes``), so the timeline is the one behind the report's
pipeline time (exactly, where the estimator used the equal closed form: uniform stages).
"""

from __future__ import annotations

from dataclasses import dataclass

from perfcast.calibration.bundle import Calibration, load_calibration
from perfcast.estimate.training_report import TrainingReport
from perfcast.kernels.backend import DEFAULT_KERNEL_BACKEND, KernelBackend, get_backend
from perfcast.schedule.simulate import simulate_pipeline
from perfcast.schedule.timeline import PipelineTimeline


def training_timeline(report: TrainingReport) -> PipelineTimeline:
    """Events, bubbles and activation memory per stage of the report's pipeline phase."""
    strategy = report.strategy
    v = strategy.vpp if strategy.schedule == "interleaved" else 1
    return simulate_pipeline(strategy.schedule, report.stage_passes, report.num_micro_batches, v)


@dataclass(frozen=True)
class OperatorPoint:
    """One kernel of a stage on the roofline (one micro-batch, one layer)."""

    name: str
    kind: str
    flops: float
    bytes_moved: float
    """Compulsory HBM bytes (``op_counts``; attention K/V counted at query heads)."""
    time_s: float

    @property
    def intensity(self) -> float:
        """FLOPs per HBM byte (Williams, Waterman, Patterson, Roofline, CACM 2009)."""
        return self.flops / self.bytes_moved if self.bytes_moved > 0 else 0.0

    @property
    def achieved_flops(self) -> float:
        return self.flops / self.time_s if self.time_s > 0 else 0.0


def stage_operator_points(model, system, strategy, seq_length: int, stage: int,
                          kernel_backend: str | KernelBackend = DEFAULT_KERNEL_BACKEND,
                          calibration: Calibration | None = None) -> tuple[OperatorPoint, ...]:
    """Roofline points of the distinct compute ops of pipeline stage ``stage``, built and timed
    as ``estimate_training`` builds and times them: the graph with ``calibration``'s dropless
    MoE routing imbalance where no input states one (``graph.stage.with_learned_imbalance``)
    and the backend with its derived attention kernels (``Calibration.with_kernels``); the
    shipped calibration when None."""
    from perfcast.graph.fp8_casts import gemm_format
    from perfcast.graph.ops import AttentionOp, GemmOp
    from perfcast.graph.stage import stage_graph, with_learned_imbalance
    from perfcast.op_counts import attention_bytes, gemm_bytes
    from perfcast.schedule.op_time import compute_op_time_s

    cal = calibration or load_calibration()
    backend = cal.with_kernels(get_backend(kernel_backend))
    routed = with_learned_imbalance(strategy, cal.routing.dropless_load_imbalance.value)
    graph = stage_graph(model, routed, seq_length, stage)
    ops = [op for group in graph.layers for op in group.compute] + list(graph.extra_compute)
    precision = gemm_format(strategy.fp8_recipe) if strategy.precision == "fp8" else "bf16"
    points = []
    for op in ops:
        if isinstance(op, GemmOp):
            moved = op.count * float(gemm_bytes(op.m, op.n, op.k, op.batch,
                                                precision if op.fp8_eligible else "bf16"))
        elif isinstance(op, AttentionOp):
            moved = op.count * float(attention_bytes(
                op.batch, op.heads, op.heads, op.seq_q, op.kernel_seq_kv, op.head_dim_qk,
                op.head_dim_v, op.phase.value != "forward", "bf16"))
        else:
            moved = op.count * float(op.bytes_moved)
        points.append(OperatorPoint(op.name, op.kind.value, float(op.flops), moved,
                                    float(compute_op_time_s(op, system, strategy, backend))))
    return tuple(points)
