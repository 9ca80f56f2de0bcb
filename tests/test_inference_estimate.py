"""Serving forecasts: KV bytes and max batch by hand (GQA, MLA), formulas, options."""

from __future__ import annotations

import math

import pytest

from perfcast.calibration.memory_overheads import load_memory_overheads
from perfcast.catalog.models import load_model
from perfcast.catalog.systems import load_system
from perfcast.errors import InputError
from perfcast.estimate.inference import estimate_inference, expected_tokens_per_step
from perfcast.estimate.inference_ops import expected_experts_hit
from perfcast.graph.params import count_params
from perfcast.memory.inference import kv_cache_bytes_per_token
from perfcast.specs.inference import Offload, SpeculativeDecoding
from perfcast.specs.strategy import Strategy

WORKSPACE_FACTOR = load_memory_overheads().inference_workspace_tokens_factor
RUNTIME_BYTES = load_memory_overheads().inference_runtime_bytes


def test_kv_bytes_per_token_gqa_by_hand():
    model = load_model("llama-3.1-70b")  # 80 layers, 8 KV heads x 128, 16-bit
    assert kv_cache_bytes_per_token(model, tp=1) == 2 * 80 * 8 * 128 * 2 == 327_680
    assert kv_cache_bytes_per_token(model, tp=4) == 81_920
    assert kv_cache_bytes_per_token(model, tp=16) == 2 * 80 * 1 * 128 * 2  # heads replicate


def test_kv_bytes_per_token_mla_by_hand():
    model = load_model("deepseek-v3")  # 61 layers, latent 512 + rope 64, fp8 cache
    assert kv_cache_bytes_per_token(model, tp=8, kv_bytes=1.0) == 61 * (512 + 64) == 35_136


def test_max_batch_gqa_by_hand():
    model, system = load_model("llama-3.1-8b"), load_system("dgx-h100", num_gpus=1)
    report = estimate_inference(model, system, batch_size=1, input_len=3072, output_len=1024)
    weights = count_params(model).total * 2
    per_token = 2 * 32 * 8 * 128 * 2 + WORKSPACE_FACTOR * model.hidden_size * 2
    expected = math.floor((80e9 - weights - RUNTIME_BYTES) / (4096 * per_token))
    assert report.max_batch_size == expected
    fits = estimate_inference(model, system, batch_size=expected, input_len=3072, output_len=1024)
    over = estimate_inference(model, system, batch_size=expected + 1, input_len=3072,
                              output_len=1024)
    assert fits.fits and not over.fits


def test_max_batch_mla_attention_dp_by_hand():
    model, system = load_model("deepseek-v2-lite"), load_system("dgx-h100", num_gpus=2)
    strategy = Strategy(num_gpus=2, tp=2)
    base = estimate_inference(model, system, strategy, input_len=1024, output_len=1024)
    adp = estimate_inference(model, system, strategy, input_len=1024, output_len=1024,
                             attention_dp=True)
    latent = model.num_hidden_layers * (model.kv_lora_rank + model.qk_rope_head_dim) * 2
    assert base.memory.kv_cache_bytes == pytest.approx(2048 * latent)
    assert adp.memory.kv_cache_bytes == pytest.approx(2048 * latent / 2)
    assert adp.max_batch_size > base.max_batch_size


def test_expected_experts_hit():
    assert expected_experts_hit(8, 2, 1) == pytest.approx(2.0)
    assert expected_experts_hit(8, 2, 1000) == pytest.approx(8.0)
    assert expected_experts_hit(256, 8, 4) < 32


def test_speculative_tokens_per_step_leviathan():
    assert expected_tokens_per_step(0.8, 4) == pytest.approx((1 - 0.8**5) / 0.2)


def test_speculation_speeds_up_decode_with_good_draft():
    system = load_system("dgx-h100", num_gpus=1)
    target, draft = load_model("llama-3.1-8b"), load_model("llama-3.2-1b")
    plain = estimate_inference(target, system, input_len=128, output_len=128)
    spec = estimate_inference(target, system, input_len=128, output_len=128, speculative=(
        SpeculativeDecoding(draft_model=draft, acceptance_rate=0.8, num_draft_tokens=4)))
    assert spec.tpot_s < plain.tpot_s
    assert spec.speculation.tokens_per_target_step == pytest.approx(expected_tokens_per_step(0.8, 4))


def test_offload_slows_decode_and_frees_memory():
    model, system = load_model("llama-3.1-8b"), load_system("dgx-a100", num_gpus=1)
    base = estimate_inference(model, system, output_len=16)
    off = estimate_inference(model, system, output_len=16, offload=Offload(weights_cpu=0.5))
    assert off.tpot_s > 5 * base.tpot_s  # half the weights over PCIe every step
    assert off.memory.weights_bytes == pytest.approx(base.memory.weights_bytes / 2)
    assert off.decode.offload_s > 0


def test_weight_only_int4_decodes_faster_than_bf16():
    model, system = load_model("llama-2-7b"), load_system("dgx-a100", num_gpus=1)
    bf16 = estimate_inference(model, system, input_len=5, output_len=200)
    int4 = estimate_inference(model, system, input_len=5, output_len=200, weight_precision="int4")
    assert int4.tpot_s < 0.75 * bf16.tpot_s  # gpt-fast A100: 105 -> 197 tokens/s
    assert int4.memory.weights_bytes == pytest.approx(bf16.memory.weights_bytes / 4)


def test_sliding_window_caps_decode_attention():
    model, system = load_model("mistral-7b-v0.1"), load_system("dgx-h100", num_gpus=1)
    short = estimate_inference(model, system, input_len=8192, output_len=2)
    long = estimate_inference(model, system, input_len=16384, output_len=2)
    assert long.decode.attention_s == pytest.approx(short.decode.attention_s)


def test_fp4_needs_blackwell_and_fp8_needs_hopper():
    model = load_model("llama-3.1-8b")
    estimate_inference(model, load_system("dgx-b200", num_gpus=1), precision="fp4")
    with pytest.raises(InputError, match="fp8"):
        estimate_inference(model, load_system("dgx-a100", num_gpus=1), precision="fp8")


def test_continuous_batching_throughput_and_breakdown():
    model, system = load_model("llama-3.1-8b"), load_system("dgx-h100", num_gpus=2)
    report = estimate_inference(model, system, Strategy(num_gpus=2), batch_size=64,
                                batching="continuous", input_len=512, output_len=256)
    assert report.replicas == 2
    assert report.output_tokens_per_s == pytest.approx(2 * 64 / report.tpot_s)
    assert report.decode.total_s == pytest.approx(report.tpot_s)


def test_moe_decode_reads_only_hit_experts():
    model, system = load_model("mixtral-8x7b"), load_system("dgx-h100", num_gpus=2)
    strategy = Strategy(num_gpus=2, tp=2)
    one = estimate_inference(model, system, strategy, batch_size=1, output_len=8)
    many = estimate_inference(model, system, strategy, batch_size=64, output_len=8)
    # Batch 1 reads 2 of 8 experts; batch 64 reads all 8: GEMM time grows ~3-4x, not 64x.
    assert 2.0 < many.decode.gemm_s / one.decode.gemm_s < 5.0


def test_fp4_weights_beside_16_bit_activations_dequantize_like_int4():
    """MXFP4 weights with BF16 activations (gpt-oss 'as released' on H100: no FP4 MMA) are
    upcast in the GEMM main loop like int4 weight-only, so they take the fitted 4-bit dequant
    efficiency; FP4 W+A on FP4 tensor cores dequantizes nothing."""
    from perfcast.calibration.inference_overheads import load_inference_overheads
    from perfcast.estimate.inference import dequant_efficiency
    from perfcast.specs.inference import InferencePrecision

    overheads = load_inference_overheads()
    w4a16 = InferencePrecision(weights="fp4", activations="bf16")
    assert w4a16.weight_only
    assert dequant_efficiency(overheads, w4a16) == overheads.dequant_bandwidth_efficiency["int4"]
    assert dequant_efficiency(overheads, w4a16) < 1.0
    w4a4 = InferencePrecision(weights="fp4", activations="fp4")
    assert not w4a4.weight_only and dequant_efficiency(overheads, w4a4) == 1.0
    assert dequant_efficiency(overheads, InferencePrecision()) == 1.0
