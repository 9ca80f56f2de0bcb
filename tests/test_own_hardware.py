"""One's own hardware (issue 22): ``--system FILE.yaml`` / ``--gpu FILE.yaml`` on every command
that takes a system, catalog GPU names as systems, the shipped templates, and one-line errors
naming the wrong field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_fuzz import invoke
from perfcast.catalog.gpus import gpu_names, load_gpu
from perfcast.catalog.hardware_schema import GPUFile, SystemFile
from perfcast.catalog.systems import load_system
from perfcast.cli.hardware_cmd import template_text
from perfcast.errors import InputError
from perfcast.units import GB

ISSUE_GPUS = ("gaudi3", "tpu-v5e", "tpu-v5p", "tpu-v6e", "mi250x", "h100-pcie")


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    """The two templates as printed by ``perfcast catalog template``, a system file that points
    at the GPU file, and a GPU file with twice the H100's HBM."""
    root = tmp_path_factory.mktemp("hw")
    gpu = root / "mygpu.yaml"
    assert invoke(["catalog", "template", "gpu"]).exit_code == 0
    gpu.write_text(template_text("gpu"))
    system = root / "mysys.yaml"
    system.write_text(template_text("system"))
    pointing = root / "pointing.yaml"
    pointing.write_text(template_text("system").replace("gpu: h100-sxm ", "gpu: mygpu.yaml "))
    big = root / "big.yaml"
    big.write_text(template_text("gpu").replace("hbm_GB: 80 ", "hbm_GB: 160 ")
                   .replace("hbm_usable_MiB: 81559", "hbm_usable_MiB: 163118"))
    return {"gpu": gpu, "system": system, "pointing": pointing, "big": big}


def test_templates_validate_and_document_every_field() -> None:
    for kind, schema in (("gpu", GPUFile), ("system", SystemFile)):
        text = template_text(kind)
        for field in schema.model_fields:
            assert field in text, f"{kind} template does not mention {field}"


def test_catalog_entries_follow_the_same_schema() -> None:
    """Every shipped GPU and system loads through the schema a user's file goes through."""
    for name in gpu_names():
        assert load_gpu(name).name == name
    from perfcast.catalog.systems import list_systems

    assert list_systems()


def test_files_build_the_stated_hardware(files) -> None:
    gpu_node = load_system(str(files["gpu"]))
    assert gpu_node.name == "mygpu-node" and gpu_node.gpu.hbm_capacity_bytes == 80 * GB
    assert gpu_node.gpu.peak_flops("bf16") == pytest.approx(989e12)
    assert "replace with where your numbers come from" in gpu_node.source
    system = load_system(str(files["pointing"]), num_gpus=16)
    assert system.name == "my-cluster" and system.gpu.name == "mygpu"
    assert system.num_gpus == 16 and system.scale_up_bandwidth_Bps == pytest.approx(450e9)
    swapped = load_system("dgx-h100", gpu=str(files["big"]))
    assert swapped.gpu.hbm_capacity_bytes == 160 * GB
    assert swapped.scale_up_domain_gpus == load_system("dgx-h100").scale_up_domain_gpus


@pytest.mark.parametrize("command", [
    ["train", "-m", "llama3-8b", "--gpus", "8"],
    ["memory", "-m", "llama3-8b", "--gpus", "8"],
    ["search", "-m", "llama3-8b", "--gpus", "8", "--tp", "1", "--pp", "1", "--top", "1"],
    ["sweep", "-m", "llama3-8b", "--gpus", "8"],
    ["infer", "-m", "llama3-8b"],
    ["kernels", "gemm", "--m", "4096", "--n", "4096", "--k", "4096"],
    ["comm", "all-reduce", "--size-bytes", "1e8", "--gpus", "8"],
])
def test_every_command_takes_a_system_file(files, command) -> None:
    result = invoke([*command, "--system", str(files["pointing"]), "--json"], limit_s=60)
    assert result.exit_code == 0, result.stderr or result.stdout
    assert result.problem is None
    text = result.stdout
    assert "my-cluster" in text or "mygpu" in text or "pointing.yaml" in text  # sweep: the path


@pytest.mark.parametrize("command", [
    ["train", "-m", "llama3-8b", "--gpus", "8"],
    ["memory", "-m", "llama3-8b", "--gpus", "8"],
    ["search", "-m", "llama3-8b", "--gpus", "8", "--tp", "1", "--pp", "1", "--top", "1"],
    ["infer", "-m", "llama3-8b"],
    ["kernels", "gemm", "--m", "4096", "--n", "4096", "--k", "4096"],
    ["comm", "all-reduce", "--size-bytes", "1e8", "--gpus", "8"],
])
def test_gpu_file_replaces_the_gpu(files, command) -> None:
    base = invoke([*command, "--json"], limit_s=60)
    mine = invoke([*command, "--gpu", str(files["big"]), "--json"], limit_s=60)
    assert base.exit_code == 0 and mine.exit_code == 0, mine.stderr
    assert "big" in mine.stdout and "big" not in base.stdout


def test_memory_capacity_follows_the_gpu_file(files) -> None:
    args = ["memory", "-m", "llama3-8b", "--gpus", "8", "--json"]
    base = json.loads(invoke(args).stdout)
    mine = json.loads(invoke([*args, "--gpu", str(files["big"])]).stdout)
    assert mine["capacity_bytes"] == pytest.approx(2 * base["capacity_bytes"])


@pytest.mark.parametrize("gpu", ISSUE_GPUS)
def test_issue_gpus_are_systems(gpu: str) -> None:
    """The GPUs issue 22 names work as --system (a node from their hardware_specs.csv row); a
    generation without kernel/collective measurements says which constants stood in."""
    result = invoke(["train", "-m", "llama3-8b", "--gpus", "8", "--system", gpu, "--json"])
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["gpu"] == gpu
    calibration = report["calibration"]
    measured = gpu in ("h100-pcie",)
    assert bool(calibration["stand_ins"]) is not measured
    if not measured:
        text = invoke(["train", "-m", "llama3-8b", "--gpus", "8", "--system", gpu]).stdout
        assert "other GPUs" in " ".join(text.split())


@pytest.mark.parametrize(("edit", "field"), [
    (("hbm_GB: 80 ", "hbm_GB: -3 "), "hbm_GB=-3"),
    (("tdp_source:", "# tdp_source:"), "tdp_source=None"),
    (("vendor: nvidia", "vendor: acme"), "vendor='acme'"),
    (("  bf16: 989 ", "  # bf16: 989 "), "peak_TFLOPs="),
    (("gpus_per_node: 8 ", "gpus_per_node: 8\nwarp_speed: 9 "), "warp_speed=9"),
])
def test_bad_gpu_file_is_one_line_naming_the_field(tmp_path, edit, field) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(template_text("gpu").replace(*edit, 1))
    for command in (["train", "-m", "llama3-8b", "--system", str(path)],
                    ["infer", "-m", "llama3-8b", "--gpu", str(path)]):
        result = invoke(command)
        assert result.exit_code == 2 and result.problem is None
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and field in lines[0] and "bad.yaml" in lines[0]


def test_bad_system_names_and_files(tmp_path) -> None:
    with pytest.raises(InputError, match="no-such.yaml"):
        load_system(str(tmp_path / "no-such.yaml"))
    with pytest.raises(InputError, match="perfcast catalog template"):
        load_system("dgx-h1000")
    path = tmp_path / "sys.yaml"
    path.write_text("gpu: h100-sxm\ngpus_per_node: 0\nscale_up_domain_gpus: 8\nsource: x\n")
    with pytest.raises(InputError, match="gpus_per_node"):
        load_system(str(path))
    path.write_text("gpu: nosuch-gpu\ngpus_per_node: 8\nscale_up_domain_gpus: 8\nsource: x\n")
    with pytest.raises(InputError, match="nosuch-gpu"):
        load_system(str(path))


@pytest.mark.parametrize(("system", "defaulted"), [("gaudi3", True), ("tpu-v6e", True),
                                                   ("dgx-h100", False)])
def test_kernels_and_comm_say_when_constants_are_borrowed(system: str, defaulted: bool) -> None:
    gemm = invoke(["kernels", "gemm", "--m", "4096", "--n", "4096", "--k", "4096", "--system",
                   system, "--json"])
    assert json.loads(gemm.stdout)["calibration_default"] is defaulted
    comm = invoke(["comm", "all-reduce", "--size-bytes", "1e8", "--gpus", "8", "--system",
                   system, "--json"])
    assert json.loads(comm.stdout)["calibration_default"] is defaulted
    text = invoke(["comm", "all-reduce", "--size-bytes", "1e8", "--gpus", "8", "--system",
                   system]).stdout
    assert ("other GPUs" in " ".join(text.split())) is defaulted
