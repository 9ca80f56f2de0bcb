"""Grouped (MoE routed-expert) GEMM efficiency of its own (issue 16).

``GemmTileModel.grouped_bf16_ratio`` scales the 16-bit main-loop efficiency of a grouped GEMM
kernel (``GemmOp.grouped_kernel``); tools/fit_kernel_analytical.py fits it on SimuMax's
measured grouped GEMMs (TE ``general_grouped_gemm``) and records it in ``grouped_provenance``.
"""

from __future__ import annotations

import math
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from perfcast.calibration.kernel_analytical import load_kernel_analytical
from perfcast.catalog.gpus import load_gpu
from perfcast.kernels.analytical import AnalyticalBackend

from conftest import shared_path

TOOLS = Path(__file__).resolve().parents[1] / "tools"
CAL = load_kernel_analytical()


def _with_ratio(gen: str, ratio: float) -> AnalyticalBackend:
    gens = dict(CAL.generations)
    block = gens[gen]
    gens[gen] = block.model_copy(update={"gemm": block.gemm.model_copy(
        update={"grouped_bf16_ratio": ratio})})
    return AnalyticalBackend(calibration=CAL.model_copy(update={"generations": gens}))


def test_dense_gemms_unchanged_and_grouped_slower_by_the_ratio_only_in_16_bit():
    gpu = load_gpu("b200")
    shipped, as_dense, slowed = (AnalyticalBackend(), _with_ratio("blackwell", 1.0),
                                 _with_ratio("blackwell", 0.7))
    args = (gpu, 2048.0, 4096.0, 7168.0, 8.0)
    dense = shipped.gemm_time_s(*args)
    assert slowed.gemm_time_s(*args) == dense
    assert as_dense.gemm_time_s(*args, grouped=True) == dense  # ratio 1.0: timed as dense
    grouped = slowed.gemm_time_s(*args, grouped=True)
    assert dense < grouped <= dense / 0.7 * 1.001
    assert slowed.gemm_time_s(*args, "fp8", grouped=True) == shipped.gemm_time_s(*args, "fp8")


def _grouped_rows(gen: str):
    simumax_csv = shared_path("reference", "measured_kernels", "simumax_kernels.csv")
    sys.path.insert(0, str(TOOLS))
    try:
        from fit_kernel_analytical import gpu_of
        from kernel_simumax_rows import read_simumax_observations
    finally:
        sys.path.remove(str(TOOLS))
    return gpu_of, [o for o in read_simumax_observations(simumax_csv) if o.generation == gen
                    and o.implementation.endswith(" group_matmul")]


def _rms_log_error(backend: AnalyticalBackend, rows, gpu_of, grouped: bool) -> float:
    err = []
    for o in rows:
        m, n, k, b = o.gemm
        t = backend.gemm_time_s(gpu_of(o), m, n, k, b, grouped=grouped)
        err.append(math.log(2 * m * n * k * b / t / o.measured))
    return float(np.sqrt(np.mean(np.square(err))))


@pytest.mark.parametrize(("gen", "count"), [("blackwell", 108), ("ampere", 12)])
def test_fit_reproduces_the_measured_grouped_rows_within_its_rms(gen, count):
    """The grouped efficiency in the provenance (fitted on the grouped rows) times those rows
    within the recorded RMS log error; the ratio is that efficiency over the dense one fitted
    on the same machine's dense rows (both in the note)."""
    gemm = CAL.generations[gen].gemm
    prov = gemm.grouped_provenance
    assert prov is not None and prov.fit_rms_log_error is not None
    gpu_of, rows = _grouped_rows(gen)
    assert len(rows) == count and sorted({o.line for o in rows}) == list(prov.source_rows)
    ratio = gemm.grouped_bf16_ratio
    assert prov.method == "fitted"
    match = re.search(r"main-loop efficiency ([0-9.]+),.*same machine ([0-9.]+);", prov.note)
    grouped_eff, dense_eff = float(match.group(1)), float(match.group(2))
    assert ratio == pytest.approx(grouped_eff / dense_eff, abs=1e-4)
    assert ratio < 1.0  # grouped kernels run less efficiently than dense ones on both machines
    gens = dict(CAL.generations)
    gens[gen] = gens[gen].model_copy(update={"gemm": gemm.model_copy(
        update={"mma_efficiency_bf16": grouped_eff})})
    backend = AnalyticalBackend(calibration=CAL.model_copy(update={"generations": gens}))
    assert _rms_log_error(backend, rows, gpu_of, False) <= prov.fit_rms_log_error + 0.002


def test_blackwell_grouped_path_applies_the_ratio_to_its_sustained_dense_rate():
    """On B200 (dense efficiency fitted on the same SimuMax machine), the shipped backend times
    the grouped rows through ``grouped=True`` with the fitted ratio and reproduces the grouped
    fit's RMS; as dense GEMMs (ratio 1.0, main before issue 16) they are timed worse."""
    prov = CAL.generations["blackwell"].gemm.grouped_provenance
    gpu_of, rows = _grouped_rows("blackwell")
    rms = _rms_log_error(AnalyticalBackend(), rows, gpu_of, True)
    assert rms <= prov.fit_rms_log_error + 0.002
    assert _rms_log_error(_with_ratio("blackwell", 1.0), rows, gpu_of, True) > rms + 0.05


@pytest.mark.parametrize(("gen", "method", "ratio"), [
    ("ampere", "fitted", 0.9457), ("blackwell", "fitted", 0.7129),
    ("blackwell-ultra", "transferred", 0.7129)])
def test_generations_with_measured_grouped_gemms_ship_their_ratio(gen, method, ratio):
    """GROUPED_APPLIED (tools/fit_kernel_analytical.py): the measured generations ship their
    fitted ratio, Blackwell Ultra Blackwell's (flagged); each slows a 16-bit grouped GEMM."""
    gemm = CAL.generations[gen].gemm
    assert gemm.grouped_bf16_ratio == pytest.approx(ratio)
    assert gemm.grouped_provenance is not None and gemm.grouped_provenance.method == method


@pytest.mark.parametrize("gpu_name", ["h100-sxm", "mi300x"])
def test_generations_without_measured_grouped_gemms_time_them_as_dense(gpu_name):
    """Hopper and CDNA have no measured grouped GEMM: grouped timed as dense (transferring
    Blackwell's ratio there broke mcore_moe_modelzoo on ggemm16)."""
    gpu = load_gpu(gpu_name)
    backend = AnalyticalBackend()
    args = (gpu, 2048.0, 4096.0, 7168.0, 8.0)
    assert backend.gemm_time_s(*args, grouped=True) == backend.gemm_time_s(*args)


def test_routed_expert_gemms_are_grouped_kernels_only_when_grouped():
    from perfcast.catalog.models import load_model
    from perfcast.graph.layer import _mlp_ops, backward_ops

    model = load_model("deepseek-v2-lite")
    for grouped in (True, False):
        fwd = _mlp_ops(model, 512, 1408, "experts", batch=8, grouped=grouped, routed=True)
        gemms = [op for op in fwd + backward_ops(fwd) if hasattr(op, "grouped_kernel")]
        assert len(gemms) == 6 and all(op.grouped_kernel == grouped for op in gemms)
    dense = _mlp_ops(model, 512, 1408, "mlp")
    assert not any(getattr(op, "grouped_kernel", False) for op in dense)
