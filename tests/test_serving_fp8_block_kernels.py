"""Block-scaled FP8 kernel class of a serving engine (``EngineConfig.fp8_block_kernels``).

Early-2025 ROCm builds ran the block-FP8 checkpoints of DeepSeek-V3/R1 (the catalog's MLA
models) through Triton: ``w8a8_block_fp8_matmul`` for every linear and ``fused_moe`` for the
routed experts (SGLang 0.4.2-0.4.6 without the opt-in CK_MOE / SGLANG_AITER_MOE, read from the
PyPI wheels; vLLM on ROCm without VLLM_ROCM_USE_AITER). AMD's AITER blog (March 2025) gives the
AITER kernels' speedups over them, up to 2x (block-scale GEMM) and 3x (block-scale fused MoE):
``calibration/fp8_block_kernels.yaml``. The class multiplies those GEMMs' seconds only.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from perfcast.calibration.fp8_block_kernels import (
    Fp8GemmSlowdown,
    fp8_gemm_slowdown,
    load_fp8_block_kernels,
)
from perfcast.catalog.models import load_model
from perfcast.catalog.serving_engines import EngineTarget, engine_config
from perfcast.catalog.systems import load_system
from perfcast.estimate.inference_ops import AttentionPass
from perfcast.estimate.inference_phases import step_time
from perfcast.estimate.serving import serving_setup
from perfcast.specs.strategy import Strategy
from perfcast.units import GiB

AMD_MLA = EngineTarget(gpu_vendor="amd", attention="mla")
AMD_MHA = EngineTarget(gpu_vendor="amd", attention="mha")
NVIDIA_MLA = EngineTarget(gpu_vendor="nvidia", attention="mla")


@pytest.mark.parametrize("engine, version, target, expected", [
    ("sglang", "0.4.2", AMD_MLA, "triton_rocm"),
    ("sglang", "0.4.3", AMD_MLA, "triton_rocm"),
    ("sglang", "0.4.6", AMD_MLA, "triton_rocm"),
    ("sglang", "0.4.7", AMD_MLA, "native"),
    ("sglang", "0.5.12", AMD_MLA, "native"),
    ("sglang", "0.4.3", NVIDIA_MLA, "native"),
    ("sglang", "0.4.3", AMD_MHA, "native"),
    ("vllm", "0.7.3", AMD_MLA, "triton_rocm"),
    ("vllm", "0.7.3", NVIDIA_MLA, "native"),
    ("vllm", "0.7.3", AMD_MHA, "native"),
    ("atom", None, AMD_MLA, "native"),
    ("tensorrt-llm", "0.17", NVIDIA_MLA, "native"),
    ("nim", None, NVIDIA_MLA, "native"),
])
def test_kernel_class_by_engine_version_vendor_and_attention(engine, version, target, expected):
    config = engine_config(engine, 192 * GiB, version, target)
    assert config.fp8_block_kernels == expected
    assert config.source("fp8_block_kernels")


def test_slowdowns_are_the_sourced_aiter_ratios():
    cal = load_fp8_block_kernels()
    assert cal.triton_rocm_dense_gemm_slowdown.value == 2.0
    assert cal.triton_rocm_moe_gemm_slowdown.value == 3.0
    assert "AITER" in cal.triton_rocm_moe_gemm_slowdown.source
    assert fp8_gemm_slowdown("triton_rocm", "fp8") == Fp8GemmSlowdown(dense=2.0,
                                                                     routed_experts=3.0)
    assert fp8_gemm_slowdown("native", "fp8") == Fp8GemmSlowdown()
    assert fp8_gemm_slowdown("triton_rocm", "bf16") == Fp8GemmSlowdown()  # no FP8 weights


def _mi300x_setup(engine: str, version: str, precision: str = "fp8"):
    return serving_setup(load_model("deepseek-v3"), load_system("mi300x-8"),
                         Strategy(num_gpus=8, tp=8), engine=engine, engine_version=version,
                         precision=precision)


def _decode(ctx, batch: float):
    passes = (AttentionPass(num_seqs=batch, seq_q=1, seq_kv=3600.0, causal=False),)
    return step_time(ctx, batch, passes, batch)


@pytest.mark.parametrize("engine, version", [("sglang", "0.4.2"), ("vllm", "0.7.3")])
def test_triton_rocm_multiplies_only_the_gemms(engine, version):
    ctx = _mi300x_setup(engine, version).ctx
    assert ctx.fp8_gemm_slowdown == Fp8GemmSlowdown(dense=2.0, routed_experts=3.0)
    tuned = replace(ctx, fp8_gemm_slowdown=Fp8GemmSlowdown())
    for batch in (4.0, 64.0):
        slow, fast = _decode(ctx, batch), _decode(tuned, batch)
        # the dense linears x2 and the experts x3; the router and the LM head stay (bf16)
        assert 1.9 * fast.gemm_s < slow.gemm_s < 3.0 * fast.gemm_s
        assert slow.attention_s == fast.attention_s
        assert slow.tp_comm_s == fast.tp_comm_s
        assert slow.memory_bound_s == fast.memory_bound_s


def test_experts_take_the_moe_factor_and_the_rest_the_dense_factor():
    ctx = _mi300x_setup("sglang", "0.4.2").ctx
    base = replace(ctx, fp8_gemm_slowdown=Fp8GemmSlowdown())
    only_dense = replace(ctx, fp8_gemm_slowdown=Fp8GemmSlowdown(dense=2.0))
    only_moe = replace(ctx, fp8_gemm_slowdown=Fp8GemmSlowdown(routed_experts=3.0))
    g0, gd, gm = (_decode(c, 16.0).gemm_s for c in (base, only_dense, only_moe))
    both = _decode(ctx, 16.0).gemm_s
    assert gd > g0 and gm > g0
    # the two factors act on disjoint GEMMs: their extra seconds add up
    assert both - g0 == pytest.approx((gd - g0) + (gm - g0), rel=1e-9)
    # a factor f adds (f - 1) x the tuned seconds of its GEMMs: linear in f
    triple = replace(ctx, fp8_gemm_slowdown=Fp8GemmSlowdown(dense=3.0))
    assert _decode(triple, 16.0).gemm_s - g0 == pytest.approx(2.0 * (gd - g0), rel=1e-9)


def test_native_and_bf16_deployments_are_unchanged():
    assert _mi300x_setup("sglang", "0.5.12").ctx.fp8_gemm_slowdown == Fp8GemmSlowdown()
    assert _mi300x_setup("atom", "0.1").ctx.fp8_gemm_slowdown == Fp8GemmSlowdown()
    assert _mi300x_setup("sglang", "0.4.2", "bf16").ctx.fp8_gemm_slowdown == Fp8GemmSlowdown()
    h200 = serving_setup(load_model("deepseek-v3"), load_system("dgx-h200"),
                         Strategy(num_gpus=8, tp=8), engine="sglang", engine_version="0.4.3",
                         precision="fp8")
    assert h200.ctx.fp8_gemm_slowdown == Fp8GemmSlowdown()
