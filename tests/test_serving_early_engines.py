"""Early-2025 engine releases (vLLM V0 0.6-0.8.0, SGLang 0.4.2-0.4.5): the kernels their
profiles name reach the step cost. Two mechanisms read from the released wheels
(serving/vllm.yaml, serving/sglang.yaml):

* the TP all-reduce: both engines switch their custom (peer-to-peer one-shot) all-reduce off on
  AMD GPUs (vLLM through 0.8.0, SGLang before 0.4.4), so every TP all-reduce is an RCCL
  all-reduce with its launch latency (``EngineConfig.tp_all_reduce``);
* the Triton MLA decode kernel (vLLM V0, SGLang 0.4 before 0.4.6) takes query heads in blocks
  of 16 and reads the compressed latent once per block (``EngineConfig.mla_decode_head_block``):
  8 reads a step where attention DP puts all 128 DeepSeek-V3 heads on each rank.
"""

from __future__ import annotations

import pytest

from perfcast.catalog.models import load_model
from perfcast.catalog.serving_engines import EngineTarget, engine_config
from perfcast.catalog.systems import load_system
from perfcast.estimate.inference_kernels import kv_read_amplification
from perfcast.estimate.inference_ops import AttentionPass
from perfcast.estimate.inference_phases import step_time
from perfcast.estimate.serving import serving_setup
from perfcast.specs.strategy import Strategy
from perfcast.units import GiB

AMD, NVIDIA = EngineTarget(gpu_vendor="amd"), EngineTarget(gpu_vendor="nvidia")


@pytest.mark.parametrize("engine, version, target, expected", [
    ("vllm", "0.6.4", AMD, "nccl"),
    ("vllm", "0.7.3", AMD, "nccl"),
    ("vllm", "0.8.0", AMD, "nccl"),
    ("vllm", "0.8.5", AMD, "custom"),
    ("vllm", "0.7.3", NVIDIA, "custom"),
    ("sglang", "0.4.2", AMD, "nccl"),
    ("sglang", "0.4.3", AMD, "nccl"),
    ("sglang", "0.4.4", AMD, "custom"),
    ("sglang", "0.5.12", AMD, "custom"),
    ("sglang", "0.4.3", NVIDIA, "custom"),
    ("tensorrt-llm", "0.17", NVIDIA, "custom"),
])
def test_rocm_releases_without_the_custom_all_reduce_run_rccl(engine, version, target, expected):
    config = engine_config(engine, 192 * GiB, version, target)
    assert config.tp_all_reduce == expected
    if expected == "nccl":
        assert "AMD" in config.source("tp_all_reduce")


def _decode_step(engine: str, version: str, system: str, attention_dp: bool = False,
                 seqs: float = 4.0):
    """One decode step of ``seqs`` DeepSeek-V3 sequences (3.6k cached tokens each) on 8 GPUs,
    TP 8."""
    setup = serving_setup(load_model("deepseek-v3"), load_system(system),
                          Strategy(num_gpus=8, tp=8), engine=engine, engine_version=version,
                          precision="fp8", attention_dp=attention_dp)
    ctx = setup.ctx
    passes = (AttentionPass(seqs, 1, 3600.0, causal=False),)
    return ctx, step_time(ctx, seqs, passes, seqs)


def test_rccl_all_reduces_slow_the_mi300x_decode_step():
    """vLLM 0.7.3 on MI300X: 2 all-reduces a layer × 61 layers, each at RCCL's launch-bound
    latency (~40 µs) instead of the one-shot kernel's (~7 µs): ~4 ms a step more."""
    old_ctx, old = _decode_step("vllm", "0.7.3", "mi300x-8")
    new_ctx, new = _decode_step("vllm", "0.8.5", "mi300x-8")
    assert (old_ctx.tp_all_reduce, new_ctx.tp_all_reduce) == ("nccl", "custom")
    assert float(old.tp_comm_s) > 3.0 * float(new.tp_comm_s)
    assert float(old.tp_comm_s) - float(new.tp_comm_s) > 2.5e-3
    # the same release on NVIDIA GPUs keeps its custom all-reduce
    h200_ctx, h200 = _decode_step("vllm", "0.7.3", "dgx-h200")
    assert h200_ctx.tp_all_reduce == "custom"
    assert float(h200.tp_comm_s) == pytest.approx(float(new.tp_comm_s), rel=0.3)


def test_triton_mla_decode_reads_the_latent_once_per_block_of_16_heads():
    deepseek, llama = load_model("deepseek-v3"), load_model("llama-3.1-70b")
    assert kv_read_amplification(deepseek, 128.0, 1.0, 0.0, 16) == 8.0
    assert kv_read_amplification(deepseek, 16.0, 1.0, 0.0, 16) == 1.0
    assert kv_read_amplification(deepseek, 128.0, 1.0, 0.0, None) == 1.0
    # GQA models keep their own per-group rule
    assert kv_read_amplification(llama, 8.0, 1.0, 1.0, 16) == 8.0
    assert kv_read_amplification(llama, 8.0, 1.0, 0.0, 16) == 1.0


@pytest.mark.parametrize("engine, version, block", [
    ("sglang", "0.4.3", 16), ("sglang", "0.4.6", None), ("vllm", "0.7.3", 16),
    ("vllm", "0.8.5", None), ("tensorrt-llm", "0.17", None)])
def test_mla_decode_head_block_by_release(engine, version, block):
    assert engine_config(engine, 141 * GiB, version).mla_decode_head_block == block


def test_attention_dp_on_sglang_0_4_3_reads_the_latent_8_times():
    """With DP attention each H200 holds all 128 heads: SGLang 0.4.3's Triton MLA kernel reads
    the latent 8 times a step, 0.4.6's FA3 MLA once; without attention DP (16 heads a GPU)
    both read it once (64 sequences: the latent reads, not the launches, set the time)."""
    old_ctx, old = _decode_step("sglang", "0.4.3", "dgx-h200", attention_dp=True, seqs=64.0)
    new_ctx, new = _decode_step("sglang", "0.4.6", "dgx-h200", attention_dp=True, seqs=64.0)
    assert (old_ctx.mla_decode_head_block, new_ctx.mla_decode_head_block) == (16, None)
    assert float(old.attention_s) > 4.0 * float(new.attention_s)
    _, tp_old = _decode_step("sglang", "0.4.3", "dgx-h200", seqs=64.0)
    _, tp_new = _decode_step("sglang", "0.4.6", "dgx-h200", seqs=64.0)
    assert float(tp_old.attention_s) == pytest.approx(float(tp_new.attention_s), rel=1e-9)


@pytest.mark.parametrize("engine, version, form", [
    ("vllm", "0.6.4", "absorbed"), ("vllm", "0.7.3", "absorbed"), ("vllm", "0.7.4", "split"),
    ("vllm", "0.8.5", "split"), ("sglang", "0.4.3", "split"), ("sglang", "0.5.12", "split"),
    ("tensorrt-llm", "0.17", "split"), ("nim", None, "split"), ("atom", None, "split")])
def test_mla_decode_weights_by_release(engine, version, form):
    assert engine_config(engine, 192 * GiB, version).mla_decode_weights == form


def test_absorbed_mla_projections_read_heads_times_the_latent_width():
    """vLLM 0.7.3's absorbed W_UQ·W_UK and W_UV·W_O for DeepSeek-V3 at 16 heads a GPU:
    1536 × 16·512 FP8 + 1536 × 16·64 BF16 + 16·512 × 7168 FP8 = 74.4 MB a layer, against the
    split q_up (1536 × 16·192), kv_up (512 × 16·256) and out (16·128 × 7168) FP8 = 21.5 MB."""
    from perfcast.estimate.inference_ops import step_layer_ops

    model = load_model("deepseek-v3")
    strategy = Strategy(num_gpus=8, tp=8)
    passes = (AttentionPass(4.0, 1, 3600.0, causal=False),)

    def weight_bytes(absorbed: bool) -> float:
        ops = step_layer_ops(model, strategy, 4.0, passes, True, mla_absorbed=absorbed)
        names = {"q_up_proj", "kv_up_proj", "out_proj", "q_absorbed_proj", "q_rope_proj",
                 "out_absorbed_proj"}
        return sum(float(op.n * op.k) * (1.0 if op.fp8_eligible else 2.0)
                   for op in ops.compute if op.name in names)

    assert weight_bytes(False) == pytest.approx(21.5e6, rel=0.01)
    assert weight_bytes(True) == pytest.approx(74.4e6, rel=0.01)


def test_absorbed_mla_weights_slow_only_the_decode_step():
    """The absorbed matrices add ~53 MB × 61 layers ≈ 3.2 GB of weight reads to a vLLM 0.7.3
    decode step on MI300X (~0.6 ms at its 5.3 TB/s); prefill runs the split form."""
    from dataclasses import replace

    ctx, absorbed = _decode_step("vllm", "0.7.3", "mi300x-8")
    split_ctx = replace(ctx, mla_decode_weights="split")
    passes = (AttentionPass(4.0, 1, 3600.0, causal=False),)
    split = step_time(split_ctx, 4.0, passes, 4.0)
    extra = float(absorbed.gemm_s) - float(split.gemm_s)
    assert 0.4e-3 < extra < 1.0e-3
    prefill = (AttentionPass(1.0, 2048.0, 2048.0, causal=True),)
    assert float(step_time(ctx, 2048.0, prefill, 1.0, prefill=True).gemm_s) == pytest.approx(
        float(step_time(split_ctx, 2048.0, prefill, 1.0, prefill=True).gemm_s), rel=1e-12)


@pytest.mark.parametrize("engine, version, gather", [
    ("sglang", "0.4.3", "nccl_all_gather"), ("sglang", "0.4.4", "nccl_all_gather"),
    ("sglang", "0.4.5", "in_tp_all_reduce"), ("sglang", "0.5.12", "in_tp_all_reduce"),
    ("vllm", "0.7.3", "in_tp_all_reduce"), ("tensorrt-llm", "0.17", "in_tp_all_reduce")])
def test_attention_dp_gather_by_release(engine, version, gather):
    assert engine_config(engine, 141 * GiB, version).attention_dp_gather == gather


def test_sglang_0_4_3_attention_dp_gathers_with_an_nccl_all_gather_every_layer():
    """SGLang 0.4.3 under DP attention: an NCCL all-gather of the hidden states before every
    layer's MLP (61 on DeepSeek-V3), each at NCCL's launch-bound latency at 4 tokens; 0.4.5
    gathers inside an all-reduce (none charged). Without attention DP nothing changes."""
    from dataclasses import replace

    ctx, gathered = _decode_step("sglang", "0.4.3", "dgx-h200", attention_dp=True)
    assert ctx.attention_dp_gather == "nccl_all_gather"
    plain_ctx = replace(ctx, attention_dp_gather="in_tp_all_reduce")
    passes = (AttentionPass(4.0, 1, 3600.0, causal=False),)
    plain = step_time(plain_ctx, 4.0, passes, 4.0)
    extra = float(gathered.tp_comm_s) - float(plain.tp_comm_s)
    assert 61 * 5e-6 < extra < 61 * 80e-6
    assert float(gathered.gemm_s) == float(plain.gemm_s)
    no_dp_ctx, no_dp = _decode_step("sglang", "0.4.3", "dgx-h200")
    assert float(step_time(replace(no_dp_ctx, attention_dp_gather="in_tp_all_reduce"), 4.0,
                           passes, 4.0).tp_comm_s) == float(no_dp.tp_comm_s)
