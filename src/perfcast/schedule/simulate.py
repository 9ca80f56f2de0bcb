"""Event-level simulation of a pipeline schedule from per-stage F, B and W times.

Dependencies (Qi et al. 2023 §2, the F/B/W split of backpropagation): F of a chunk needs F of
the previous chunk of the same micro-batch; B needs B of the next chunk (or, on the last chunk,
its own F); W needs its own B. Crossing devices adds the P2P latency. Each device runs one pass
at a time: in its fixed order (GPipe, 1F1B, interleaved) or, for greedy schedules (ZB-H1,
ZB-V, DualPipe-style), the ready pass of highest priority — B, then F while the device's
activation cap allows, then the oldest deferred W (``schedule.orders``).

The simulation is a discrete-event list schedule: the device whose next pass can start
earliest commits it; since every other device's next pass starts no earlier, nothing that
becomes ready later could have been chosen instead. Cost: O(passes · devices).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

from perfcast.errors import InputError
from perfcast.schedule.orders import B, F, PassRef, SchedulePlan, W, schedule_plan
from perfcast.schedule.timeline import (
    EventKind,
    PassTimes,
    PipelineTimeline,
    ScheduleEvent,
    StageTimeline,
)

_RANK = {B: 0, F: 1, W: 2}
_EPS = 1e-9
_FIELD = {F: "forward_s", B: "input_grad_s", W: "weight_grad_s"}


class _Device:
    """Mutable simulation state of one device (private to one ``run_plan`` call)."""

    def __init__(self, index: int, plan: SchedulePlan):
        self.index = index
        self.free_at = 0.0
        self.held = 0.0
        self.before_b: dict[int, float] = {}
        """Per chunk: units whose F started and B did not finish."""
        self.forward_caps: dict[int, float] = {}
        self.prefer = F
        """Kind tried first: F and B alternate after the warm-up (Qi et al. 2023 §3.2)."""
        self.cap = plan.caps[index] if plan.caps is not None else float("inf")
        self.order = deque(plan.orders[index]) if plan.orders is not None else None
        self.forwards: dict[int, deque] = {}
        self.backwards: dict[int, deque] = {}
        self.weights: deque[PassRef] = deque()
        self.events: list[tuple] = []
        """(kind, micro-batch, chunk, start, end) per pass."""
        self.memory: list[tuple[float, float]] = []


class _Engine:
    def __init__(self, plan: SchedulePlan, stage_times: Sequence[PassTimes], p2p_s: float):
        self.plan, self.p2p_s = plan, p2p_s
        self.done: dict[tuple, float] = {}
        self.devices = [_Device(i, plan) for i in range(plan.num_stages)]
        self.upstream_grad = W if plan.fused_backward else B
        cache: dict[int, tuple] = {}
        for route in plan.routes:
            if id(route) not in cache:
                cache[id(route)] = tuple(
                    (hop.device, hop.chunk, hop.share,
                     {kind: getattr(stage_times[hop.part], name) * hop.share
                      for kind, name in _FIELD.items()})
                    for hop in route)
        self.info = tuple(cache[id(route)] for route in plan.routes)
        """Per micro-batch and hop: (device, chunk, share, {kind: seconds})."""
        if plan.orders is None:
            for mb, route in enumerate(plan.routes):
                for h, hop in enumerate(route):
                    dev = self.devices[hop.device]
                    dev.forwards.setdefault(hop.chunk, deque()).append(PassRef(F, mb, h))
                    dev.forward_caps[hop.chunk] = (len(route) - h) * hop.share
                    dev.before_b[hop.chunk] = 0.0
                    dev.backwards.setdefault(hop.chunk, deque()).append(PassRef(B, mb, h))

    def ready(self, ref: PassRef) -> float | None:
        """When ``ref`` can start as far as its inputs go (None: not yet known)."""
        kind, mb, h = ref
        done = self.done
        if kind == F:
            if h == 0:
                return 0.0
            end = done.get((F, mb, h - 1))
            if end is None:
                return None
            info = self.info[mb]
            return end + (self.p2p_s if info[h - 1][0] != info[h][0] else 0.0)
        if kind == W:
            return done.get((B, mb, h))
        own = done.get((F, mb, h))
        info = self.info[mb]
        if own is None or h == len(info) - 1:
            return own
        end = done.get((self.upstream_grad, mb, h + 1))
        if end is None:
            return None
        return max(own, end + (self.p2p_s if info[h + 1][0] != info[h][0] else 0.0))

    def propose(self, dev: _Device) -> tuple[float, PassRef] | None:
        """The pass ``dev`` runs next and its start, if its inputs are known."""
        if dev.order is not None:
            if not dev.order:
                return None
            ready = self.ready(dev.order[0])
            return None if ready is None else (max(dev.free_at, ready), dev.order[0])
        candidates = [q[0] for q in dev.backwards.values() if q]
        candidates += [q[0] for q in dev.forwards.values() if q and self._fits(dev, q[0])]
        candidates += list(dev.weights)[:1]
        known = [(ready, ref) for ref in candidates if (ready := self.ready(ref)) is not None]
        if not known:
            return None
        start = max(dev.free_at, min(ready for ready, _ in known))
        chosen = min((ref for ready, ref in known if ready <= start + _EPS),
                     key=lambda r: (r.kind != dev.prefer, _RANK[r.kind], r.micro_batch, -r.hop))
        return start, chosen

    def _fits(self, dev: _Device, ref: PassRef) -> bool:
        _, chunk, share, _ = self.info[ref.micro_batch][ref.hop]
        return (dev.held + share <= dev.cap + _EPS
                and dev.before_b[chunk] + share <= dev.forward_caps[chunk] + _EPS)

    def commit(self, dev: _Device, start: float, ref: PassRef) -> None:
        kind, mb, h = ref
        _, chunk, share, seconds = self.info[mb][h]
        end = start + seconds[kind]
        self.done[ref] = end
        dev.free_at = end
        dev.events.append((kind, mb, chunk, start, end))
        if kind == F:
            dev.held += share
            dev.memory.append((start, share))
            dev.prefer = B
        elif kind == B:
            dev.prefer = F
        else:
            dev.held -= share
            dev.memory.append((end, -share))
        if dev.order is not None:
            dev.order.popleft()
        elif kind == F:
            dev.forwards[chunk].popleft()
            dev.before_b[chunk] += share
        elif kind == B:
            dev.backwards[chunk].popleft()
            dev.before_b[chunk] -= share
            dev.weights.append(PassRef(W, mb, h))
        else:
            dev.weights.popleft()

    def neighbours(self, ref: PassRef) -> tuple[int, ...]:
        """Devices whose next pass may depend on ``ref`` (its own first)."""
        kind, mb, h = ref
        info = self.info[mb]
        nxt = h + (1 if kind == F else -1)
        return (info[h][0], info[nxt][0]) if 0 <= nxt < len(info) else (info[h][0],)

    def run(self) -> None:
        if self.plan.orders is not None:
            self._run_fixed()
        else:
            self._run_greedy()

    def _run_fixed(self) -> None:
        """Fixed orders: a pass starts when its device is free and its inputs have arrived,
        whatever the global order of evaluation, so a work list suffices (O(passes))."""
        pending, queued = deque(range(len(self.devices))), set(range(len(self.devices)))
        while pending:
            index = pending.popleft()
            queued.discard(index)
            dev = self.devices[index]
            while dev.order and (ready := self.ready(dev.order[0])) is not None:
                ref = dev.order[0]
                self.commit(dev, max(dev.free_at, ready), ref)
                for other in self.neighbours(ref):
                    if other != index and other not in queued:
                        pending.append(other)
                        queued.add(other)
        left = sum(len(dev.order or ()) for dev in self.devices)  # fixed orders: never None
        if left:
            raise RuntimeError(f"schedule {self.plan.name!r} deadlocked with {left} passes left")

    def _run_greedy(self) -> None:
        remaining = 3 * sum(len(route) for route in self.plan.routes)
        proposals = [self.propose(dev) for dev in self.devices]
        while remaining:
            live = [(prop, i) for i, prop in enumerate(proposals) if prop is not None]
            if not live:
                raise RuntimeError(f"schedule {self.plan.name!r} deadlocked with {remaining} "
                                   "passes left")
            (start, ref), best = min(live, key=lambda live_i: (live_i[0][0], live_i[1]))
            self.commit(self.devices[best], start, ref)
            remaining -= 1
            for i in {best, *self.neighbours(ref)}:
                proposals[i] = self.propose(self.devices[i])


def _event(record: tuple) -> ScheduleEvent:
    return ScheduleEvent(*record)


def _with_bubbles(passes: list[tuple], end_s: float) -> tuple[ScheduleEvent, ...]:
    out, clock = [], 0.0
    for event in map(_event, passes):  # a device's passes are in time order
        if event.start_s > clock + _EPS * max(1.0, end_s):
            out.append(ScheduleEvent(EventKind.BUBBLE, -1, -1, clock, event.start_s))
        out.append(event)
        clock = max(clock, event.end_s)
    if end_s > clock + _EPS * max(1.0, end_s):
        out.append(ScheduleEvent(EventKind.BUBBLE, -1, -1, clock, end_s))
    return tuple(out)


def _memory_curve(deltas: list[tuple[float, float]]) -> tuple[tuple[float, float], ...]:
    """Running sum of (time, delta), frees before allocations at equal times."""
    curve, held = [(0.0, 0.0)], 0.0
    for time, delta in sorted(deltas):
        held += delta
        if curve[-1][0] == time:
            curve[-1] = (time, max(held, 0.0))
        else:
            curve.append((time, max(held, 0.0)))
    return tuple(curve)


def run_plan(plan: SchedulePlan, stage_times: Sequence[PassTimes], p2p_s: float = 0.0
             ) -> PipelineTimeline:
    """Simulate ``plan`` with per-stage pass times (one micro-batch, whole stage)."""
    if len(stage_times) != plan.num_stages:
        raise InputError("stage_times", len(stage_times), f"needs one per stage "
                         f"({plan.num_stages} stages)")
    engine = _Engine(plan, stage_times, p2p_s)
    engine.run()
    end_s = max(dev.free_at for dev in engine.devices)
    stages = tuple(
        StageTimeline(dev.index, _with_bubbles(dev.events, end_s), _memory_curve(dev.memory))
        for dev in engine.devices)
    return PipelineTimeline(plan.name, plan.num_stages, plan.num_micro_batches,
                            plan.num_chunks, p2p_s, stages)


def simulated_step_time_s(schedule: str, stage_times: Sequence[PassTimes], num_micro_batches: int,
                          virtual_stages: int = 1, p2p_s: float = 0.0) -> float:
    """Step time of ``simulate_pipeline`` without building the timeline (for the estimator)."""
    plan = schedule_plan(schedule, len(stage_times), num_micro_batches, virtual_stages)
    engine = _Engine(plan, stage_times, p2p_s)
    engine.run()
    return max(dev.free_at for dev in engine.devices)


def simulate_pipeline(schedule: str, stage_times: Sequence[PassTimes], num_micro_batches: int,
                      virtual_stages: int = 1, p2p_s: float = 0.0) -> PipelineTimeline:
    """Timeline, step time, bubble and in-flight activations of ``schedule`` (see ``orders``)."""
    plan = schedule_plan(schedule, len(stage_times), num_micro_batches, virtual_stages)
    return run_plan(plan, stage_times, p2p_s)
