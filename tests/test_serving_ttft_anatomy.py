"""tools/serving_ttft_anatomy.py: the statistics it reads from a row's notes, what it derives
from them, and its what-if engine overrides on a small CSV (issue 17, InferenceX TTFT)."""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

import pytest

TOOLS = Path(__file__).resolve().parents[1] / "tools"
sys.path.insert(0, str(TOOLS))
try:
    import serving_ttft_anatomy as anatomy
finally:
    sys.path.remove(str(TOOLS))

NOTES = ("InferenceX closed-loop client: dataset random, random-range-ratio 0.8, ignore_eos, "
         "request-rate inf, max-concurrency=conc, num_prompts=10*conc; TTFT/TPOT are MEDIANS "
         "over requests; single node aggregated serving: TP8, EP1, DP-attention=off; "
         "median TTFT (mean 1170.3 ms, p99 7271.3 ms)")


def test_stated_ttft_reads_median_mean_and_p99_in_seconds():
    stated = anatomy.stated_ttft(545.4, NOTES)
    assert stated == anatomy.StatedTtft(0.5454, 1.1703, 7.2713)
    assert anatomy.stated_ttft(545.4, "median TPOT (mean 21.9 ms, p99 23.0 ms)") is None


def test_prompts_per_client_from_notes_else_ten():
    assert anatomy.prompts_per_client(NOTES) == 10
    assert anatomy.prompts_per_client("num_prompts = 4 * conc") == 4
    assert anatomy.prompts_per_client("1000 prompts") == 10


def test_first_wave_mean_inverts_the_mixture():
    """mean = f·wave + (1 − f)·median with f = 1/10: a 6 s wave over a 0.4 s median gives a
    mean of 0.96 s, and the function recovers the 6 s."""
    stated = anatomy.StatedTtft(median_s=0.4, mean_s=0.1 * 6.0 + 0.9 * 0.4, p99_s=6.5)
    assert anatomy.first_wave_mean_s(stated, 10) == pytest.approx(6.0)
    # a run whose mean equals its median has a first wave at the median
    flat = anatomy.StatedTtft(median_s=0.2, mean_s=0.2, p99_s=0.3)
    assert anatomy.first_wave_mean_s(flat, 10) == pytest.approx(0.2)


def test_excess_steps_in_measured_decode_steps():
    assert anatomy.excess_steps(0.402, 0.063, 0.0162) == pytest.approx(20.93, abs=0.01)
    assert anatomy.excess_steps(0.1, 0.1, 0.01) == 0.0


@pytest.mark.parametrize(("text", "expected"), [
    ("scheduler_steps=30", ("scheduler_steps", 30)),
    ("gpu_memory_fraction=0.9", ("gpu_memory_fraction", 0.9)),
    ("chunked_prefill=false", ("chunked_prefill", False)),
    ("mixed_step_graph_max_tokens=none", ("mixed_step_graph_max_tokens", None)),
    ("scheduler_policy=mixed", ("scheduler_policy", "mixed")),
])
def test_parse_override(text, expected):
    assert anatomy.parse_override(text) == expected


@pytest.mark.parametrize("text", ["scheduler_steps", "=3"])
def test_parse_override_rejects_text_without_key_and_value(text):
    with pytest.raises(argparse.ArgumentTypeError, match="KEY=VALUE"):
        anatomy.parse_override(text)


def _shared_rows(ids: set[str]) -> list[dict[str, str]]:
    data = anatomy.DEFAULT_DATA
    if not data.exists():
        pytest.skip("shared ground truth not present")
    with data.open(newline="") as f:
        return [r for r in csv.DictReader(f) if r["row_id"] in ids]


def test_scheduler_recv_interval_what_if_lengthens_simulated_ttft(tmp_path):
    """Row 527 (B200, SGLang 0.5.12, TP8 FP8, 1k/1k, conc 64) and its TPOT row: receiving new
    requests only every 30 decode steps (``scheduler_steps``, SGLang --scheduler-recv-interval)
    moves the simulated median TTFT up by several decode steps; the measured statistics and
    TPOT are read off the rows."""
    rows = _shared_rows({"527", "528"})
    assert {r["metric"] for r in rows} == {"ttft", "tpot"}
    path = tmp_path / "rows.csv"
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    base = anatomy.anatomy_rows(path, ["semianalysis-inferencex"], None, "sglang", 1, {})
    what_if = anatomy.anatomy_rows(path, ["semianalysis-inferencex"], None, "sglang", 1,
                                   {"scheduler_steps": 30})
    assert [r.row_id for r in base] == ["527"] == [r.row_id for r in what_if]
    row, slow = base[0], what_if[0]
    assert row.measured is not None
    assert (row.measured.mean_s, row.measured.p99_s) == (1.1703, 7.2713)
    assert row.measured.median_s == pytest.approx(row.measured_median_s)
    assert row.tpot_s == pytest.approx(float(next(r for r in rows if r["metric"] == "tpot")
                                             ["value"]) / 1e3)
    steps = (slow.simulated.median_s - row.simulated.median_s) / row.tpot_s
    assert steps > 5.0
    assert abs(slow.error) < abs(row.error)
    text = anatomy.render(base)
    assert "527" in text and "1 rows: median-TTFT MAPE" in text
