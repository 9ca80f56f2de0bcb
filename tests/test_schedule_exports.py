"""``perfcast schedule``, and the trace / plots / HTML exports of ``perfcast train``."""

from __future__ import annotations

import json
import re

import pytest
from typer.testing import CliRunner

from perfcast.catalog.models import load_model
from perfcast.catalog.systems import load_system
from perfcast.cli.main import app
from perfcast.estimate.training import estimate_training
from perfcast.estimate.training_timeline import training_timeline
from perfcast.report.trace import chrome_trace
from perfcast.specs import Strategy, Workload

runner = CliRunner()
MODEL = load_model("llama3-8b")


def _report(schedule: str, pp: int = 4, vpp: int = 1):
    strategy = Strategy(num_gpus=8, tp=2, pp=pp, vpp=vpp, pipeline_schedule=schedule,
                        sequence_parallel=True)
    return estimate_training(MODEL, load_system("dgx-h100", num_gpus=8), strategy,
                             Workload(seq_length=2048, global_batch_size=4 * pp))


def test_schedule_cli_json_textbook():
    result = runner.invoke(app, ["schedule", "--schedule", "1f1b", "--stages", "4",
                                 "--micro-batches", "8", "--forward-time", "1",
                                 "--backward-time", "2", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["step_time"] == 33.0
    assert data["bubble_fraction"] == pytest.approx(3 / 11)
    assert data["peak_in_flight_micro_batches"] == [4.0, 3.0, 2.0, 1.0]


def test_schedule_cli_zb_h1_default_split_and_gantt():
    base = ["schedule", "--schedule", "zb-h1", "--stages", "4", "--micro-batches", "8",
            "--forward-time", "1", "--backward-time", "2"]
    data = json.loads(runner.invoke(app, base + ["--json"]).stdout)
    assert data["step_time"] == 27.0  # W = B/2 by default (Qi et al. 2023: (p-1)(F+B-W))
    text = runner.invoke(app, base).stdout
    assert "stage  3 |...F" in text


def test_schedule_cli_bad_input_one_line_exit_2():
    result = runner.invoke(app, ["schedule", "--schedule", "interleaved", "--stages", "4",
                                 "--micro-batches", "6", "--forward-time", "1",
                                 "--backward-time", "2", "--virtual-stages", "2"])
    assert result.exit_code == 2
    assert "micro_batches=6" in result.stderr and len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("schedule,vpp", [("1f1b", 1), ("interleaved", 2), ("zb-h1", 1),
                                          ("zb-v", 1), ("dualpipe", 1), ("gpipe", 1)])
def test_report_timeline_is_the_estimated_pipeline(schedule, vpp):
    report = _report(schedule, vpp=vpp)
    assert report.breakdown.total_s == pytest.approx(report.step_time_s, rel=1e-9)
    assert report.breakdown.pipeline_bubble_s >= -1e-12
    timeline = training_timeline(report)
    b = report.breakdown
    pipeline_s = (b.compute_gemm_s + b.compute_attention_s + b.compute_memory_bound_s
                  + b.recompute_s + b.tp_comm_s + b.cp_comm_s + b.ep_comm_s
                  + b.pipeline_bubble_s)
    # dp per-micro-batch part is zero here (no FSDP), so the pipeline phase is exactly this:
    assert timeline.step_time_s == pytest.approx(pipeline_s, rel=1e-9)


def test_zero_bubble_schedules_are_faster_in_the_estimate():
    steps = {s: _report(s).step_time_s for s in ("1f1b", "zb-h1", "zb-v", "dualpipe", "gpipe")}
    assert steps["zb-h1"] < steps["1f1b"] <= steps["gpipe"]
    assert steps["dualpipe"] < steps["1f1b"]


def _check_trace(trace: dict, num_stages: int, step_time_s: float) -> None:
    events = trace["traceEvents"]
    assert isinstance(events, list) and events
    complete = [e for e in events if e["ph"] == "X"]
    for e in events:
        assert {"name", "ph", "pid", "tid"} <= set(e)
        assert e["ph"] in ("X", "M")
    for e in complete:
        assert {"ts", "dur", "cat"} <= set(e)
        assert e["dur"] >= 0 and e["ts"] >= 0
    assert {e["pid"] for e in complete} == set(range(num_stages))
    for pid in range(num_stages):
        for tid in (1, 2):
            spans = sorted((e["ts"], e["ts"] + e["dur"]) for e in complete
                           if e["pid"] == pid and e["tid"] == tid)
            for (_, end), (start, _) in zip(spans, spans[1:], strict=False):
                assert start >= end - 1e-6, (pid, tid, end, start)
    assert max(e["ts"] + e["dur"] for e in complete) == pytest.approx(step_time_s * 1e6, rel=1e-9)
    cats = {e["cat"] for e in complete}
    assert {"forward", "input_grad", "weight_grad", "bubble", "p2p"} <= cats


@pytest.mark.parametrize("schedule", ["1f1b", "zb-v", "dualpipe"])
def test_chrome_trace_is_valid(schedule):
    report = _report(schedule)
    trace = json.loads(json.dumps(chrome_trace(report, training_timeline(report))))
    _check_trace(trace, 4, report.step_time_s)


def test_train_exports_trace_plots_html(tmp_path):
    trace, plots, html = tmp_path / "step.json", tmp_path / "plots", tmp_path / "step.html"
    result = runner.invoke(app, ["train", "--model", "llama3-8b", "--gpus", "8", "--tp", "2",
                                 "--pp", "4", "--sequence-parallel", "--seq-length", "2048",
                                 "--pipeline-schedule", "zb-h1", "--trace", str(trace),
                                 "--plot", str(plots), "--report", str(html), "--json"])
    assert result.exit_code == 0, result.output
    step = json.loads(result.stdout)["step_time_s"]
    _check_trace(json.loads(trace.read_text()), 4, step)
    for name in ("gantt", "memory_over_time", "time_breakdown", "memory_breakdown", "roofline"):
        for ext in ("png", "svg"):
            assert (plots / f"{name}.{ext}").stat().st_size > 1000
    assert (plots / "gantt.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = html.read_text()
    assert text.count("<svg") == 5 and "Where the step time goes" in text
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", text, re.IGNORECASE)
    assert "<script" not in text and "<link" not in text
