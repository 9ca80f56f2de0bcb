"""The Chrome trace shows TP / CP / EP communication, not only compute (issue 22: TP was 22% of
a step and absent from the trace). On the critical device, each kind's events sum to the
report's exposed time; every event lies inside the pass it belongs to; non-overlapping per
thread."""

from __future__ import annotations

import json

import pytest

from perfcast.catalog.models import load_model
from perfcast.catalog.systems import load_system
from perfcast.estimate.training import estimate_training
from perfcast.estimate.training_timeline import training_timeline
from perfcast.report.trace import CP_TID, EP_TID, TP_TID, chrome_trace
from perfcast.specs.strategy import Strategy
from perfcast.specs.workload import Workload

CASES = {
    "tp-pp": ("llama3-8b", dict(num_gpus=16, tp=4, pp=2, sequence_parallel=True), 2048),
    "tp-cp": ("llama3-8b", dict(num_gpus=16, tp=4, cp=2, sequence_parallel=True), 8192),
    "ep": ("mixtral-8x7b", dict(num_gpus=16, tp=2, ep=8, pp=1, sequence_parallel=True), 4096),
}


def _trace(case: str):
    model, fields, seq = CASES[case]
    strategy = Strategy(**fields)
    workload = Workload(seq_length=seq, global_batch_size=strategy.dp * 8)
    system = load_system("dgx-h100", num_gpus=strategy.num_gpus)
    report = estimate_training(load_model(model), system, strategy, workload)
    trace = json.loads(json.dumps(chrome_trace(report, training_timeline(report))))
    return report, trace


@pytest.mark.parametrize("case", sorted(CASES))
def test_comm_events_sum_to_the_report(case: str) -> None:
    report, trace = _trace(case)
    events = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    critical = report.critical_stage
    b = report.breakdown
    for tid, field in ((TP_TID, "tp_comm_s"), (CP_TID, "cp_comm_s"), (EP_TID, "ep_comm_s")):
        mine = [e for e in events if e["pid"] == critical and e["tid"] == tid]
        total_s = sum(e["dur"] for e in mine) / 1e6
        assert total_s == pytest.approx(getattr(b, field), rel=1e-9, abs=1e-12), field
    assert b.tp_comm_s > 0
    if case == "tp-cp":
        assert b.cp_comm_s > 0
    if case == "ep":
        assert b.ep_comm_s > 0


@pytest.mark.parametrize("case", sorted(CASES))
def test_comm_events_sit_inside_their_pass(case: str) -> None:
    _, trace = _trace(case)
    events = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    passes = {(e["pid"], e["args"]["micro_batch"], e["args"]["chunk"], e["cat"]): e
              for e in events if e["tid"] == 1 and e["cat"] in ("forward", "input_grad")}
    comm = [e for e in events if e["tid"] in (TP_TID, CP_TID, EP_TID)]
    assert comm
    for e in comm:
        kind = {"F": "forward", "B": "input_grad"}[e["name"].split()[1]]
        host = passes[(e["pid"], e["args"]["micro_batch"], e["args"]["chunk"], kind)]
        assert host["ts"] <= e["ts"] + 1e-6
        assert e["ts"] + e["dur"] <= host["ts"] + host["dur"] + 1e-6
    for pid in {e["pid"] for e in comm}:
        for tid in (TP_TID, CP_TID, EP_TID):
            spans = sorted((e["ts"], e["ts"] + e["dur"]) for e in comm
                           if e["pid"] == pid and e["tid"] == tid)
            for (_, end), (start, _) in zip(spans, spans[1:], strict=False):
                assert start >= end - 1e-6


def test_threads_are_named() -> None:
    _, trace = _trace("tp-cp")
    names = {e["args"]["name"] for e in trace["traceEvents"]
             if e["ph"] == "M" and e["name"] == "thread_name"}
    assert {"TP communication (exposed)", "CP communication (exposed)",
            "EP communication (exposed)"} <= names
