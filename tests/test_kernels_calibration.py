"""``perfcast kernels attention --calibration DIR`` (issue 21 item 1): the derived attention
kernel classes (``attention_kernels.yaml``, fitted by ``perfcast calibrate``) come from the
directory; the shipped calibration gives the same time; a bad directory is a one-line exit 2."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from perfcast.calibration.bundle import load_calibration
from perfcast.cli.main import app
from perfcast.validate.calibration_writer import write_training_files

runner = CliRunner()
ATTENTION = "kernels attention --batch 2 --seq-q 4096 --system dgx-h100 --json"
SLOWER = 1.5


@pytest.fixture(scope="module")
def slower_triton(tmp_path_factory) -> Path:
    """A calibration directory whose Triton attention kernel is 1.5x slower relative to FA2
    than the shipped fit says, written by the package's own writer."""
    shipped = load_calibration()
    kernels = shipped.attention_kernels
    triton = kernels.derived["triton"]
    slower = triton.model_copy(update={
        "time_ratio": SLOWER * triton.time_ratio,
        "time_ratio_by_generation": {g: SLOWER * r
                                     for g, r in triton.time_ratio_by_generation.items()}})
    cal = shipped.replace(attention_kernels=kernels.model_copy(
        update={"derived": {**kernels.derived, "triton": slower}}))
    out = tmp_path_factory.mktemp("slower_triton")
    write_training_files(cal, [], out, {"training.csv": "0" * 64}, 1, "analytical")
    return out


def _time_s(args: str) -> float:
    result = runner.invoke(app, shlex.split(args))
    assert result.exit_code == 0, result.output[-500:]
    return json.loads(result.stdout)["time_s"]


def test_the_derived_kernel_ratio_comes_from_the_calibration_dir(slower_triton):
    shipped = _time_s(f"{ATTENTION} --attention-kernel triton")
    mine = _time_s(f"{ATTENTION} --attention-kernel triton --calibration {slower_triton}")
    assert mine == pytest.approx(SLOWER * shipped, rel=2e-3)  # ratios written to 4 digits
    # FA2, the calibrated base class, is not a derived kernel: unchanged
    assert _time_s(f"{ATTENTION} --attention-kernel fa2 --calibration {slower_triton}") == (
        _time_s(f"{ATTENTION} --attention-kernel fa2"))


@pytest.mark.parametrize("bad", ["missing", "empty"])
def test_a_bad_calibration_dir_is_one_line_exit_2(tmp_path, bad):
    directory = tmp_path / bad
    if bad == "empty":
        directory.mkdir()
    result = runner.invoke(app, shlex.split(f"{ATTENTION} --calibration {directory}"))
    lines = result.output.strip().splitlines()
    assert result.exit_code == 2 and len(lines) == 1, result.output[-500:]
    assert "calibration" in lines[0] and str(directory) in lines[0]
