"""``perfcast infer --concurrency ... --scheduler-recv-interval N`` (alias
``--num-scheduler-steps``): new requests join only every N decode steps (SGLang's receive
skipper, vLLM V0 multi-step scheduling; ``EngineConfig.scheduler_steps``). Issue 17: a
scheduler that reads requests every 30 decode steps adds ~20 decode steps to the median TTFT
of the InferenceX B200/B300 SGLang runs (docs/inferencex_ttft.md)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from perfcast.cli.main import app

runner = CliRunner()
SGLANG_RUN = ("infer", "--model", "llama-3.1-70b", "--system", "dgx-h100", "--tp", "8",
              "--precision", "fp8", "--engine", "sglang", "--engine-version", "0.5.12",
              "--concurrency", "64", "--num-requests", "640", "--input-len", "1024",
              "--output-len", "1024", "--length-range-ratio", "0.8", "--json")


@pytest.fixture(scope="module")
def default_and_interval_30():
    default = runner.invoke(app, list(SGLANG_RUN))
    held = runner.invoke(app, [*SGLANG_RUN, "--scheduler-recv-interval", "30"])
    assert default.exit_code == 0 and held.exit_code == 0, default.output + held.output
    return json.loads(default.stdout), json.loads(held.stdout)


def test_interval_adds_decode_steps_to_the_median_ttft(default_and_interval_30):
    """A closed-loop arrival waits for the next read: up to 30 decode steps, about half of
    them at the median, while the decode step itself barely moves (prefills batch up)."""
    default, held = default_and_interval_30
    tpot = default["percentiles"]["tpot_s"]["median"]
    extra_steps = (held["percentiles"]["ttft_s"]["median"]
                   - default["percentiles"]["ttft_s"]["median"]) / tpot
    assert 10.0 < extra_steps < 25.0  # 20.0 steps with the shipped calibration
    assert held["tpot_s"] == pytest.approx(default["tpot_s"], rel=0.15)


def test_num_scheduler_steps_is_the_same_option():
    result = runner.invoke(app, ["infer", "--model", "llama-3.1-8b", "--system", "dgx-h100",
                                 "--engine", "vllm", "--engine-version", "0.6.3",
                                 "--concurrency", "16", "--num-requests", "64",
                                 "--num-scheduler-steps", "8", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["ttft_s"] > 0


@pytest.mark.parametrize(("args", "text"), [
    (("--concurrency", "8", "--scheduler-recv-interval", "0"), "scheduler_recv_interval=0"),
    (("--scheduler-recv-interval", "10"), "scheduler_recv_interval=10"),
])
def test_bad_use_is_a_one_line_error(args, text):
    result = runner.invoke(app, ["infer", "--model", "llama-3.1-8b", "--system", "dgx-h100",
                                 *args])
    assert result.exit_code == 2
    assert text in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_sglang_with_attention_dp_refuses_the_interval():
    """SGL@0.5.12 managers/scheduler_recv_skipper.py: ``assert not
    server_args.enable_dp_attention``."""
    result = runner.invoke(app, ["infer", "--model", "deepseek-v3", "--system", "dgx-h200",
                                 "--tp", "8", "--precision", "fp8", "--attention-dp",
                                 "--engine", "sglang", "--concurrency", "8",
                                 "--scheduler-recv-interval", "10"])
    assert result.exit_code == 2
    assert "attention DP" in result.output and "Traceback" not in result.output
