"""SimuMax's measured kernel tables as shipped, through ``--kernel-backend measured``.

Data: shared/reference/measured_kernels/simumax_kernels.csv (912 points, B200 and A100-PCIe;
columns and conventions in simumax_kernels_README.md beside it).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from perfcast.catalog.gpus import load_gpu
from perfcast.catalog.models import load_model
from perfcast.catalog.systems import load_system
from perfcast.cli.main import app
from perfcast.estimate.training import estimate_training
from perfcast.kernels.analytical import AnalyticalBackend
from perfcast.kernels.measured import MeasuredBackend, load_kernel_table
from perfcast.kernels.simumax_table import measured_time_s
from perfcast.op_counts import attention_flops
from perfcast.specs.strategy import Strategy
from perfcast.specs.workload import Workload

SIMUMAX = Path(__file__).resolve().parents[1] / ".." / "shared" / "reference" / \
    "measured_kernels" / "simumax_kernels.csv"
pytestmark = pytest.mark.skipif(not SIMUMAX.is_file(), reason="shared reference data absent")

B200 = load_gpu("b200")
A100_PCIE = load_gpu("a100-80gb").model_copy(update={"name": "a100-pcie"})
"""SimuMax's A100-PCIe has no catalog entry: a user-defined GPU of that name matches its rows."""
GPUS = {"b200": B200, "a100-pcie": A100_PCIE}


@pytest.fixture(scope="module")
def table():
    return load_kernel_table(SIMUMAX)


@pytest.fixture(scope="module")
def backend(table):
    return MeasuredBackend(table=table)


def _raw_rows() -> list[dict[str, str]]:
    with SIMUMAX.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def _predict(backend: MeasuredBackend, row: dict[str, str]) -> float:
    gpu = GPUS[row["gpu"]]
    f = {key: float(row[key]) for key in ("m", "n", "k", "batch", "num_heads", "num_kv_heads",
                                           "seq_q", "seq_kv", "head_dim_qk", "head_dim_v")
         if row[key]}
    if row["kind"] == "gemm":
        return float(backend.gemm_time_s(gpu, f["m"], f["n"], f["k"], f["batch"],
                                         row["precision"], gemm_pass=row["gemm_pass"],
                                         main_grad=row["main_grad"] or "fp32"))
    return float(backend.attention_time_s(
        gpu, f["batch"], f["num_heads"], f["seq_q"], f["seq_kv"], f["head_dim_qk"],
        f["head_dim_v"], True, row["backward"] == "True", row["precision"],
        num_kv_heads=f["num_kv_heads"]))


def test_layout_detected_and_every_row_accounted_for(table):
    raw = _raw_rows()
    assert len(raw) == 912 and table.layout == "simumax"
    assert len(table.rows) + len(table.skipped) == 912
    # Kept out: 26 B200 qkv_contiguous=False attention keys and the 7 memory-bound aggregates.
    assert len(table.rows) == 879
    assert sum("qkv_contiguous" in s for s in table.skipped) == 26
    assert sum("memory-bound" in s for s in table.skipped) == 7
    kinds = [r["kind"] for r in table.rows]
    assert kinds.count("gemm") == 697 + 120 and kinds.count("attention") == 62


def test_converted_shapes_keep_the_flops_and_the_implied_time(table):
    """Rewritten (m, n, k, batch) keep SimuMax's 2·b·m·n·k / 2·ng·M·N·K; the time is the one
    SimuMax implies (its implied_time_ms column)."""
    raw = {f"SimuMax line {i + 2}": r for i, r in enumerate(_raw_rows())}
    for row in table.rows:
        src = raw[row["source"].split(":")[0]]
        assert float(row["time_s"]) == pytest.approx(float(src["implied_time_ms"]) / 1e3,
                                                     rel=1e-5)
        if row["kind"] == "gemm":
            flops = 2 * float(row["m"]) * float(row["n"]) * float(row["k"]) * float(row["batch"])
            assert flops == pytest.approx(float(src["flops_simumax_convention"]), rel=1e-12)


def test_every_measured_shape_reproduces_within_one_percent(table, backend):
    errors = np.array([_predict(backend, row) / float(row["time_s"]) - 1 for row in table.rows])
    assert len(errors) == 879
    assert np.max(np.abs(errors)) < 0.01


def test_causal_attention_counts_full_square_flops():
    """SimuMax's attention efficiency is against full-S² FLOPs although the kernel is causal:
    the time is FLOPs_simumax / (eff·peak), and perfcast's causal FLOPs over that time are
    half of SimuMax's achieved TFLOP/s (the README's causal_adjusted_tflops)."""
    for row in _raw_rows():
        if row["op_name"] not in ("sdp_fwd", "sdp_bwd"):
            continue
        b, s, h = float(row["batch"]), float(row["seq_len"]), float(row["head_num"])
        dq, dv = float(row["qk_head_dim"]), float(row["v_head_dim"])
        backward = row["op_name"] == "sdp_bwd"
        full = b * s * s * h * (dq + dv) * (5 if backward else 2)
        assert float(row["flops_simumax_convention"]) == pytest.approx(full, rel=1e-9)
        causal_flops = float(attention_flops(b, h, s, s, dq, dv, True, backward))
        causal_rate = causal_flops / measured_time_s(row) / 1e12
        assert causal_rate == pytest.approx(float(row["causal_adjusted_tflops"]), rel=0.01)


def test_gemm_pass_selects_the_layout_measured_for_it(backend):
    """4096×4096×4096 is measured as TN (forward) and NN (dgrad) on A100-PCIe at different
    speeds: each pass gets its own point."""
    times = {p: float(backend.gemm_time_s(A100_PCIE, 4096, 4096, 4096, gemm_pass=p))
             for p in ("forward", "backward_dgrad")}
    assert times["forward"] != pytest.approx(times["backward_dgrad"], rel=1e-4)


def test_interpolation_is_bounded_by_the_measured_ratios(table, backend):
    """Between measured shapes the time is the analytical one times a weighted geometric mean
    of the neighbours' measured/analytical ratios: never outside their range."""
    analytical = AnalyticalBackend()
    points = [r for r in table.rows if r["gpu"] == "b200" and r["kind"] == "gemm"
              and r["gemm_pass"] == "forward" and r["batch"] == "1.0"]
    ratios = [float(r["time_s"]) / float(analytical.gemm_time_s(
        B200, float(r["m"]), float(r["n"]), float(r["k"]))) for r in points]
    rng = np.random.default_rng(0)
    m = np.exp(rng.uniform(np.log(2048), np.log(65536), 400))
    n = np.exp(rng.uniform(np.log(512), np.log(57344), 400))
    k = np.exp(rng.uniform(np.log(512), np.log(28672), 400))
    t = backend.gemm_time_s(B200, m, n, k, gemm_pass="forward")
    ratio = t / analytical.gemm_time_s(B200, m, n, k)
    assert np.all(ratio >= min(ratios) * (1 - 1e-9)) and np.all(ratio <= max(ratios) * (1 + 1e-9))


def test_interpolation_monotone_between_neighbours(tmp_path):
    """Along one dimension between two measured shapes, the interpolated efficiency moves
    monotonically from one neighbour's to the other's."""
    analytical = AnalyticalBackend()
    rows = ["gpu,kind,precision,m,n,k,batch,num_heads,num_kv_heads,seq_q,seq_kv,head_dim_qk,"
            "head_dim_v,causal,backward,bytes_moved,time_s,source"]
    ks = (1024, 4096, 16384)
    effs = (0.4, 0.7, 0.5)
    for k, eff in zip(ks, effs, strict=True):
        t = float(analytical.gemm_time_s(B200, 8192, 8192, k)) / eff
        rows.append(f"b200,gemm,bf16,8192,8192,{k},1,,,,,,,,,,{t!r},synthetic")
    path = tmp_path / "table.csv"
    path.write_text("\n".join(rows) + "\n")
    backend = MeasuredBackend(table=load_kernel_table(path))
    for lo, hi in ((0, 1), (1, 2)):
        k = np.exp(np.linspace(np.log(ks[lo]), np.log(ks[hi]), 50))
        factor = backend.gemm_time_s(B200, 8192, 8192, k) / analytical.gemm_time_s(B200, 8192, 8192, k)
        step = np.diff(1 / factor)
        assert np.all(step >= -1e-12) if effs[hi] > effs[lo] else np.all(step <= 1e-12)
        assert 1 / factor[0] == pytest.approx(effs[lo]) and 1 / factor[-1] == pytest.approx(effs[hi])


def test_uncovered_shapes_fall_back_per_op_and_say_so(backend):
    analytical = AnalyticalBackend()
    assert not backend.outside_table(B200, "gemm", m=4096, n=1536, k=5120, batch=1,
                                     gemm_pass="forward")
    far = dict(m=64.0, n=128.0, k=128.0, batch=1.0)
    assert backend.outside_table(B200, "gemm", gemm_pass="forward", **far)
    assert float(backend.gemm_time_s(B200, **far)) == pytest.approx(
        float(analytical.gemm_time_s(B200, **far)))
    # No FP8 point and no H100 point in the table: both fall back.
    assert backend.outside_table(B200, "gemm", "fp8", m=4096, n=4096, k=4096, batch=1)
    h100 = load_gpu("h100-sxm")
    assert float(backend.gemm_time_s(h100, 4096, 4096, 4096)) == pytest.approx(
        float(analytical.gemm_time_s(h100, 4096, 4096, 4096)))


def test_training_report_lists_the_ops_that_fell_back(backend):
    model, system = load_model("llama-3-8b"), load_system("dgx-b200", num_gpus=8)
    strategy = Strategy(num_gpus=8, tp=1, pp=1)
    report = estimate_training(model, system, strategy,
                               Workload(seq_length=4096, global_batch_size=64), backend)
    fallbacks = report.kernel_table_fallback_ops
    assert "norm (memory_bound)" in fallbacks  # the table has no memory-bound points
    assert not any("(gemm)" in op for op in fallbacks if "proj" in op)
    assert report.to_dict()["kernel_table_fallback_ops"] == list(fallbacks)
    plain = estimate_training(model, system, strategy,
                              Workload(seq_length=4096, global_batch_size=64), "analytical")
    assert plain.kernel_table_fallback_ops == ()


def test_cli_kernels_gemm_reads_the_simumax_table():
    row = next(r for r in _raw_rows() if r["gpu"] == "B200" and r["op_name"] == "matmul"
               and r["stage"] == "fwd")
    runner = CliRunner()
    result = runner.invoke(app, [
        "kernels", "gemm", "--m", str(int(float(row["m"]))), "--n", str(int(float(row["n"]))),
        "--k", str(int(float(row["k"]))), "--pass", "forward", "--system", "dgx-b200",
        "--kernel-backend", "measured", "--kernel-table", str(SIMUMAX), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["time_s"] == pytest.approx(measured_time_s(row), rel=0.01)
    assert data["table_fallback"] is False
    result = runner.invoke(app, [
        "kernels", "gemm", "--m", "64", "--n", "64", "--k", "64", "--system", "dgx-b200",
        "--kernel-backend", "measured", "--kernel-table", str(SIMUMAX), "--json"])
    assert json.loads(result.output)["table_fallback"] is True


def test_cli_rejects_a_table_of_neither_layout(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n")
    result = CliRunner().invoke(app, ["kernels", "gemm", "--m", "1", "--n", "1", "--k", "1",
                                      "--kernel-backend", "measured", "--kernel-table", str(bad)])
    assert result.exit_code == 2
    assert "kernel_table" in result.output and "Traceback" not in result.output


def _table_args() -> list[str]:
    return ["--kernel-backend", "measured", "--kernel-table", str(SIMUMAX)]


def test_cli_train_search_sweep_take_the_table():
    runner = CliRunner()
    base = ["--model", "llama-3-8b", "--gpus", "8", "--system", "dgx-b200"]
    train = runner.invoke(app, ["train", *base, *_table_args(), "--json"])
    assert train.exit_code == 0, train.output
    data = json.loads(train.output)
    assert data["kernel_backend"] == "measured"
    assert "norm (memory_bound)" in data["kernel_table_fallback_ops"]
    plain = json.loads(runner.invoke(app, ["train", *base, "--json"]).output)
    assert data["step_time_s"] != pytest.approx(plain["step_time_s"], rel=1e-3)
    search = runner.invoke(app, ["search", *base, *_table_args(), "--top", "1", "--json"])
    assert search.exit_code == 0, search.output
    assert json.loads(search.output)["best"]
    sweep = runner.invoke(app, ["sweep", "--model", "llama-3-8b", "--gpus", "8", "--systems",
                                "dgx-b200", *_table_args(), "--json"])
    assert sweep.exit_code == 0, sweep.output
    row = json.loads(sweep.output)["rows"][0]
    assert row["kernel_backend"] == f"measured:{SIMUMAX}" and row["tokens_per_s_per_gpu"] > 0


def test_cli_table_needs_the_measured_backend():
    result = CliRunner().invoke(app, ["train", "--model", "llama-3-8b", "--gpus", "8",
                                      "--kernel-table", str(SIMUMAX)])
    assert result.exit_code == 2 and "needs --kernel-backend measured" in result.output
