"""HBM capacity in the units vendors mean: the fit verdict compares with the memory the driver
reports (catalog ``hbm_usable_MiB``, nvidia-smi memory.total), one check per GPU family."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from perfcast.catalog.gpus import list_gpus, load_gpu
from perfcast.catalog.systems import load_system
from perfcast.cli.main import app
from perfcast.search.sweep import scaled_system
from perfcast.units import GiB

runner = CliRunner()


@pytest.mark.parametrize("gpu,system,gib", [
    ("a100-80gb", "dgx-a100", 80.0),      # ampere: 81920 MiB
    ("h100-sxm", "dgx-h100", 79.65),      # hopper: 81559 MiB
    ("h200-sxm", "dgx-h200", 140.40),     # hopper HBM3e: 143771 MiB
    ("b200", "dgx-b200", 179.06),         # blackwell: 183359 MiB
])
def test_memory_reports_the_usable_capacity(gpu, system, gib):
    assert load_gpu(gpu).usable_hbm_bytes / GiB == pytest.approx(gib, abs=0.01)
    result = runner.invoke(app, ["memory", "--model", "llama-3-8b", "--system", system, "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["capacity_bytes"] / GiB == pytest.approx(gib, abs=0.01)


def test_h100_text_report_says_79_6_gib():
    result = runner.invoke(app, ["memory", "--model", "llama-3-8b", "--system", "dgx-h100"])
    assert "capacity: 79.65 GiB" in result.stdout


def test_usable_is_never_above_the_physical_binary_capacity():
    """Drivers report at most the HBM stacks' binary size; without a recorded reading the
    vendor figure (decimal GB) stands."""
    for gpu in list_gpus():
        assert gpu.usable_hbm_bytes <= gpu.hbm_capacity_bytes / 1e9 * GiB
        if gpu.hbm_usable_bytes is None:
            assert gpu.usable_hbm_bytes == gpu.hbm_capacity_bytes
        else:
            assert "usable HBM" in gpu.source


def test_capacity_sweep_scales_the_usable_bytes_too():
    system = load_system("dgx-h100")
    doubled = scaled_system(system, "hbm_capacity", 2.0)
    assert doubled.gpu.usable_hbm_bytes == pytest.approx(2 * system.gpu.usable_hbm_bytes)
