"""DeepEP low-latency dispatch: README bandwidths, FP8/BF16 volumes, decode-only use."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from perfcast import Strategy, Workload, estimate_training, load_model, load_system
from perfcast.calibration.deepep_low_latency import load_deepep_low_latency
from perfcast.cli.main import app
from perfcast.comm.dispatch import low_latency_all_to_all_time_s
from perfcast.errors import InputError
from perfcast.estimate.inference import estimate_inference
from perfcast.graph.layer import LayerShape, layer_ops, low_latency_dispatch_ops
from perfcast.graph.ops import LOW_LATENCY_ALGORITHM, Phase

DEEPSEEK_V3 = load_model("deepseek-v3")
H100_2_NODES = load_system("dgx-h100", num_gpus=16)

# DeepEP v1 README (shared/reference/collectives.md §7): 128 tokens, hidden 7168, top-8,
# FP8 dispatch / BF16 combine; latency in microseconds by EP size.
README_LATENCY_US = {8: (163, 318), 16: (173, 329), 32: (182, 350), 64: (186, 353),
                     128: (192, 369), 256: (194, 360)}


@pytest.mark.parametrize("ep", sorted(README_LATENCY_US))
def test_readme_latencies_reproduced(ep):
    """Bytes of the README's setup over the calibrated RDMA bandwidth give its latencies."""
    dispatch, combine = low_latency_dispatch_ops(128 * 8 * 7168)
    system = load_system("dgx-h100", num_gpus=ep)  # one 400 Gb/s NIC per GPU, as the H800s
    assert system.scale_out_bandwidth_Bps == load_deepep_low_latency().nic_line_rate_Bps.value
    for op, measured_us in zip((dispatch, combine), README_LATENCY_US[ep], strict=True):
        predicted_us = 1e6 * low_latency_all_to_all_time_s(op.size_bytes, system, ep)
        assert predicted_us == pytest.approx(measured_us, rel=0.035)  # measured: within 3.3%


def test_low_latency_volumes_are_fp8_dispatch_bf16_combine_forward_only():
    copies = 4096 * 8 * 7168
    dispatch, combine = low_latency_dispatch_ops(copies)
    assert dispatch.size_bytes == copies * (1 + 4 / 128) and combine.size_bytes == 2 * copies
    shape = LayerShape(micro_batch=1, seq_length=4096, ep=16, moe=True,
                       moe_token_dispatcher="deepep-low-latency")
    _, comm = layer_ops(DEEPSEEK_V3, shape)
    ep_ops = [op for op in comm if op.algorithm == LOW_LATENCY_ALGORITHM]
    assert [op.phase for op in ep_ops] == [Phase.FORWARD, Phase.FORWARD]
    assert sum(op.size_bytes for op in ep_ops) == pytest.approx((3 + 1 / 32) * copies)


def test_tiny_batches_floor_at_the_network_latency():
    t = low_latency_all_to_all_time_s(1.0, H100_2_NODES, 16)
    assert t == H100_2_NODES.scale_out_latency_s
    assert low_latency_all_to_all_time_s(1e9, H100_2_NODES, 1) == 0.0


def test_training_rejects_the_decode_only_dispatcher():
    strategy = Strategy(num_gpus=16, pp=1, ep=16, moe_token_dispatcher="deepep-low-latency")
    with pytest.raises(InputError, match="moe_token_dispatcher"):
        estimate_training(DEEPSEEK_V3, load_system("dgx-h100", num_gpus=16), strategy,
                          Workload(seq_length=4096, global_batch_size=16))


def _serve(dispatcher: str, batch_size: int):
    strategy = Strategy(num_gpus=16, tp=16, ep=16, etp=1, moe_token_dispatcher=dispatcher)
    return estimate_inference(DEEPSEEK_V3, H100_2_NODES, strategy, batch_size=batch_size,
                              input_len=1024, output_len=128, precision="fp8")


def test_low_latency_decode_prefill_normal():
    """Prefill runs DeepEP's normal kernels (same TTFT); at batch 1 the one-shot RDMA dispatch
    beats NCCL's and DeepEP-normal's multi-step all-to-alls; at large batch it does not."""
    small = {d: _serve(d, 1) for d in ("alltoall", "deepep", "deepep-low-latency")}
    assert small["deepep-low-latency"].ttft_s == small["deepep"].ttft_s
    assert small["deepep-low-latency"].tpot_s < small["deepep"].tpot_s < small["alltoall"].tpot_s
    assert _serve("deepep-low-latency", 512).tpot_s > _serve("deepep", 512).tpot_s


def test_cli_infer_dispatcher_flag_and_train_rejection():
    runner = CliRunner()
    args = ["--model", "deepseek-v3", "--system", "dgx-h100", "--tp", "16", "--ep", "16",
            "--precision", "fp8", "--moe-token-dispatcher-type", "deepep-low-latency"]
    result = runner.invoke(app, ["infer", *args, "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["strategy"]["moe_token_dispatcher"] == "deepep-low-latency"
    result = runner.invoke(app, ["train", "--gpus", "16", "--pp", "1", *args[:4], "--ep", "16",
                                 "--moe-token-dispatcher-type", "deepep-low-latency"])
    assert result.exit_code == 2 and "moe_token_dispatcher" in result.output
