"""Data-parallel gradient reduction and parameter gather under the interleaved schedule, and
without overlap (issue 21, NeMo performance rows).

Megatron-Core launches each model chunk's gradient reduction after that chunk's last
micro-batch backward and the next chunk's parameter gather when the previous chunk starts its
first micro-batch (``schedules.py`` ``forward_backward_pipelining_with_interleaving``): the
windows grow with the micro-batch group and the number of chunks. Megatron-LM of 2021
all-reduces after the whole schedule (profile ``overlap_grad_reduce: false``)."""

from __future__ import annotations

import pytest

from perfcast.catalog.framework_defaults import RunFacts, apply_framework_profile
from perfcast.catalog.frameworks import framework_of_text
from perfcast.graph.param_sharding import stage_params
from perfcast.schedule.data_parallel import (
    data_parallel_time,
    interleaved_chunks,
    interleaved_windows,
)
from perfcast.schedule.overlap import exposed_comm_s, stream_overlap_slowdown
from perfcast.schedule.stage_time import StageTime
from perfcast.specs.strategy import Strategy

from conftest import megatron_gpt

GPT = megatron_gpt("gpt-24l", 24, 8192, 64)
LAYER_F_S, LAYER_B_S = 0.002, 0.004


def _times(layers: int) -> StageTime:
    return StageTime(gemm_s=0.0, attention_s=0.0, memory_bound_s=0.0, recompute_s=0.0,
                     tp_comm_s=0.0, cp_comm_s=0.0, ep_comm_s=0.0, layer_forward_s=LAYER_F_S,
                     layer_backward_s=LAYER_B_S, backward_compute_s=LAYER_B_S * layers,
                     forward_s=LAYER_F_S * layers, wgrad_s=0.0)


def _strategy(**update) -> Strategy:
    """TP8 PP4 DP4 on 128 GPUs, distributed optimizer, bf16 gradients (reduce-scatter and
    gather move the same bytes); the DP group crosses nodes."""
    return Strategy(num_gpus=128, tp=8, pp=4, distributed_optimizer=True, grad_reduce_dtype="bf16",
                    sequence_parallel=True, **update)


def _dp(strategy: Strategy, system, num_micro_batches=None):
    params = stage_params(GPT, strategy, 1)
    return data_parallel_time(params, _times(params.num_layers), system, strategy,
                              num_micro_batches=num_micro_batches), params


def test_windows_reduce_to_one_micro_batch_without_chunks():
    whole, last = interleaved_windows(0.8, 1, 4, 8)
    assert whole == pytest.approx(0.8 * (1 - 1 / 8)) and last == pytest.approx(whole)


def test_windows_identity_with_chunks():
    """v = 3 chunks of 2 layers, groups of 4: each chunk pass 0.3/3 = 0.1 s; the whole
    collective hides under 4·2 chunk passes + the last chunk's pass less one layer (0.05 s)."""
    whole, last = interleaved_windows(0.3, 3, 4, 6)
    assert last == pytest.approx(0.05)
    assert whole == pytest.approx(4 * 2 * 0.1 + 0.05)


def test_chunks_follow_the_schedule():
    assert interleaved_chunks(_strategy(vpp=3)) == 3
    assert interleaved_chunks(_strategy()) == 1
    assert interleaved_chunks(_strategy(vpp=3, pipeline_schedule="interleaved")) == 3


def test_interleaved_exposure_identity(a100_system):
    """Exposed = max over (whole collective, its window) and (last chunk's 1/v share, its
    window), for the reduce-scatter and the gather: the schedule-level formula."""
    strategy = _strategy(vpp=3)
    dp, params = _dp(strategy, a100_system, num_micro_batches=16)
    layers = params.num_layers
    slow = stream_overlap_slowdown()
    half = dp.total_s / 2  # reduce-scatter and all-gather of the same bf16 bytes
    bwd_all, bwd_last = interleaved_windows(LAYER_B_S * layers, 3, 4, layers)
    fwd_all, fwd_last = interleaved_windows(LAYER_F_S * layers, 3, 4, layers)
    expected = (max(exposed_comm_s(half, bwd_all, slow), exposed_comm_s(half / 3, bwd_last, slow))
                + max(exposed_comm_s(half, fwd_all, slow),
                      exposed_comm_s(half / 3, fwd_last, slow)))
    assert dp.exposed_step_s == pytest.approx(expected)


def test_interleaving_exposes_less_than_one_micro_batch_window(a100_system):
    """Same stage, same bytes: the chunked launch hides more than the single micro-batch
    window the 1F1B schedule gives (the pre-issue-21 model for every schedule)."""
    chunked, params = _dp(_strategy(vpp=3), a100_system, num_micro_batches=16)
    layers = params.num_layers
    slow = stream_overlap_slowdown()
    half = chunked.total_s / 2
    one_mb = (exposed_comm_s(half, LAYER_B_S * (layers - 1), slow)
              + exposed_comm_s(half, LAYER_F_S * (layers - 1), slow))
    assert chunked.exposed_step_s < 0.9 * one_mb
    # fewer micro-batches than pp: the group is the micro-batches there are
    few, _ = _dp(_strategy(vpp=3), a100_system, num_micro_batches=2)
    bwd_all, bwd_last = interleaved_windows(LAYER_B_S * layers, 3, 2, layers)
    fwd_all, fwd_last = interleaved_windows(LAYER_F_S * layers, 3, 2, layers)
    assert few.exposed_step_s == pytest.approx(
        max(exposed_comm_s(half, bwd_all, slow), exposed_comm_s(half / 3, bwd_last, slow))
        + max(exposed_comm_s(half, fwd_all, slow), exposed_comm_s(half / 3, fwd_last, slow)))


def test_no_overlap_exposes_everything(a100_system):
    dp, _ = _dp(_strategy(vpp=3, overlap_grad_reduce=False), a100_system, 16)
    assert dp.exposed_step_s == pytest.approx(dp.total_s) and dp.total_s > 0


@pytest.mark.parametrize(("text", "overlap"), [("Megatron-LM", False),
                                               ("NeMo 2.0 / Megatron-Core", True)])
def test_profiles_state_the_overlap(text, overlap):
    framework = framework_of_text(text, "2021")
    facts = RunFacts(tp=8, ep=1, precision="bf16", generation="hopper", layers_per_stage=6)
    fields = apply_framework_profile(framework, {}, facts).fields
    assert fields["overlap_grad_reduce"] is overlap


def test_cli_flag_turns_the_overlap_off():
    import json

    from typer.testing import CliRunner

    from perfcast.cli.main import app

    base = ["train", "--model", "llama3-70b", "--system", "dgx-h100", "--gpus", "64", "--tp", "8",
            "--pp", "2", "--sequence-parallel", "--use-distributed-optimizer", "--seq-length",
            "8192", "--global-batch-size", "128", "--json"]
    runs = {}
    for flag in ("--overlap-grad-reduce", "--no-overlap-grad-reduce"):
        result = CliRunner().invoke(app, [*base, flag])
        assert result.exit_code == 0, result.output
        runs[flag] = json.loads(result.output)
    on, off = runs["--overlap-grad-reduce"], runs["--no-overlap-grad-reduce"]
    assert off["strategy"]["overlap_grad_reduce"] is False
    assert off["breakdown_s"]["dp_comm"] > on["breakdown_s"]["dp_comm"]
    assert "DP gradient reduction after the whole backward, not overlapped" in off["assumptions"]
