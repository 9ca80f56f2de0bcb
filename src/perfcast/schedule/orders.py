"""Pipeline schedules as plans: where each micro-batch's model chunks run, and in what order.

A *route* lists, for one micro-batch, the hops through the model in forward order; each hop
runs one model chunk on one device. A plan either fixes each device's order of passes
(GPipe, 1F1B, interleaved 1F1B: the orders of Megatron-LM's ``schedules.py``) or gives each
device an activation-memory cap and lets the simulator pick greedily (B first, then F while
under the cap, then deferred W): the construction of Qi et al. 2023 §3-4 for ZB-H1 and ZB-V
and of the DualPipe-style bidirectional schedule.

- GPipe (Huang et al. 2019): all forwards, then all backwards.
- 1F1B (Narayanan et al. 2021 §2.2.1, PipeDream-Flush): stage i runs p − i − 1 warm-up
  forwards, then alternates one forward and one backward, then drains.
- Interleaved 1F1B (Narayanan et al. 2021 §2.2.2): v chunks per device (chunk c of device i
  is virtual stage c·p + i); micro-batches go in groups of p; warm-up (p − i − 1)·2 + (v − 1)·p.
- ZB-H1 (Qi et al. 2023, "Zero Bubble Pipeline Parallelism", §3.1): 1F1B's p − i forwards
  before a B, W deferred (at most p activations held, 1F1B's peak) to fill the drain:
  bubble (p − 1)(F + B − W).
- ZB-V (Qi et al. 2023 §4): two chunks per device in a V (device i holds virtual stages i and
  2p − 1 − i), cap p + 1/2 stage-activations on every device (the paper's hand-made schedule
  holds p·M_B; the greedy one needs the half unit to stay free of deadlock).
- DualPipe-style (DeepSeek-AI 2024, DeepSeek-V3 technical report §3.2.1): half the
  micro-batches enter at device 0, half at device p − 1; device i holds stages i and p − 1 − i
  (two copies of the weights); cap p + 1 (report Table 2). The F&B overlap of two
  micro-batches' compute and communication is not modelled.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from perfcast.errors import InputError
from perfcast.schedule.timeline import SCHEDULES, EventKind
from perfcast.specs.limits import MAX_SIMULATED_STAGE_PASSES

"""Most stage x micro-batch x chunk cells one event simulation plans (262,144: ~5 s of CPU;
64 stages x 1,024 micro-batches x 4 chunks). Beyond it a request is a typo or a sweep that
needs the closed form, not a simulation: a one-line error, not a hang."""


@dataclass(frozen=True)
class Hop:
    """One model chunk of a micro-batch's route."""

    device: int
    chunk: int
    part: int
    """Index of the pipeline stage whose per-micro-batch times this chunk costs."""
    share: float
    """Fraction of that stage's layers (1/v interleaved, 1/2 ZB-V, 1 otherwise)."""


class PassRef(NamedTuple):
    kind: EventKind
    micro_batch: int
    hop: int


@dataclass(frozen=True)
class SchedulePlan:
    name: str
    num_stages: int
    num_micro_batches: int
    num_chunks: int
    routes: tuple[tuple[Hop, ...], ...]
    """Per micro-batch, its hops in forward order."""
    orders: tuple[tuple[PassRef, ...], ...] | None
    """Fixed order of passes per device, or None for a greedy schedule."""
    caps: tuple[float, ...] | None
    """Greedy schedules: stage-activation units a device may hold (F started, W not done).
    Each chunk also holds at most as many micro-batches before their B as there are chunks
    from it to the end of the route (1F1B's p − i, per virtual stage), which keeps the greedy
    schedule free of deadlock; a cap at least the sum of those only ever forces W's."""

    @property
    def fused_backward(self) -> bool:
        """Fixed-order schedules send the input gradient upstream after the stage's whole
        backward (autograd runs dgrad and wgrad layer by layer): B and W act as one pass."""
        return self.orders is not None


F, B, W = EventKind.FORWARD, EventKind.INPUT_GRAD, EventKind.WEIGHT_GRAD


def _linear_routes(p: int, m: int, v: int) -> tuple[tuple[Hop, ...], ...]:
    """Virtual stage h = c·p + i runs chunk c on device i (v = 1: plain pipeline)."""
    route = tuple(Hop(h % p, h // p, h % p, 1.0 / v) for h in range(p * v))
    return (route,) * m


def _v_routes(p: int, m: int) -> tuple[tuple[Hop, ...], ...]:
    route = tuple(Hop(h, 0, h, 0.5) for h in range(p)) + tuple(
        Hop(p - 1 - j, 1, p - 1 - j, 0.5) for j in range(p))
    return (route,) * m


def _bidirectional_routes(p: int, m: int) -> tuple[tuple[Hop, ...], ...]:
    down = tuple(Hop(h, 0, h, 1.0) for h in range(p))
    up = tuple(Hop(p - 1 - h, 1, h, 1.0) for h in range(p))
    first_half = (m + 1) // 2
    return tuple(down if mb < first_half else up for mb in range(m))


def _gpipe_order(i: int, m: int) -> tuple[PassRef, ...]:
    forwards = [PassRef(F, mb, i) for mb in range(m)]
    backwards = [ref for mb in range(m) for ref in (PassRef(B, mb, i), PassRef(W, mb, i))]
    return tuple(forwards + backwards)


def _one_f_one_b(forward: list[tuple[int, int]], backward: list[tuple[int, int]],
                 warmup: int) -> tuple[PassRef, ...]:
    """Warm-up forwards, then one forward and one backward (B then W) at a time, then drain."""
    total = len(forward)
    warmup = min(warmup, total)
    order = [PassRef(F, mb, h) for mb, h in forward[:warmup]]
    for k in range(total - warmup):
        mb, h = forward[warmup + k]
        order.append(PassRef(F, mb, h))
        mb, h = backward[k]
        order += [PassRef(B, mb, h), PassRef(W, mb, h)]
    for mb, h in backward[total - warmup:]:
        order += [PassRef(B, mb, h), PassRef(W, mb, h)]
    return tuple(order)


def _interleaved_sequence(i: int, p: int, m: int, v: int, reverse: bool) -> list[tuple[int, int]]:
    """(micro-batch, hop) in Megatron-LM order: groups of p micro-batches, chunk by chunk."""
    seq = []
    for first in range(0, m, p):
        group = range(first, min(first + p, m))
        for c in range(v):
            chunk = v - 1 - c if reverse else c
            seq += [(mb, chunk * p + i) for mb in group]
    return seq


def schedule_plan(schedule: str, num_stages: int, num_micro_batches: int,
                  virtual_stages: int = 1) -> SchedulePlan:
    """The plan of ``schedule`` for p stages and m micro-batches (v chunks when interleaved)."""
    p, m, v = num_stages, num_micro_batches, virtual_stages
    if schedule not in SCHEDULES:
        raise InputError("schedule", schedule, f"not one of {', '.join(SCHEDULES)}")
    if p < 1 or m < 1 or v < 1:
        raise InputError("stages, micro_batches, virtual_stages", (p, m, v), "must be >= 1")
    cells = p * m * max(v if schedule == "interleaved" else 1, 2 if schedule in (
        "zb-v", "dualpipe") else 1)
    if cells > MAX_SIMULATED_STAGE_PASSES.value:
        raise InputError("stages*micro_batches*chunks", cells, f"exceeds the simulation bound "
                         f"of {MAX_SIMULATED_STAGE_PASSES.value:,} (MAX_SIMULATED_STAGE_PASSES: "
                         f"{MAX_SIMULATED_STAGE_PASSES.reason})")
    if schedule in ("zb-v", "dualpipe") and v not in (1, 2):
        raise InputError("virtual_stages", v, f"{schedule} places two chunks per stage itself "
                         "(give 1 or 2)")
    if schedule == "dualpipe" and p > 1 and p % 2 != 0:
        raise InputError("stages", p, "dualpipe pairs stage i with stage p-1-i in both directions "
                         "(DeepSeek-V3 §3.2.1): it needs an even number of stages")
    if schedule == "interleaved" and m % p != 0:
        raise InputError("micro_batches", m, f"the interleaved schedule needs a multiple of "
                         f"stages={p} (Megatron-LM's order)")
    orders = caps = None
    if schedule == "gpipe":
        chunks, routes = 1, _linear_routes(p, m, 1)
        orders = tuple(_gpipe_order(i, m) for i in range(p))
    elif schedule in ("1f1b", "interleaved"):
        chunks = v if schedule == "interleaved" else 1
        routes = _linear_routes(p, m, chunks)
        orders = tuple(
            _one_f_one_b(_interleaved_sequence(i, p, m, chunks, False),
                         _interleaved_sequence(i, p, m, chunks, True),
                         (p - i - 1) * 2 + (chunks - 1) * p if chunks > 1 else p - i - 1)
            for i in range(p))
    elif schedule == "zb-h1":
        chunks, routes = 1, _linear_routes(p, m, 1)
        caps = (float(p),) * p
    elif schedule == "zb-v":
        chunks, routes = 2, _v_routes(p, m)
        caps = (p + 0.5,) * p
    else:
        chunks, routes = 2, _bidirectional_routes(p, m)
        caps = (float(p + 1),) * p
    return SchedulePlan(schedule, p, m, chunks, routes, orders, caps)


def device_stage_work(plan: SchedulePlan) -> tuple[tuple[float, ...], ...]:
    """[device][stage]: micro-batches' worth of each stage's passes that a device runs per step
    (m on the diagonal for one-directional schedules; DualPipe splits rows between stage i
    and p − 1 − i)."""
    work = [[0.0] * plan.num_stages for _ in range(plan.num_stages)]
    for route in plan.routes:
        for hop in route:
            work[hop.device][hop.part] += hop.share
    return tuple(tuple(row) for row in work)
