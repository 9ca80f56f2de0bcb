"""Chrome trace / Perfetto JSON of one training step (``chrome://tracing``, ui.perfetto.dev).

Format: the Trace Event Format (Google, "Trace Event Format" document): a ``traceEvents`` list
of complete events (``ph: "X"``, ``ts``/``dur`` in microseconds, ``pid``, ``tid``) and metadata
events (``ph: "M"``) naming processes and threads. One process per pipeline stage; thread 1
holds compute (F, B, W passes and bubbles), thread 2 pipeline and data-parallel communication
(P2P sends between stages, then the step's exposed pipeline and data-parallel communication),
threads 3-5 the exposed TP, CP (ring K/V exchange, K/V all-gather or Ulysses all-to-alls,
``graph.context_parallel``) and EP communication inside the passes.

The report gives the exposed TP/CP/EP time of the critical device for the whole step, not per
pass; each F and B pass of a stage gets the share ``comm_s × pass / Σ(F + B passes of the
critical device)`` of it, at the start of the pass (wgrad passes hold no collectives). On the
critical device the events of one kind therefore sum to the report's figure exactly; other
stages get the same fraction of their passes (same layers, same collectives per layer).
"""

from __future__ import annotations

from perfcast.estimate.training_report import TrainingReport
from perfcast.schedule.orders import schedule_plan
from perfcast.schedule.timeline import EventKind, PipelineTimeline

COMPUTE_TID = 1
COMM_TID = 2
TP_TID, CP_TID, EP_TID = 3, 4, 5
_PASS_COMM = ((TP_TID, "tp_comm", "TP communication (exposed)", "tp_comm_s"),
              (CP_TID, "cp_comm", "CP communication (exposed)", "cp_comm_s"),
              (EP_TID, "ep_comm", "EP communication (exposed)", "ep_comm_s"))
"""(thread, category, thread name, StepBreakdown field) of the collectives inside passes."""
_COMM_PASSES = (EventKind.FORWARD, EventKind.INPUT_GRAD)
_US = 1e6
_CATEGORY = {EventKind.FORWARD: "forward", EventKind.INPUT_GRAD: "input_grad",
             EventKind.WEIGHT_GRAD: "weight_grad", EventKind.BUBBLE: "bubble"}


def _complete(name, cat, start_s, dur_s, pid, tid, args=None) -> dict:
    event = {"name": name, "cat": cat, "ph": "X", "ts": start_s * _US, "dur": max(dur_s, 0.0) * _US,
             "pid": pid, "tid": tid}
    if args:
        event["args"] = args
    return event


def _metadata(timeline: PipelineTimeline) -> list[dict]:
    out = []
    for st in timeline.stages:
        out.append({"name": "process_name", "ph": "M", "pid": st.stage, "tid": 0,
                    "args": {"name": f"pipeline stage {st.stage}"}})
        out.append({"name": "process_sort_index", "ph": "M", "pid": st.stage, "tid": 0,
                    "args": {"sort_index": st.stage}})
        threads = ((COMPUTE_TID, "compute"), (COMM_TID, "communication (PP, DP)"),
                   *((tid, name) for tid, _, name, _ in _PASS_COMM))
        for tid, name in threads:
            out.append({"name": "thread_name", "ph": "M", "pid": st.stage, "tid": tid,
                        "args": {"name": name}})
    return out


def _p2p_sends(timeline: PipelineTimeline, p2p_s: float, virtual_stages: int) -> list[dict]:
    """One send per pass whose output crosses to another stage (activations after F,
    input gradients after B), lasting the P2P time, queued on the sender's communication
    thread (sends never overlap; none runs past the pipeline phase)."""
    if p2p_s <= 0 or timeline.num_stages == 1:
        return []
    plan = schedule_plan(timeline.schedule, timeline.num_stages, timeline.num_micro_batches,
                         virtual_stages)
    out, end_s = [], timeline.step_time_s
    for st in timeline.stages:
        free_s = 0.0
        for e in st.events:
            if e.kind not in (EventKind.FORWARD, EventKind.INPUT_GRAD):
                continue
            route = plan.routes[e.micro_batch]
            h = next(i for i, hop in enumerate(route) if hop.device == st.stage and hop.chunk == e.chunk)
            nxt = h + 1 if e.kind == EventKind.FORWARD else h - 1
            if 0 <= nxt < len(route) and route[nxt].device != st.stage:
                what = "activation" if e.kind == EventKind.FORWARD else "gradient"
                start = max(e.end_s, free_s)
                free_s = min(start + p2p_s, end_s)
                if free_s > start:
                    out.append(_complete(
                        f"send {what} mb{e.micro_batch} → stage {route[nxt].device}", "p2p", start,
                        free_s - start, st.stage, COMM_TID, {"micro_batch": e.micro_batch}))
    return out


def _pass_comm(report: TrainingReport, timeline: PipelineTimeline) -> list[dict]:
    """Exposed TP / CP / EP collectives inside the F and B passes (module docstring)."""
    critical = next((st for st in timeline.stages if st.stage == report.critical_stage), None)
    if critical is None:
        return []
    window_s = sum(e.duration_s for e in critical.events if e.kind in _COMM_PASSES)
    out: list[dict] = []
    for tid, cat, name, field in _PASS_COMM:
        comm_s = getattr(report.breakdown, field)
        if comm_s <= 0 or window_s <= 0:
            continue
        fraction = comm_s / window_s
        for st in timeline.stages:
            for e in st.events:
                if e.kind in _COMM_PASSES and e.duration_s > 0:
                    out.append(_complete(f"{name.split()[0]} {e.kind.value} mb{e.micro_batch}",
                                         cat, e.start_s, fraction * e.duration_s, st.stage, tid,
                                         {"micro_batch": e.micro_batch, "chunk": e.chunk}))
    return out


def _step_tail(report: TrainingReport, pipeline_end_s: float, num_stages: int) -> list[dict]:
    """After the pipeline phase: exposed PP and DP communication, optimizer, calibrated other,
    one after the other so the trace ends at the report's step time."""
    b = report.breakdown
    tail_s = max(report.step_time_s - pipeline_end_s, 0.0)
    dp_step = max(tail_s - b.pp_comm_s - b.optimizer_s - b.other_s, 0.0)
    parts = (("exposed pipeline send/recv", "pp_comm", COMM_TID, b.pp_comm_s),
             ("exposed data-parallel communication", "dp_comm", COMM_TID, dp_step),
             ("optimizer step", "optimizer", COMPUTE_TID, b.optimizer_s),
             ("other (calibrated overhead)", "other", COMPUTE_TID, b.other_s))
    out, clock = [], pipeline_end_s
    for name, cat, tid, dur in parts:
        if dur <= 0:
            continue
        out += [_complete(name, cat, clock, dur, stage, tid) for stage in range(num_stages)]
        clock += dur
    return out


def chrome_trace(report: TrainingReport, timeline: PipelineTimeline) -> dict:
    """The step as a Trace Event Format object (``json.dump`` it to a file)."""
    events = _metadata(timeline)
    for st in timeline.stages:
        for e in st.events:
            name = ("bubble" if e.kind == EventKind.BUBBLE
                    else f"{e.kind.value} mb{e.micro_batch}" + (f" c{e.chunk}" if timeline.num_chunks > 1
                                                               else ""))
            args = None if e.kind == EventKind.BUBBLE else {"micro_batch": e.micro_batch,
                                                           "chunk": e.chunk}
            events.append(_complete(name, _CATEGORY[e.kind], e.start_s, e.duration_s, st.stage,
                                    COMPUTE_TID, args))
    v = report.strategy.vpp if timeline.schedule == "interleaved" else 1
    events += _pass_comm(report, timeline)
    events += _p2p_sends(timeline, report.p2p_s, v)
    events += _step_tail(report, timeline.step_time_s, timeline.num_stages)
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": {"model": report.model, "system": report.system,
                          "schedule": timeline.schedule, "step_time_s": report.step_time_s}}


def write_chrome_trace(report: TrainingReport, timeline: PipelineTimeline, path) -> None:
    import json
    from pathlib import Path

    Path(path).parent.mkdir(parents=True, exist_ok=True)
    from perfcast.report.atomic import write_text_atomic

    write_text_atomic(path, json.dumps(chrome_trace(report, timeline)))
