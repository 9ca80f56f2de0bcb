"""FP8 rowwise and block-scaled scaled-matmul kernel classes (``kernels.scaled_gemm``) and their
fitted time ratios (``scaled_gemm_time_ratio[rowwise|block-scaled]`` in ``fit_training``)."""

from __future__ import annotations

import pytest

from perfcast.calibration.bundle import load_calibration
from perfcast.catalog.models import load_model
from perfcast.catalog.systems import load_system
from perfcast.estimate.training import estimate_training
from perfcast.graph.ops import GemmOp, Phase
from perfcast.kernels.backend import KernelBackend, get_backend
from perfcast.kernels.scaled_gemm import SCALED_GEMM_KERNEL, scaled_gemm_time_ratio
from perfcast.schedule.op_time import compute_op_time_s
from perfcast.specs import Strategy, Workload
from perfcast.validate.fit_training import SCALED_GEMM_GRID, grid_parameters, scaled_gemm_name

SYSTEM = load_system("dgx-h100")
FORWARD = GemmOp("fc1", Phase.FORWARD, m=8192, n=14336, k=4096)
WGRAD = GemmOp("fc1", Phase.BACKWARD_WGRAD, m=4096, n=14336, k=8192)


def _strategy(**options) -> Strategy:
    """8-way data parallel (FSDP-free), FP8 unless ``options`` say otherwise."""
    return Strategy(num_gpus=8, **({"precision": "fp8"} | options))


def _parameter():
    name = scaled_gemm_name("rowwise")
    return next(p for p in grid_parameters(load_calibration()) if p.name == name)


def _backend(ratio: float):
    """The analytical backend carrying a calibration whose rowwise ratio is ``ratio``."""
    calibration = _parameter().apply(load_calibration(), ratio)
    return calibration.with_kernels(get_backend("analytical"))


def _time_s(op: GemmOp, recipe: str, backend) -> float:
    return float(compute_op_time_s(op, SYSTEM, _strategy(fp8_recipe=recipe), backend))


@pytest.mark.parametrize("recipe", ["rowwise", "rowwise-hp-wgrad"])
def test_rowwise_fp8_gemm_takes_the_ratio_over_the_tensorwise_gemm(recipe):
    backend = _backend(2.0)
    assert _time_s(FORWARD, recipe, backend) == pytest.approx(
        2.0 * _time_s(FORWARD, "tensorwise", backend), rel=1e-12)


def test_bf16_wgrad_of_rowwise_hp_wgrad_keeps_the_bf16_time():
    """ROWWISE_WITH_GW_HP runs grad_weight in BF16: no scaled matmul, no ratio."""
    backend = _backend(2.0)
    bf16 = float(compute_op_time_s(WGRAD, SYSTEM, _strategy(precision="bf16"), backend))
    assert _time_s(WGRAD, "rowwise-hp-wgrad", backend) == pytest.approx(bf16, rel=1e-12)
    assert _time_s(WGRAD, "rowwise", backend) == pytest.approx(
        2.0 * _time_s(WGRAD, "tensorwise", backend), rel=1e-12)


@pytest.mark.parametrize("recipe, precision", [
    ("tensorwise", "fp8"), ("delayed", "fp8"), ("mxfp8", "fp8"), ("rowwise", "bf16"),
    (None, "fp8"), ("nvfp4", "fp4")])
def test_other_recipes_and_16_bit_gemms_keep_the_calibrated_kernel(recipe, precision):
    assert scaled_gemm_time_ratio(_backend(2.0), recipe, precision) == 1.0


def test_a_calibration_without_the_class_takes_no_ratio():
    kernels = load_calibration().attention_kernels.model_copy(update={"scaled_gemm": {}})
    backend = get_backend("analytical").with_attention_kernels(kernels)
    assert scaled_gemm_time_ratio(backend, "rowwise", "fp8") == 1.0


@pytest.mark.parametrize("name", ["roofline", "analytical", "measured"])
def test_every_backend_finds_the_shipped_ratio(name):
    shipped = load_calibration().attention_kernels.scaled_gemm["rowwise"].time_ratio
    assert shipped > 1.0
    assert scaled_gemm_time_ratio(get_backend(name), "rowwise", "fp8") == shipped


@pytest.mark.parametrize("name", ["roofline", "analytical", "measured"])
def test_every_backend_carries_the_derived_kernels_as_a_protocol_member(name):
    """``KernelBackend.attention_kernels`` / ``with_attention_kernels``: a backend handed other
    derived kernels times with them (the wrapped backends pass them down), and one handed its
    own returns itself (its kernel memos survive)."""
    backend = get_backend(name)
    assert isinstance(backend, KernelBackend)
    assert backend.with_attention_kernels(backend.attention_kernels) is backend
    other = _backend(2.0).attention_kernels
    replaced = backend.with_attention_kernels(other)
    assert replaced is not backend and replaced.name == backend.name
    assert replaced.attention_kernels is other
    assert scaled_gemm_time_ratio(replaced, "rowwise", "fp8") == 2.0
    assert load_calibration().with_kernels(backend) is backend


def test_a_calibration_hands_one_backend_per_kernel_set():
    """``Calibration.with_kernels`` is memoised by identity: the same calibration gives the
    same backend instance, so the analytical backend's GEMM memo is reused between forecasts."""
    calibration = _parameter().apply(load_calibration(), 2.0)
    backend = get_backend("measured")
    assert calibration.with_kernels(backend) is calibration.with_kernels(backend)


def test_the_rowwise_ratio_is_a_fitted_grid_parameter():
    parameter = _parameter()
    assert set(SCALED_GEMM_KERNEL.values()) == {"rowwise", "block-scaled"}
    assert parameter.grid == SCALED_GEMM_GRID
    assert parameter.low == 1.0 and parameter.centre == pytest.approx(1.6)
    assert load_calibration().attention_kernels.scaled_gemm["rowwise"].method == "fitted"


def test_shipped_rowwise_gemm_sits_between_the_tensorwise_fp8_and_the_bf16_gemm():
    """The fitted ratio keeps a rowwise FP8 GEMM faster than the same GEMM in BF16 on H100 (a
    scaled matmul slower than BF16 would never be used) and slower than the tensorwise one."""
    backend = get_backend("analytical")
    bf16 = float(compute_op_time_s(FORWARD, SYSTEM, _strategy(precision="bf16"), backend))
    assert (_time_s(FORWARD, "tensorwise", backend) < _time_s(FORWARD, "rowwise", backend)
            < bf16)


def test_shipped_rowwise_step_is_slower_than_tensorwise():
    """torchao's README (Llama-3-8B, 8 H100, torchtitan): tensorwise +25% over BF16, rowwise
    +10%; the forecast orders the two FP8 recipes the same way."""
    model, workload = load_model("llama-3-8b"), Workload(seq_length=8192, global_batch_size=8)

    def tokens_per_s(recipe: str) -> float:
        strategy = _strategy(fp8_recipe=recipe)
        return estimate_training(model, SYSTEM, strategy, workload).tokens_per_s_per_gpu

    assert tokens_per_s("rowwise") < tokens_per_s("tensorwise")


def test_a_fit_without_rowwise_rows_keeps_the_ratio_at_its_centre(tmp_path):
    """A grid parameter no fit row depends on is held at its centre, not handed to the solver
    (whose steps along a direction without gradient drift: the Triton ratio went 1.9 -> 1.01
    in the leave-mosaic_mpt-out fold before this)."""
    import csv
    from pathlib import Path

    from perfcast.validate.fit_training import fit_training, load_training_data

    source = Path(__file__).resolve().parents[2] / "shared" / "ground_truth" / "training.csv"
    if not source.is_file():
        pytest.skip("shared/ground_truth/training.csv not present")
    with source.open(newline="") as f:
        reader = csv.DictReader(f)
        rows = [r for r in reader if r["source_id"] == "torchtitan"
                and "rowwise" not in r["precision"]][:12]
        fields = reader.fieldnames
    path = tmp_path / "no_rowwise.csv"
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    fit = fit_training(load_training_data([path]))
    estimate = next(p for p in fit.parameters if p.name == scaled_gemm_name("rowwise"))
    assert estimate.value == _parameter().centre and estimate.standard_error is None


GB200 = load_system("gb200-nvl72")


def _with_block_scaled(ratio: float):
    """The analytical backend with a calibration carrying a fitted ``block-scaled`` entry at
    ``ratio`` (the shipped calibration has none: kernels/scaled_gemm.py, "Not shipped")."""
    from perfcast.calibration.attention_kernels import DerivedScaledGemm

    calibration = load_calibration()
    kernels = calibration.attention_kernels
    entry = DerivedScaledGemm(time_ratio=1.6, method="fitted", source="test")
    calibration = calibration.replace(attention_kernels=kernels.model_copy(
        update={"scaled_gemm": kernels.scaled_gemm | {"block-scaled": entry}}))
    name = scaled_gemm_name("block-scaled")
    parameter = next(p for p in grid_parameters(calibration) if p.name == name)
    assert parameter.grid == SCALED_GEMM_GRID
    return parameter.apply(calibration, ratio).with_kernels(get_backend("analytical"))


def test_shipped_calibration_leaves_block_scaled_gemms_on_the_calibrated_kernel():
    assert "block-scaled" not in load_calibration().attention_kernels.scaled_gemm
    for recipe, precision in (("mxfp8", "fp8"), ("nvfp4", "fp4")):
        assert scaled_gemm_time_ratio(get_backend("analytical"), recipe, precision) == 1.0


@pytest.mark.parametrize("recipe", ["mxfp8", "nvfp4"])
def test_block_scaled_gemms_take_their_ratio_over_the_tensorwise_gemm(recipe):
    """MXFP8 GEMMs over the tensorwise FP8 GEMM, NVFP4 GEMMs over an FP4 GEMM on the
    calibrated kernel: the FP4 peak stays the catalog's, the ratio is the block-scaled path."""
    fp4 = recipe == "nvfp4"
    backend = _with_block_scaled(1.3)
    assert scaled_gemm_time_ratio(backend, recipe, "fp4" if fp4 else "fp8") == 1.3
    strategy = Strategy(num_gpus=4, precision="fp8", fp8_recipe=recipe)
    scaled = float(compute_op_time_s(FORWARD, GB200, strategy, backend))
    plain = float(compute_op_time_s(FORWARD, GB200, strategy, _with_block_scaled(1.0)))
    assert scaled == pytest.approx(1.3 * plain, rel=1e-12)


def test_block_scaled_ratio_spares_the_gemms_the_recipe_keeps_in_bf16():
    """The LM head / router (``fp8_eligible=False``) run in BF16 under MXFP8: no ratio."""
    backend = _with_block_scaled(2.0)
    head = GemmOp("lm_head", Phase.FORWARD, m=8192, n=128256, k=4096, fp8_eligible=False)
    mx = Strategy(num_gpus=4, precision="fp8", fp8_recipe="mxfp8")
    bf16 = Strategy(num_gpus=4, precision="bf16")
    assert float(compute_op_time_s(head, GB200, mx, backend)) == pytest.approx(
        float(compute_op_time_s(head, GB200, bf16, backend)), rel=1e-12)
    assert scaled_gemm_time_ratio(backend, "mxfp8", "bf16") == 1.0


def test_every_kernel_class_has_a_written_source():
    """``perfcast calibrate`` writes each fitted class's source from SCALED_GEMM_SOURCE."""
    from perfcast.validate.calibration_writer import SCALED_GEMM_SOURCE

    assert set(SCALED_GEMM_SOURCE) == set(SCALED_GEMM_KERNEL.values())
    assert all(len(text) > 100 for text in SCALED_GEMM_SOURCE.values())
