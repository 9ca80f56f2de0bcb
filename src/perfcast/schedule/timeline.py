"""Typed, frozen result of a pipeline-schedule simulation: events, memory over time, bubble.

A timeline lists, per pipeline rank (device), its forward (F), input-gradient (B) and
weight-gradient (W) passes and the idle gaps between them (``bubble``), each with its
micro-batch, model chunk, start and end (seconds). Activation memory is counted in
"stage-activation units": one unit is the activations all of a device's layers keep for one
micro-batch (a chunk of an interleaved or V-shaped schedule is ``1/chunks`` of a unit), held
from the start of its F to the end of its W (Qi et al. 2023 §2: W still needs the layer input
and output gradient).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

ScheduleName = str
"""One of ``SCHEDULES``."""

SCHEDULES: tuple[str, ...] = ("gpipe", "1f1b", "interleaved", "zb-h1", "zb-v", "dualpipe")


class EventKind(str, Enum):
    FORWARD = "F"
    INPUT_GRAD = "B"
    WEIGHT_GRAD = "W"
    BUBBLE = "bubble"


@dataclass(frozen=True)
class PassTimes:
    """Seconds of one pipeline stage for one micro-batch (all its layers), by pass."""

    forward_s: float
    input_grad_s: float
    """Backward to the layer inputs (dgrad, attention backward, recompute): on the critical path."""
    weight_grad_s: float
    """Weight gradients (wgrad GEMMs): deferrable by zero-bubble schedules."""

    @property
    def total_s(self) -> float:
        return self.forward_s + self.input_grad_s + self.weight_grad_s


@dataclass(frozen=True)
class ScheduleEvent:
    """One pass (or idle gap) on one device."""

    kind: EventKind
    micro_batch: int
    """-1 for a bubble."""
    chunk: int
    """Model chunk on this device (interleaved/V: 0..v−1; DualPipe: the direction); -1 for a bubble."""
    start_s: float
    end_s: float

    @property
    def duration_s(self) -> float:
        return self.end_s - self.start_s


@dataclass(frozen=True)
class StageTimeline:
    """Everything one device does during the pipeline phase of a step."""

    stage: int
    events: tuple[ScheduleEvent, ...]
    """F/B/W passes and bubbles in time order, covering [0, step time]."""
    memory: tuple[tuple[float, float], ...]
    """(time s, stage-activation units held from then on): a step function."""

    @property
    def busy_s(self) -> float:
        return sum(e.duration_s for e in self.events if e.kind != EventKind.BUBBLE)

    @property
    def idle_s(self) -> float:
        return sum(e.duration_s for e in self.events if e.kind == EventKind.BUBBLE)

    @property
    def peak_in_flight(self) -> float:
        """Most stage-activation units held at once (micro-batches in flight)."""
        return max((units for _, units in self.memory), default=0.0)


@dataclass(frozen=True)
class PipelineTimeline:
    """A simulated pipeline phase of one training step."""

    schedule: ScheduleName
    num_stages: int
    num_micro_batches: int
    num_chunks: int
    """Model chunks per device (interleaved v; 2 for ZB-V and DualPipe; else 1)."""
    p2p_s: float
    stages: tuple[StageTimeline, ...]

    @property
    def step_time_s(self) -> float:
        return max((st.events[-1].end_s for st in self.stages if st.events), default=0.0)

    @property
    def ideal_time_s(self) -> float:
        """Busy time of the busiest device: the step with no bubble at all."""
        return max(st.busy_s for st in self.stages)

    @property
    def bubble_fraction(self) -> float:
        """Idle share of all device time: Σ idle / (p · step). 1F1B uniform: (p−1)/(m+p−1)."""
        return sum(st.idle_s for st in self.stages) / (self.num_stages * self.step_time_s)

    @property
    def bubble_over_ideal(self) -> float:
        """(step − ideal) / ideal: Narayanan et al. 2021 §2.2 (p−1)/(v·m) for uniform stages."""
        return self.step_time_s / self.ideal_time_s - 1.0

    @property
    def peak_in_flight_micro_batches(self) -> tuple[float, ...]:
        return tuple(st.peak_in_flight for st in self.stages)

    def to_dict(self, events: bool = False) -> dict:
        out = {
            "schedule": self.schedule,
            "num_stages": self.num_stages,
            "num_micro_batches": self.num_micro_batches,
            "num_chunks": self.num_chunks,
            "p2p_s": self.p2p_s,
            "step_time": self.step_time_s,
            "ideal_time": self.ideal_time_s,
            "bubble_fraction": self.bubble_fraction,
            "bubble_over_ideal": self.bubble_over_ideal,
            "peak_in_flight_micro_batches": list(self.peak_in_flight_micro_batches),
        }
        if events:
            out["stages"] = [
                {"stage": st.stage,
                 "events": [{"kind": e.kind.value, "micro_batch": e.micro_batch, "chunk": e.chunk,
                             "start": e.start_s, "end": e.end_s} for e in st.events],
                 "memory": [list(point) for point in st.memory]}
                for st in self.stages
            ]
        return out
