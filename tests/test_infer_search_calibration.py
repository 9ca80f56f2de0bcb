"""``--calibration DIR`` reaches the serving search (issue 21 item 1): ``perfcast infer-search``
and ``perfcast sweep --serving`` price the screen (``serving_search.screen``) and the exact
re-score (``serving_search.exact``, the simulation) with the directory's serving overheads and
graph kernel gaps; the shipped calibration gives the same numbers as before; a bad directory
is a one-line exit 2."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from perfcast.calibration.bundle import load_calibration
from perfcast.calibration.graph_replay import load_graph_replay
from perfcast.catalog.models import load_model
from perfcast.catalog.systems import load_system
from perfcast.cli.main import app
from perfcast.serving_search import Deployment, InstanceLayout, Targets, search_deployments
from perfcast.serving_search.exact import evaluate
from perfcast.serving_search.screen import layout_table
from perfcast.serving_search.sweep import serving_sweep_tasks
from perfcast.validate.calibration_writer import write_graph_replay_file
from perfcast.validate.fit_graph_replay import GraphReplayFit

runner = CliRunner()
LAYOUT = InstanceLayout(tp=1, pp=1, ep=1, attention_dp=False, precision="bf16",
                        kv_precision="bf16")
SEARCH = ("-m llama3-8b --gpus 2 --input-len 512 --output-len 128 --tpot-ms 10 --json")


@pytest.fixture(scope="module")
def doubled_gap(tmp_path_factory) -> Path:
    """A calibration directory whose graph kernel gaps are twice the shipped ones, written by
    the package's own writer (what ``perfcast calibrate --out DIR`` writes)."""
    shipped = load_graph_replay()
    assert shipped.fit is not None
    doubled = shipped.model_copy(update={"vendors": {
        v: e.model_copy(update={"kernel_gap_s": 2 * e.kernel_gap_s})
        for v, e in shipped.vendors.items()}})
    out = tmp_path_factory.mktemp("doubled_gap")
    write_graph_replay_file(GraphReplayFit((), doubled, shipped.fit.num_rows, {}, ()), out,
                            {"inference.csv": "0" * 64}, {})
    assert load_calibration(out).graph_gaps.kernel_gap_s("nvidia") == pytest.approx(
        2 * shipped.kernel_gap_s("nvidia"), rel=1e-3)
    return out


def _h100(gpus: int):
    return load_model("llama3-8b"), load_system("dgx-h100").with_num_gpus(gpus)


def test_the_screen_prices_graphed_decode_with_the_calibration_gap(doubled_gap):
    model, system = _h100(1)
    levels = np.array([1.0, 8.0, 64.0])
    shipped = layout_table(model, system, LAYOUT, 512, 128, levels, "vllm")
    mine = layout_table(model, system, LAYOUT, 512, 128, levels, "vllm",
                        calibration=load_calibration(doubled_gap))
    assert shipped is not None and mine is not None
    assert np.all(mine.decode_s > shipped.decode_s * 1.01)
    explicit = layout_table(model, system, LAYOUT, 512, 128, levels, "vllm",
                            calibration=load_calibration())
    assert explicit is not None and np.array_equal(explicit.decode_s, shipped.decode_s)


@pytest.mark.parametrize("mode", ["aggregated", "disaggregated"])
def test_the_exact_path_simulates_with_the_calibration_gap(doubled_gap, mode):
    model, system = _h100(2)
    dep = (Deployment("aggregated", LAYOUT, instances=2, concurrency=16) if mode == "aggregated"
           else Deployment("disaggregated", LAYOUT, instances=1, concurrency=16, prefill=LAYOUT,
                           prefill_instances=1))
    shipped = evaluate(model, system, dep, 512, 128, "vllm", Targets())
    mine = evaluate(model, system, dep, 512, 128, "vllm", Targets(),
                    calibration=load_calibration(doubled_gap))
    assert shipped.fits and mine.fits
    assert mine.tpot_s > shipped.tpot_s * 1.01
    assert mine.output_tokens_per_s < shipped.output_tokens_per_s


def test_the_shipped_calibration_gives_the_same_search():
    model, system = _h100(2)
    default = search_deployments(model, system, 2, 512, 128, targets=Targets(tpot_s=0.01),
                                 top=3, disaggregated=True)
    explicit = search_deployments(model, system, 2, 512, 128, targets=Targets(tpot_s=0.01),
                                  top=3, disaggregated=True, calibration=load_calibration())
    assert default.to_dict() == explicit.to_dict()


def _invoke(command: str):
    return runner.invoke(app, shlex.split(command))


def test_infer_search_uses_the_calibration_dir(doubled_gap):
    shipped, mine = (_invoke(f"infer-search {SEARCH}"),
                     _invoke(f"infer-search {SEARCH} --calibration {doubled_gap}"))
    assert shipped.exit_code == 0 and mine.exit_code == 0, mine.output[-500:]
    best = [json.loads(r.stdout)["best"][0] for r in (shipped, mine)]
    # a slower graphed decode: less throughput per GPU under the same 10 ms TPOT target
    assert best[1]["output_tokens_per_s_per_gpu"] < best[0]["output_tokens_per_s_per_gpu"] * 0.99


def test_infer_search_reproduce_line_carries_the_calibration(doubled_gap):
    result = _invoke(f"infer-search -m llama3-8b --gpus 2 --input-len 512 --output-len 128 "
                     f"--top 1 --calibration {doubled_gap}")
    assert result.exit_code == 0, result.output[-500:]
    line = next(x for x in result.output.splitlines() if x.startswith("reproduce"))
    assert f"--calibration {doubled_gap}" in line


def test_serving_sweep_uses_the_calibration_dir(doubled_gap):
    args = ("sweep --serving -m llama3-8b --gpus 2 --systems dgx-h100 --input-len 512 "
            "--output-len 128 --tpot-ms 10 --json")
    shipped, mine = _invoke(args), _invoke(f"{args} --calibration {doubled_gap}")
    assert shipped.exit_code == 0 and mine.exit_code == 0, mine.output[-500:]
    rows = [json.loads(r.stdout)["rows"][0] for r in (shipped, mine)]
    assert (rows[1]["best_output_tokens_per_s_per_gpu"]
            < rows[0]["best_output_tokens_per_s_per_gpu"] * 0.99)
    assert "calibration=" not in rows[0]["task_id"]  # shipped rows keep their ids (resume)
    assert rows[1]["task_id"].endswith(f"|calibration={doubled_gap.resolve()}")


def test_serving_sweep_tasks_carry_the_directory():
    tasks = serving_sweep_tasks("llama3-8b", ["dgx-h100"], [2], 512, 128, [None], [None], None,
                                "vllm", False, "/cal")
    assert [t.calibration_dir for t in tasks] == ["/cal"]


@pytest.mark.parametrize("command", [
    f"infer-search {SEARCH}",
    "sweep --serving -m llama3-8b --gpus 2 --systems dgx-h100 --input-len 512 --output-len 128",
])
@pytest.mark.parametrize("bad", ["missing", "empty"])
def test_a_bad_calibration_dir_is_one_line_exit_2(tmp_path, command, bad):
    directory = tmp_path / bad
    if bad == "empty":
        directory.mkdir()  # a directory without calibration files
    result = _invoke(f"{command} --calibration {directory}")
    lines = result.output.strip().splitlines()
    assert result.exit_code == 2, result.output[-500:]
    assert len(lines) == 1 and "calibration" in lines[0] and str(directory) in lines[0]
    assert "Traceback" not in result.output
