"""Attention kernel classes (``Strategy.attention_kernel``) and unfused attention timing."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from perfcast.calibration.attention_kernels import load_attention_kernels
from perfcast.catalog import load_model, load_system
from perfcast.catalog.framework_defaults import RunFacts
from perfcast.cli.main import app
from perfcast.errors import InputError
from perfcast.estimate.training import estimate_training
from perfcast.kernels.analytical import AnalyticalBackend
from perfcast.kernels.roofline import RooflineBackend
from perfcast.kernels.unfused_attention import unfused_attention_time_s
from perfcast.specs import Strategy, Workload
from perfcast.validate.row_framework import framework_fields

runner = CliRunner()
H100 = load_system("dgx-h100").gpu
A100 = load_system("dgx-a100").gpu
B200 = load_system("dgx-b200").gpu
MI300X = load_system("mi300x-8").gpu
SHAPE = (4, 32, 4096, 4096, 128, 128, True)  # batch, heads, s_q, s_kv, d_qk, d_v, causal


@pytest.mark.parametrize("backend", [RooflineBackend(), AnalyticalBackend()])
@pytest.mark.parametrize("backward", [False, True])
def test_fa2_is_slower_than_fa3_on_hopper_and_the_same_kernel_on_ampere(backend, backward):
    auto = backend.attention_time_s(H100, *SHAPE, backward)
    fa2 = backend.attention_time_s(H100, *SHAPE, backward, kernel="fa2")
    # FA3 paper Fig. 5/7: FlashAttention-3 is 1.5-2x FlashAttention-2 on H100.
    assert 1.3 < fa2 / auto < 2.6
    assert backend.attention_time_s(A100, *SHAPE, backward, kernel="fa2") == pytest.approx(
        backend.attention_time_s(A100, *SHAPE, backward), rel=1e-12)


@pytest.mark.parametrize("backend", [RooflineBackend(), AnalyticalBackend()])
@pytest.mark.parametrize("gpu", [A100, H100])
def test_triton_is_fa2_times_the_calibrated_ratio_of_its_generation(gpu, backend):
    ratio = load_attention_kernels().derived["triton"].ratio_for(gpu.generation)
    for backward in (False, True):
        assert backend.attention_time_s(gpu, *SHAPE, backward, kernel="triton") == pytest.approx(
            ratio * backend.attention_time_s(gpu, *SHAPE, backward, kernel="fa2"), rel=1e-12)


@pytest.mark.parametrize("backend", [RooflineBackend(), AnalyticalBackend()])
@pytest.mark.parametrize("backward", [False, True])
def test_cdna_flash_kernel_is_fa2_and_triton_is_slower_by_the_ratio(backend, backward):
    """CDNA's own flash kernel (CK FMHA, the FA2 algorithm) is its FA2; PyTorch's ROCm default
    AOTriton kernel is the Triton class over it, at the ratio of a generation without its own."""
    auto = backend.attention_time_s(MI300X, *SHAPE, backward)
    assert backend.attention_time_s(MI300X, *SHAPE, backward, kernel="fa2") == pytest.approx(
        auto, rel=1e-12)
    triton = load_attention_kernels().derived["triton"]
    assert "cdna3" not in triton.time_ratio_by_generation
    assert backend.attention_time_s(MI300X, *SHAPE, backward, kernel="triton") == pytest.approx(
        triton.time_ratio * auto, rel=1e-12)
    assert triton.time_ratio > 1.0


def test_triton_ratio_is_its_generations_own():
    triton = load_attention_kernels().derived["triton"]
    ampere, hopper = triton.ratio_for("ampere"), triton.ratio_for("hopper")
    # FlashAttention-2 paper §4.1: on A100 FA2 is 1.3-2.5x the Triton kernel.
    assert 1.3 <= ampere <= 2.5
    # On H100 FA2 (an Ampere-style kernel at ~35% of peak) loses most of that lead: the Triton
    # tutorial kernel reaches 329-477 TFLOP/s against FA2's 309-372 (kernel_efficiency.csv
    # lines 336, 161-166); the fitted Hopper ratio sits below the Ampere one.
    assert 1.0 <= hopper < ampere
    assert "hopper" in triton.time_ratio_by_generation
    assert "blackwell" not in triton.time_ratio_by_generation
    assert triton.ratio_for("blackwell") == triton.time_ratio == ampere
    assert triton.ratio_for(None) == triton.time_ratio


def test_a_generation_ratio_below_one_is_rejected():
    triton = load_attention_kernels().derived["triton"]
    with pytest.raises(ValueError, match="time_ratio_by_generation"):
        type(triton).model_validate(triton.model_dump() | {"time_ratio_by_generation":
                                                           {"hopper": 0.9}})


@pytest.mark.parametrize("backend", [RooflineBackend(), AnalyticalBackend()])
@pytest.mark.parametrize("gpu", [A100, H100])
@pytest.mark.parametrize("backward", [False, True])
def test_long_causal_attention_charges_half_the_tiles_and_grows_as_seq_squared(
        gpu, backend, backward):
    """FA2 Alg. 1-2 skip the key/value tiles above the causal diagonal: at long sequences a
    causal pass takes half the non-causal time (not the full square), and doubling the
    sequence quadruples one sequence's attention time (the work is s², the efficiency has
    saturated)."""
    def time_s(seq: int, causal: bool) -> float:
        return float(backend.attention_time_s(gpu, 1, 16, seq, seq, 128, 128, causal, backward,
                                              kernel="triton"))

    for seq in (32768, 65536):
        assert 0.5 <= time_s(seq, True) / time_s(seq, False) <= 0.51
    assert time_s(65536, True) / time_s(32768, True) == pytest.approx(4.0, rel=0.02)
    assert time_s(8192, True) / time_s(8192, False) > time_s(65536, True) / time_s(65536, False)


def test_fa2_without_calibration_is_an_input_error():
    with pytest.raises(InputError, match="attention_kernel='fa2'"):
        RooflineBackend().attention_time_s(B200, *SHAPE, False, kernel="fa2")
    result = runner.invoke(app, ["train", "--model", "llama3-8b", "--system", "dgx-b200",
                                 "--gpus", "8", "--attention-kernel", "fa2"])
    assert result.exit_code == 2
    assert "attention_kernel" in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_train_attention_kernel_flag_slows_only_attention():
    base = ["train", "--model", "llama3-8b", "--system", "dgx-h100", "--gpus", "8",
            "--seq-length", "8192", "--json"]
    auto = json.loads(runner.invoke(app, base).stdout)
    fa2 = json.loads(runner.invoke(app, base + ["--attention-kernel", "fa2"]).stdout)
    assert fa2["strategy"]["attention_kernel"] == "fa2"
    assert fa2["breakdown_s"]["compute_attention"] > 1.3 * auto["breakdown_s"]["compute_attention"]
    assert fa2["breakdown_s"]["compute_gemm"] == pytest.approx(
        auto["breakdown_s"]["compute_gemm"], rel=1e-12)


def test_unfused_forward_is_its_two_gemms_and_two_passes():
    backend = RooflineBackend()
    b, a, s, d = 2, 16, 2048, 128
    scores = b * a * s * s
    expected = (backend.gemm_time_s(A100, s, s, d, b * a, "fp16")
                + backend.gemm_time_s(A100, s, d, s, b * a, "fp16")
                + backend.memory_bound_time_s(A100, 4 * scores)
                + backend.memory_bound_time_s(A100, 5 * scores))
    got = unfused_attention_time_s(backend, A100, b, a, s, s, d, d, False, "fp16", dropout=True)
    assert got == pytest.approx(expected, rel=1e-12)


@settings(max_examples=25, deadline=None)
@given(seq=st.sampled_from([512, 1024, 2048, 4096]), heads=st.sampled_from([8, 16, 32]),
       backward=st.booleans())
def test_unfused_is_slower_than_flash_and_dropout_adds_time(seq, heads, backward):
    backend = RooflineBackend()
    args = (A100, 4, heads, seq, seq, 128, 128)
    flash = backend.attention_time_s(*args, True, backward)
    plain = unfused_attention_time_s(backend, *args, backward)
    dropped = unfused_attention_time_s(backend, *args, backward, dropout=True)
    assert plain > flash
    assert dropped > plain


def test_unfused_attention_costs_a_megatron_gpt_step_time():
    model = load_model("gpt3-175b")
    system = load_system("dgx-a100")
    workload = Workload(seq_length=2048, global_batch_size=64)
    flash = Strategy(num_gpus=64, tp=8, pp=8, micro_batch_size=1)
    unfused = flash.model_copy(update={"flash_attention": False})
    t_flash = estimate_training(model, system, flash, workload)
    t_unfused = estimate_training(model, system, unfused, workload)
    assert t_unfused.breakdown.compute_attention_s > 2 * t_flash.breakdown.compute_attention_s
    assert t_unfused.breakdown.compute_gemm_s == pytest.approx(t_flash.breakdown.compute_gemm_s)


@pytest.mark.parametrize(("framework", "generation", "kernel"), [
    ("torchtitan + torch.compile", "hopper", "fa2"),
    ("torchtitan", "ampere", "fa2"),
    ("torchtitan @6fc499f6 + torchao 0.13.0", "blackwell", "auto"),
    ("torchtitan @2c8b5947 + torchao 0.13.0, ROCm 6.4", "cdna3", "triton"),
    ("Composer + llm-foundry (FlashAttention)", "ampere", "triton"),
    ("NeMo 2.0 / Megatron-Core", "hopper", "auto"),
])
def test_validation_rows_map_framework_to_kernel(framework, generation, kernel):
    """The row's framework profile names the kernel class per GPU generation (torchtitan's
    PyTorch SDPA: FlashAttention-2 on Ampere/Hopper, AOTriton on ROCm, the generation's own
    kernel on Blackwell)."""
    notes: list[str] = []
    facts = RunFacts(tp=1, ep=1, precision="bf16", generation=generation, layers_per_stage=32)
    fields = framework_fields({"framework": framework, "source_id": "x"}, {}, facts, notes)
    assert fields["attention_kernel"] == kernel
    assert any("attention" in note for note in notes)


def test_validation_rows_of_2021_megatron_have_no_flash_attention():
    facts = RunFacts(tp=8, ep=1, precision="fp16", generation="ampere", layers_per_stage=12)
    fields = framework_fields({"framework": "Megatron-LM (2021)"}, {}, facts, [])
    assert fields["flash_attention"] is False
    assert "attention_kernel" not in fields


def test_kernels_attention_command_takes_the_kernel_class():
    base = ["kernels", "attention", "--batch", "2", "--heads", "32", "--seq-q", "8192",
            "--system", "dgx-h100", "--json"]
    auto = json.loads(runner.invoke(app, base).stdout)
    fa2 = json.loads(runner.invoke(app, base + ["--attention-kernel", "fa2"]).stdout)
    assert fa2["shape"]["kernel"] == "fa2"
    assert 1.3 < fa2["time_s"] / auto["time_s"] < 2.6
