"""Property tests of the serving forecast (hypothesis)."""

from __future__ import annotations

from functools import cache

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfcast.catalog.models import load_model
from perfcast.catalog.systems import load_system
from perfcast.estimate.inference import estimate_inference
from perfcast.specs.strategy import Strategy

MODELS = ("llama-3.1-8b", "mixtral-8x7b", "deepseek-v2-lite", "gpt-j-6b")


@cache
def _model(name):
    return load_model(name)


def _faster(system, factor: float):
    """The same system with every tensor-core peak ``factor`` times higher."""
    gpu = system.gpu
    peaks = {f: getattr(gpu, f) * factor for f in
             ("peak_bf16_flops", "peak_fp16_flops", "peak_fp8_flops") if getattr(gpu, f)}
    return system.model_copy(update={"gpu": gpu.model_copy(update=peaks)})


@settings(max_examples=25, deadline=None)
@given(name=st.sampled_from(MODELS), batch=st.integers(1, 256), tp=st.sampled_from([1, 2, 4]),
       input_len=st.integers(1, 8192), extra=st.integers(1, 8192),
       kv=st.sampled_from(["bf16", "fp8"]))
def test_tpot_never_falls_when_kv_grows(name, batch, tp, input_len, extra, kv):
    model, system = _model(name), load_system("dgx-h100", num_gpus=tp)
    strategy = Strategy(num_gpus=tp, tp=tp)
    short = estimate_inference(model, system, strategy, batch_size=batch, input_len=input_len,
                               output_len=2, kv_precision=kv)
    long = estimate_inference(model, system, strategy, batch_size=batch,
                              input_len=input_len + extra, output_len=2, kv_precision=kv)
    assert long.tpot_s >= short.tpot_s * (1 - 1e-12)


@settings(max_examples=25, deadline=None)
@given(name=st.sampled_from(MODELS), batch=st.integers(1, 64), input_len=st.integers(1, 4096),
       factor=st.floats(1.0, 8.0), precision=st.sampled_from(["bf16", "fp8"]))
def test_ttft_never_rises_with_more_flops(name, batch, input_len, factor, precision):
    model, system = _model(name), load_system("dgx-h100", num_gpus=1)
    base = estimate_inference(model, system, batch_size=batch, input_len=input_len,
                              output_len=1, precision=precision)
    fast = estimate_inference(model, _faster(system, factor), batch_size=batch,
                              input_len=input_len, output_len=1, precision=precision)
    assert fast.ttft_s <= base.ttft_s * (1 + 1e-12)


@settings(max_examples=20, deadline=None)
@given(name=st.sampled_from(MODELS), batch=st.integers(1, 512),
       batching=st.sampled_from(["static", "continuous"]))
def test_breakdowns_sum_to_phase_times(name, batch, batching):
    model, system = _model(name), load_system("dgx-h100", num_gpus=2)
    report = estimate_inference(model, system, Strategy(num_gpus=2, tp=2), batch_size=batch,
                                input_len=256, output_len=64, batching=batching)
    assert sum(report.decode.to_dict().values()) == pytest.approx(report.tpot_s)
    assert report.output_tokens_per_s_per_gpu > 0
