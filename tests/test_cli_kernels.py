"""`perfcast kernels` and `perfcast profile` from the command line."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from perfcast.cli.main import app

RUNNER = CliRunner()


def test_kernels_gemm_json_has_time_and_tflops():
    result = RUNNER.invoke(app, ["kernels", "gemm", "--m", "8192", "--n", "8192", "--k", "8192",
                                 "--dtype", "bf16", "--system", "dgx-h100", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["tflops"] == pytest.approx(2 * 8192**3 / data["time_s"] / 1e12)
    assert data["tile"] == "128x256" and data["bound"] == "compute"


@pytest.mark.parametrize("backend", ["roofline", "analytical", "measured"])
def test_kernels_attention_every_backend(backend):
    result = RUNNER.invoke(app, ["kernels", "attention", "--batch", "2", "--heads", "16",
                                 "--kv-heads", "4", "--seq-q", "8192", "--head-dim", "128",
                                 "--backward", "--kernel-backend", backend, "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["time_s"] > 0


def test_kernels_bad_dtype_is_one_line_exit_2():
    result = RUNNER.invoke(app, ["kernels", "gemm", "--m", "1", "--n", "1", "--k", "1",
                                 "--dtype", "fp12"])
    assert result.exit_code == 2
    assert "fp12" in result.output


def test_train_accepts_backend_and_clock():
    base = ["train", "--model", "llama3-8b", "--gpus", "8", "--fsdp", "--json"]
    slow = RUNNER.invoke(app, base + ["--kernel-backend", "analytical", "--gpu-clock-mhz", "900"])
    fast = RUNNER.invoke(app, base + ["--kernel-backend", "analytical"])
    assert slow.exit_code == 0 and fast.exit_code == 0, slow.output
    assert json.loads(slow.output)["step_time_s"] > json.loads(fast.output)["step_time_s"]


def test_profile_without_torch_exits_2_with_install_hint():
    pytest.importorskip("typer")
    try:
        import torch  # noqa: F401
    except ImportError:
        result = RUNNER.invoke(app, ["profile", "--out", "x.csv"])
        assert result.exit_code == 2
        assert "pip install" in result.output
    else:
        pytest.skip("torch installed: the no-torch path cannot be exercised")
