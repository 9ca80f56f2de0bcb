"""Measured (prompt, output) pairs as the request lengths (``ServingWorkload.length_samples``)."""

from __future__ import annotations

import json
from functools import cache

import numpy as np
import pytest
from pydantic import ValidationError

from perfcast.catalog.models import load_model
from perfcast.catalog.systems import load_system
from perfcast.estimate.serving import estimate_serving, serving_setup
from perfcast.estimate.serving_sim import sample_lengths, simulate
from perfcast.estimate.serving_step_cost import build_step_cost
from perfcast.specs.serving import LengthSample, ServingWorkload
from perfcast.specs.strategy import Strategy

# nine short answers and one long one: mean output (9·40 + 1000)/10 = 136 tokens
TAIL = tuple([LengthSample(input_len=200, output_len=40)] * 9
             + [LengthSample(input_len=200, output_len=1000)])


def _open_loop(samples: tuple[LengthSample, ...] | None, output_len: int,
               seed: int = 0) -> ServingWorkload:
    return ServingWorkload(mode="request_rate", request_rate_per_s=20.0, num_requests=400,
                           input_len=200, output_len=output_len, length_samples=samples,
                           seed=seed)


def test_lengths_are_drawn_from_the_pairs_with_replacement():
    w = _open_loop(TAIL, 1000)
    ins, outs = sample_lengths(w, np.random.default_rng(3))
    assert set(outs.tolist()) == {40, 1000} and set(ins.tolist()) == {200}
    assert np.mean(outs == 1000) == pytest.approx(0.1, abs=0.05)
    again, _ = sample_lengths(w, np.random.default_rng(3))
    assert np.array_equal(again, ins)


def test_input_and_output_len_must_be_the_largest_sample():
    with pytest.raises(ValidationError, match="largest of length_samples"):
        _open_loop(TAIL, 136)
    with pytest.raises(ValidationError, match="length_range_ratio"):
        ServingWorkload(mode="offline", num_requests=10, input_len=200, output_len=1000,
                        length_samples=TAIL, length_range_ratio=0.8)


@cache
def _h100_8b():
    model, system = load_model("llama-3.1-8b"), load_system("dgx-h100", num_gpus=1)
    return model, system, Strategy(num_gpus=1)


def test_a_long_tailed_stream_drains_longer_than_fixed_lengths_of_its_mean():
    """A finite open-loop run ends when its last long answer finishes: with the same mean
    output, a long-tailed stream runs longer and its tokens/duration throughput is lower."""
    model, system, strategy = _h100_8b()
    fixed = estimate_serving(model, system, strategy, _open_loop(None, 136))
    tail = estimate_serving(model, system, strategy, _open_loop(TAIL, 1000))
    assert tail.output_tokens == pytest.approx(fixed.output_tokens, rel=0.2)
    assert tail.duration_s > 1.1 * fixed.duration_s
    assert tail.output_tokens_per_s < 0.9 * fixed.output_tokens_per_s


def test_each_answer_takes_at_least_its_decode_steps():
    """A request's decode lasts at least (output − 1) of the cheapest decode step."""
    model, system, strategy = _h100_8b()
    setup = serving_setup(model, system, strategy)
    w = _open_loop(TAIL, 1000, seed=5)
    cost = build_step_cost(setup.ctx, setup.config, 64, w.context_tokens)
    run = simulate(w, cost, setup.config, setup.memory.kv_pool_tokens,
                   setup.memory.kv_block_tokens)
    floor_s = cost.decode_s(1, 200)
    decode_s = run.finish_s - run.first_token_s
    assert np.all(decode_s >= (run.output_len - 1) * floor_s * 0.97)
    assert run.finish_s.max() >= run.arrival_s[run.output_len == 1000].max() + 999 * floor_s * 0.97


def _infer(*args: str):
    from typer.testing import CliRunner

    from perfcast.cli.main import app
    return CliRunner().invoke(app, ["infer", "--model", "llama-3.1-8b", "--system", "dgx-h100",
                                    "--gpus", "1", "--request-rate", "20",
                                    "--num-requests", "200", *args])


def test_cli_reads_a_saved_benchmark_result(tmp_path):
    path = tmp_path / "result.json"
    path.write_text(json.dumps({"input_lens": [s.input_len for s in TAIL],
                                "output_lens": [s.output_len for s in TAIL], "ttfts": []}))
    result = _infer("--length-samples", str(path), "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["workload"]["output_len"] == 1000 and data["workload"]["input_len"] == 200
    assert len(data["workload"]["length_samples"]) == 10
    fixed = json.loads(_infer("--input-len", "200", "--output-len", "136", "--json").stdout)
    assert data["output_tokens_per_s"] < fixed["output_tokens_per_s"]


@pytest.mark.parametrize(("content", "reason"), [
    ("not json", "is not JSON"),
    ('{"input_lens": [10, 20], "output_lens": [5]}', "output_lens 1"),
    ('{"input_lens": [10, 0], "output_lens": [5, 6]}', "positive integer"),
    ('{"output_lens": [5]}', "input_lens"),
])
def test_bad_length_samples_file_is_a_one_line_error(tmp_path, content, reason):
    path = tmp_path / "bad.json"
    path.write_text(content)
    result = _infer("--length-samples", str(path))
    assert result.exit_code == 2
    assert "length_samples" in result.output and reason in result.output
    assert "Traceback" not in result.output


def test_missing_length_samples_file_is_a_one_line_error(tmp_path):
    result = _infer("--length-samples", str(tmp_path / "none.json"))
    assert result.exit_code == 2 and "cannot be read" in result.output
    assert "Traceback" not in result.output
