"""``perfcast comm`` and the communication flags of the forecasting commands."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from perfcast.cli.main import app
from perfcast.estimate.training import estimate_training
from perfcast.specs.strategy import Strategy
from perfcast.specs.workload import Workload

runner = CliRunner()


def _json(args):
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_comm_json_keys_and_values():
    data = _json(["comm", "all-reduce", "--size-bytes", str(2**34), "--gpus", "8",
                  "--system", "dgx-h200", "--json"])
    assert {"time_s", "algbw_GBps", "busbw_GBps", "algorithm", "tiers_crossed"} <= set(data)
    assert data["algorithm"] == "nvls"
    assert data["busbw_GBps"] == pytest.approx(482.26, rel=0.15)  # collectives.md 5b
    assert data["busbw_GBps"] == pytest.approx(data["algbw_GBps"] * 2 * 7 / 8)


@pytest.mark.parametrize("collective", ["all-reduce", "all-gather", "reduce-scatter",
                                        "all-to-all", "send-recv"])
def test_comm_every_collective_runs(collective):
    data = _json(["comm", collective, "--size-bytes", "1e6", "--gpus", "16", "--json"])
    assert data["time_s"] > 0 and data["tiers_crossed"] == ["scale_up", "scale_out"]


def test_comm_forced_algorithm_and_text_output():
    data = _json(["comm", "all-to-all", "--size-bytes", "1e8", "--gpus", "32",
                  "--algorithm", "pxn", "--json"])
    assert data["algorithm"] == "pxn"
    result = runner.invoke(app, ["comm", "all-reduce", "--size-bytes", "1e9", "--gpus", "8"])
    assert result.exit_code == 0 and "busbw" in result.stdout


@pytest.mark.parametrize("args, field", [
    (["comm", "all-gather", "--size-bytes", "1e6", "--gpus", "8", "--algorithm", "nvls"],
     "algorithm"),
    (["comm", "all-reduce", "--size-bytes", "1e6", "--gpus", "1"], "gpus"),
    (["comm", "all-reduce", "--size-bytes", "1e6", "--gpus", "8", "--system", "nope"], "system"),
    (["train", "--model", "llama3-8b", "--gpus", "16", "--tp", "8",
      "--placement-order", "tp-dp"], "placement_order"),
])
def test_bad_input_is_one_line_exit_2(args, field):
    result = runner.invoke(app, args)
    assert result.exit_code == 2
    assert field in result.output and "Traceback" not in result.output


def _train(*flags):
    return _json(["train", "--model", "llama3-70b", "--system", "dgx-h100", "--gpus", "64",
                  "--tp", "8", "--pp", "2", "--sequence-parallel", "--seq-length", "8192",
                  "--global-batch-size", "64", "--json", *flags])


def test_tp_comm_overlap_hides_some_tp_communication():
    plain, overlapped = _train(), _train("--tp-comm-overlap")
    assert overlapped["strategy"]["tp_comm_overlap"] is True
    assert 0 < overlapped["breakdown_s"]["tp_comm"] < plain["breakdown_s"]["tp_comm"]


def test_placement_order_moves_tp_across_nodes():
    inner = _train()
    outer = _train("--placement-order", "dp-tp-cp-ep-pp")  # TP ranks 4 apart: across nodes
    assert outer["breakdown_s"]["tp_comm"] > 2 * inner["breakdown_s"]["tp_comm"]


def test_ep_overlap_hides_all_to_all(small_moe=("mixtral-8x7b",)):
    from perfcast.catalog.models import load_model
    from perfcast.catalog.systems import load_system

    model, system = load_model(small_moe[0]), load_system("dgx-h100", num_gpus=16)
    workload = Workload(seq_length=4096, global_batch_size=16)
    base = dict(num_gpus=16, tp=2, ep=8, sequence_parallel=True, recompute="full")
    plain = estimate_training(model, system, Strategy(**base), workload)
    hidden = estimate_training(model, system, Strategy(**base, ep_overlap=True), workload)
    assert 0 <= hidden.breakdown.ep_comm_s < plain.breakdown.ep_comm_s
