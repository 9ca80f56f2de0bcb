"""Static-batching engine profiles (catalog/data/frameworks/inference) and the mechanisms they
switch: NCCL vs custom TP all-reduce, decode CUDA graphs, pipeline micro-batching, and the
decode-attention kernel (GQA KV heads read once per query head or once per group)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from perfcast.calibration.bundle import load_calibration
from perfcast.catalog.inference_engines import (
    inference_engine,
    inference_engine_from_text,
    inference_engine_names,
)
from perfcast.catalog.models import load_model
from perfcast.catalog.systems import load_system
from perfcast.cli.infer_cmd import StaticEngineOpt
from perfcast.cli.main import app
from perfcast.comm.select import group_collective_time_s
from perfcast.errors import InputError
from perfcast.estimate.inference import estimate_inference, static_micro_batches
from perfcast.specs.strategy import Strategy
from perfcast.validate.inference_rows import parse_inference_row


def test_every_profile_loads_with_a_source_per_setting():
    assert inference_engine_names() == ("fastertransformer", "gpt-fast", "tensorrt-llm-0.5",
                                        "tensorrt-llm-0.7")
    for name in inference_engine_names():
        p = inference_engine(name)
        assert p.name == name
        for source in (p.tp_all_reduce_source, p.decode_cuda_graphs_source,
                       p.pipeline_micro_batches_source, p.decode_attention_kernel_source):
            assert len(source) > 40


def test_cli_choices_are_the_profiles():
    assert tuple(sorted(e.value for e in StaticEngineOpt)) == inference_engine_names()


@pytest.mark.parametrize("text, name", [
    ("FasterTransformer", "fastertransformer"), ("FasterTransformer (Triton)", "fastertransformer"),
    ("gpt-fast (PyTorch native, ROCm)", "gpt-fast"), ("TensorRT-LLM v0.5", "tensorrt-llm-0.5"),
    ("TensorRT-LLM v0.5.0 / TensorRT 9.1", "tensorrt-llm-0.5"),
    ("TensorRT-LLM v0.6.1", "tensorrt-llm-0.5"), ("TensorRT-LLM v0.7a", "tensorrt-llm-0.7"),
    ("TensorRT-LLM v0.17 (PyTorch backend)", None), ("vLLM ~v0.19.1", None), ("", None)])
def test_profile_from_framework_text(text, name):
    found = inference_engine_from_text(text)
    assert (found.name if found else None) == name


def test_unknown_engine_names_the_known_ones():
    with pytest.raises(InputError, match="fastertransformer"):
        inference_engine("orca")


@pytest.mark.parametrize("batch, seq, pp, rule, expected", [
    (8, 1, 1, "local_batch", 1), (1, 20, 3, "local_batch", 1), (8, 1, 3, "local_batch", 1),
    (6, 1, 3, "local_batch", 3), (64, 128, 3, "local_batch", 8), (256, 128, 3, "local_batch", 32),
    (255, 128, 3, "local_batch", 3), (8, 1, 3, "fill", 3), (2, 128, 3, "fill", 2)])
def test_static_micro_batches(batch, seq, pp, rule, expected):
    """FasterTransformer getLocalBatchSize: b/pp when divisible, halved while even above 1024
    tokens; ``fill``: min(b, pp)."""
    assert static_micro_batches(batch, seq, pp, rule) == expected


def _infer(tp=8, pp=1, batch=1, **kw):
    system = load_system("dgx-a100", num_gpus=tp * pp)
    return estimate_inference(load_model("llama-2-7b"), system, Strategy(num_gpus=tp * pp, tp=tp,
                              pp=pp), batch_size=batch, input_len=128, output_len=32,
                              precision="fp16", calibration=load_calibration(), **kw)


def test_nccl_all_reduce_is_nccls_model_per_call():
    """gpt-fast all-reduces with NCCL: two per layer, each NCCL's modelled latency (launch
    included, comm.select), slower than the one-shot custom kernel at batch 1."""
    custom, nccl = _infer(), _infer(static_engine="gpt-fast")
    size = 2 * 4096  # one token's hidden state, fp16
    per_call = float(group_collective_time_s("all_reduce", size, load_system("dgx-a100", num_gpus=8),
                                             8))
    assert nccl.decode.tp_comm_s == pytest.approx(2 * 32 * per_call, rel=1e-6)
    assert nccl.decode.tp_comm_s > 2 * custom.decode.tp_comm_s


def test_no_tp_no_difference_but_graphs():
    """At tp 1 only the profile's CUDA graphs differ: gpt-fast's decode has no host overhead."""
    plain, fast = _infer(tp=1), _infer(tp=1, static_engine="gpt-fast")
    assert fast.decode.tp_comm_s == plain.decode.tp_comm_s == 0
    assert fast.decode.overhead_s == 0 < plain.decode.overhead_s
    assert fast.prefill.total_s == pytest.approx(plain.prefill.total_s)
    ft = _infer(tp=1, static_engine="fastertransformer")
    assert ft.tpot_s == pytest.approx(plain.tpot_s)
    assert any("engine profile fastertransformer: TP all-reduce nccl" in a for a in ft.assumptions)
    assert not any("engine profile" in a for a in plain.assumptions)


def test_fastertransformer_pipeline_runs_one_micro_batch_when_pp_does_not_divide():
    """b=8 over pp=2 splits into 2 micro-batches of 4 (as ``fill`` does); b=7 does not: one
    micro-batch crosses the stages in turn, where ``fill`` would time 2 micro-batches over
    3 stage slots."""
    split = _infer(tp=1, pp=2, batch=8, static_engine="fastertransformer")
    whole = _infer(tp=1, pp=2, batch=7, static_engine="fastertransformer")
    fill = _infer(tp=1, pp=2, batch=7)
    assert whole.tpot_s < fill.tpot_s  # fill: 2 micro-batches -> 3 half-batch stage times
    assert split.tpot_s == pytest.approx(_infer(tp=1, pp=2, batch=8).tpot_s)


def test_validate_rows_take_the_profile_from_the_framework_column():
    row = {"row_id": "x", "source": "s", "model": "llama-2-7b", "gpu_type": "A100 SXM 80GB",
           "tp": "2", "pp": "1", "precision": "FP16", "framework": "FasterTransformer",
           "batching": "static", "batch_size_or_concurrency": "4", "input_len": "128",
           "output_len": "32", "metric": "e2e_latency", "value": "100", "unit": "ms", "notes": ""}
    case = parse_inference_row(row)
    assert case.options["static_engine"] == "fastertransformer"
    assert not case.options["cuda_graphs"]
    case = parse_inference_row(row | {"framework": "TensorRT-LLM v0.6.1"})
    assert case.options["static_engine"] == "tensorrt-llm-0.5"
    case = parse_inference_row(row | {"framework": "vLLM ~v0.19.1", "metric": "e2e_latency"})
    assert "static_engine" not in getattr(case, "options", {})


def _gqa_decode(static_engine, batch=64, input_len=2048):
    """Llama-2-70B (8 KV heads for 64 query heads) decoding on one H100 in FP8."""
    system = load_system("dgx-h100", num_gpus=1)
    return estimate_inference(load_model("llama-2-70b"), system, Strategy(num_gpus=1),
                              batch_size=batch, input_len=input_len, output_len=128,
                              precision="fp8", static_engine=static_engine,
                              calibration=load_calibration())


def test_grouped_decode_kernel_reads_each_kv_head_once():
    """TensorRT-LLM v0.7's XQA reads a KV head once per group; v0.5-v0.6's masked MHA once per
    query head, amplified by g^x (g = 8 query heads per KV head, x = the fitted exponent).
    Only decode attention differs; prefill and the other decode parts are the same."""
    old, xqa = _gqa_decode("tensorrt-llm-0.5"), _gqa_decode("tensorrt-llm-0.7")
    exponent = load_calibration().inference_overheads.gqa_kv_read_exponent
    assert 0.3 < exponent < 1.0
    assert old.prefill.total_s == pytest.approx(xqa.prefill.total_s)
    assert old.decode.gemm_s == pytest.approx(xqa.decode.gemm_s)
    assert old.decode.attention_s > 8 ** exponent * 0.8 * xqa.decode.attention_s
    assert old.decode.attention_s < 8 ** exponent * 1.05 * xqa.decode.attention_s
    assert any("decode attention grouped" in a for a in xqa.assumptions)


def test_mha_models_do_not_depend_on_the_decode_kernel():
    """Llama-2-7B has a KV head per query head: both kernels read the cache once."""
    system = load_system("dgx-h100", num_gpus=1)
    def run(engine):
        return estimate_inference(load_model("llama-2-7b"), system, Strategy(num_gpus=1),
                                  batch_size=64, input_len=2048, output_len=128,
                                  precision="fp16", static_engine=engine,
                                  calibration=load_calibration())
    assert run("tensorrt-llm-0.5").tpot_s == pytest.approx(run("tensorrt-llm-0.7").tpot_s)


def test_shipped_serving_fit_has_no_parameter_at_a_bound():
    fit = load_calibration().inference_overheads.fit
    assert fit is not None
    pinned = [name for name, p in fit.parameters.items() if p.at_bound]
    assert not pinned


def test_cli_static_engine():
    runner = CliRunner()
    args = ["infer", "-m", "llama-2-7b", "-s", "dgx-a100", "--tp", "8", "--precision", "fp16",
            "--json"]
    plain = json.loads(runner.invoke(app, args).stdout)
    result = runner.invoke(app, args + ["--static-engine", "fastertransformer"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["tpot_s"] > plain["tpot_s"]  # NCCL, same host overhead
    bad = runner.invoke(app, args + ["--static-engine", "orca"])
    assert bad.exit_code == 2
    both = runner.invoke(app, args + ["--static-engine", "gpt-fast", "--concurrency", "4"])
    assert both.exit_code == 2 and "static_engine" in both.output


def test_fp4_weights_under_16bit_activations_dequantize_like_int4():
    """MXFP4 weights with BF16 activations are weight-only (dequantized inside the GEMM) and
    take the int4 efficiency; FP4 W+A (FP4 tensor cores) is not weight-only."""
    from perfcast.specs.inference import InferencePrecision

    w4a16 = InferencePrecision(weights="fp4", activations="bf16")
    assert w4a16.weight_only and w4a16.dequant_class == "int4"
    assert not InferencePrecision(weights="fp4", activations="fp4").weight_only
    assert InferencePrecision(weights="int8", activations="bf16").dequant_class == "int8"
    assert InferencePrecision(weights="bf16", activations="bf16").dequant_class is None
    system = load_system("dgx-h100", num_gpus=1)
    model = load_model("llama-3.1-8b")
    cal = load_calibration()

    def tpot(weights):
        return estimate_inference(model, system, Strategy(num_gpus=1), batch_size=1,
                                  input_len=128, output_len=32, precision="bf16",
                                  weight_precision=weights, calibration=cal).decode.gemm_s
    # same bytes per weight, same dequantization efficiency
    assert tpot("fp4") == pytest.approx(tpot("int4"))
    assert cal.inference_overheads.dequant_bandwidth_efficiency["int4"] < 1.0
