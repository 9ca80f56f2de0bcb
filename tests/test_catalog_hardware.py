"""GPU and system catalogs: every entry loads, vendor units become SI once, names resolve."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
import yaml

from perfcast.catalog.gpus import GPUS_FILE, gpu_interconnect, gpu_names, list_gpus, load_gpu
from perfcast.catalog.systems import (
    SYSTEMS_FILE,
    list_systems,
    load_system,
    system_for_gpu,
    system_names,
)
from perfcast.errors import InputError
from perfcast.specs.hardware import GPUSpec, SystemSpec
from perfcast.validate.vocabulary import VocabularyError
from perfcast.validate.vocabulary_names import read_gpu_type

HARDWARE_CSV = Path("/work/shared/reference/hardware_specs.csv")
GROUND_TRUTH = Path("/work/shared/ground_truth")

GPU_SLUGS = {
    "a100-40gb", "a100-80gb", "h100-sxm", "h100-pcie", "h800-sxm", "h200-sxm", "b200", "gb200",
    "b300", "mi250x", "mi300x", "mi325x", "mi355x", "tpu-v5e", "tpu-v5p", "tpu-v6e", "gaudi3",
}
SYSTEM_SLUGS = {
    "dgx-a100", "dgx-a100-40gb", "dgx-h100", "dgx-h200", "dgx-b200", "dgx-b300", "gb200-nvl72",
    "gb300-nvl72", "mi300x-8", "mi325x-8", "mi355x-8", "hgx-h800",
}


# ----- GPUs ------------------------------------------------------------------------------------

def test_gpu_catalog_entries() -> None:
    assert GPU_SLUGS <= set(gpu_names())
    # Derived entries: one GCD of the MI250X (its row notes); the H100 SXM5 row with 96 GB at a
    # 500 W cap (ground_truth README, torchtitan's cluster).
    assert set(gpu_names()) - GPU_SLUGS == {"mi250x-gcd", "h100-96gb-500w"}


@pytest.mark.parametrize("slug", gpu_names())
def test_every_gpu_loads(slug: str) -> None:
    gpu = load_gpu(slug)
    assert isinstance(gpu, GPUSpec) and gpu.name == slug
    assert gpu.supports("bf16") and gpu.peak_bf16_flops > 1e14
    assert 1e10 < gpu.hbm_capacity_bytes < 1e12 and 1e11 < gpu.hbm_bandwidth_Bps < 1e13
    assert "hardware_specs.csv" in gpu.source
    assert load_gpu(slug) is gpu  # cached


def test_list_gpus_matches_names() -> None:
    assert [g.name for g in list_gpus()] == gpu_names()


def test_one_gpu_entry_per_csv_row() -> None:
    rows = yaml.safe_load(GPUS_FILE.read_text())["gpus"]
    with HARDWARE_CSV.open() as handle:
        csv_rows = list(csv.DictReader(handle))
    assert len(csv_rows) == 17
    by_row = {entry["csv_row"]: slug for slug, entry in rows.items()}
    for row in csv_rows:
        slug = by_row[f"{row['gpu']} | {row['variant']}"]
        entry = rows[slug]
        assert entry["source"] == row["source"]
        if row["bf16_tflops"]:
            assert entry["peak_TFLOPs"]["bf16"] == float(row["bf16_tflops"])
        assert entry["hbm_TBps"] == float(row["hbm_tbps"])


def test_si_conversion_h100() -> None:
    h100 = load_gpu("h100-sxm")
    assert h100.peak_bf16_flops == pytest.approx(989e12)
    assert h100.peak_flops("fp8") == pytest.approx(1979e12)
    assert h100.peak_fp32_flops == pytest.approx(67e12)
    assert h100.hbm_capacity_bytes == pytest.approx(80e9)
    assert h100.hbm_bandwidth_Bps == pytest.approx(3.35e12)
    assert h100.boost_clock_Hz == pytest.approx(1.83e9)
    assert h100.l2_cache_bytes == 50 * 2**20
    assert h100.num_sms == 132
    assert (h100.vendor, h100.generation) == ("nvidia", "hopper")


def test_si_conversion_others() -> None:
    a100 = load_gpu("a100-80gb")
    assert a100.hbm_bandwidth_Bps == pytest.approx(2.039e12)
    assert a100.l2_cache_bytes == 40960 * 1024  # FlashInfer: A100 L2 = 40960 KB
    assert not a100.supports("fp8")
    assert load_gpu("b200").peak_flops("fp4") == pytest.approx(9000e12)
    assert load_gpu("mi300x").peak_bf16_flops == pytest.approx(1307.4e12)
    assert load_gpu("tpu-v5e").hbm_bandwidth_Bps == pytest.approx(0.819e12)


def test_gpu_fills_are_documented() -> None:
    h800 = load_gpu("h800-sxm")
    assert h800.peak_flops("fp8") == pytest.approx(1979e12)
    assert "same GH100 silicon" in h800.source
    gcd = load_gpu("MI250X (1 GCD)")
    assert gcd.name == "mi250x-gcd"
    assert gcd.peak_bf16_flops == pytest.approx(load_gpu("mi250x").peak_bf16_flops / 2)


def test_generations() -> None:
    expected = {
        "a100-80gb": "ampere", "h100-sxm": "hopper", "b200": "blackwell", "gb200": "blackwell",
        "b300": "blackwell-ultra", "mi250x": "cdna2", "mi300x": "cdna3", "mi355x": "cdna4",
        "tpu-v6e": "tpu", "gaudi3": "gaudi",
    }
    for slug, generation in expected.items():
        assert load_gpu(slug).generation == generation


@pytest.mark.parametrize(
    ("spelling", "slug"),
    [
        ("H100 (DGX-H100)", "h100-sxm"),
        ("H100 80GB", "h100-sxm"),
        ("H100 SXM 80GB", "h100-sxm"),
        ("H100 96GB HBM2e SXM (500W power limit)", "h100-96gb-500w"),
        ("H100 95GB HBM2e SXM (lower TDP)", "h100-96gb-500w"),
        ("NVIDIA H100 80GB HBM3", "h100-sxm"),
        ("A100", "a100-80gb"),
        ("A100 40GB", "a100-40gb"),
        ("A100 80GB", "a100-80gb"),
        ("A100 80GB (Selene, DGX A100)", "a100-80gb"),
        ("A100 SXM 80GB (DGX SuperPod, mclk 1593MHz, pclk 1410MHz, NVSwitch; IB 8x200Gb/s "
         "inter-node)", "a100-80gb"),
        ("A100 SXM 80GB x4 (NVLink)", "a100-80gb"),
        ("GB200 (DGX-GB200)", "gb200"),
        ("B200 (DGX-B200)", "b200"),
        ("H200", "h200-sxm"),
        ("H200 SXM 141GB", "h200-sxm"),
        ("H800", "h800-sxm"),
        ("MI250X (1 GCD)", "mi250x-gcd"),
        ("MI250X", "mi250x"),
        ("AMD Instinct MI300X", "mi300x"),
        ("TPU v5p", "tpu-v5p"),
        ("Trillium", "tpu-v6e"),
        ("Intel Gaudi 3", "gaudi3"),
    ],
)
def test_gpu_alias_resolution(spelling: str, slug: str) -> None:
    assert load_gpu(spelling).name == slug


UNKNOWN_GROUND_TRUTH_GPUS = {
    "V100": "no row in ../shared/reference/hardware_specs.csv",
    "TPU v3": "no row in ../shared/reference/hardware_specs.csv",
    "TPU v4": "no row in ../shared/reference/hardware_specs.csv",
    "L40S": "no row in ../shared/reference/hardware_specs.csv",
    "MI350X 288GB": "no row in ../shared/reference/hardware_specs.csv (MI355X is a different "
                    "SKU: 1400 W vs 1000 W, other clocks)",
}
"""Ground-truth GPU spellings the catalog cannot hold, with the reason."""

UNSTATED_POWER_LIMIT = {"B200 (power-limited; limit not stated)"}
"""Spellings naming a power cap without its value: the sustained clock is unknown (a skip)."""


def test_ground_truth_gpu_types_resolve() -> None:
    """Every gpu_type of training.csv and inference.csv names a catalog system through the
    normalization layer (perfcast.validate.vocabulary_names), or is listed with its reason."""
    names = set()
    for file in ("training.csv", "inference.csv"):
        with (GROUND_TRUTH / file).open() as handle:
            names |= {row["gpu_type"] for row in csv.DictReader(handle)}
    for name in sorted(UNSTATED_POWER_LIMIT):
        with pytest.raises(VocabularyError, match="power limit without its value"):
            read_gpu_type(name)
    for name in sorted(names - set(UNKNOWN_GROUND_TRUTH_GPUS) - UNSTATED_POWER_LIMIT):
        found = read_gpu_type(name)
        assert found is not None, name
        assert found.system_spec.gpu.name == found.gpu == load_gpu(found.gpu).name
        assert found.system_spec.name == found.system
    for name in sorted(names & set(UNKNOWN_GROUND_TRUTH_GPUS)):
        with pytest.raises(VocabularyError, match="did you mean"):
            read_gpu_type(name)


def test_unknown_gpu_suggests() -> None:
    with pytest.raises(InputError) as info:
        load_gpu("H300")
    assert info.value.field == "gpu"
    assert "unknown gpu; did you mean:" in str(info.value)


# ----- systems ---------------------------------------------------------------------------------

def test_system_catalog_entries() -> None:
    assert SYSTEM_SLUGS <= set(system_names())


@pytest.mark.parametrize("slug", system_names())
def test_every_system_loads(slug: str) -> None:
    system = load_system(slug)
    assert isinstance(system, SystemSpec) and system.name == slug
    assert system.scale_up_bandwidth_Bps > system.scale_out_bandwidth_Bps > 0
    assert 0 < system.scale_up_latency_s < system.scale_out_latency_s < 1e-4
    assert system.num_gpus is None and len(system.source) > 40


def test_list_systems_matches_names() -> None:
    assert [s.name for s in list_systems()] == system_names()


def test_system_bandwidths_si() -> None:
    a100 = load_system("dgx-a100")
    assert a100.gpu.name == "a100-80gb"
    assert a100.scale_up_bandwidth_Bps == pytest.approx(300e9)
    assert a100.scale_out_bandwidth_Bps == pytest.approx(200e9 / 8)  # 200 Gb/s HDR per GPU
    assert load_system("dgx-a100-40gb").gpu.name == "a100-40gb"
    h100 = load_system("DGX H100")
    assert (h100.scale_up_bandwidth_Bps, h100.scale_out_bandwidth_Bps) == (450e9, 50e9)
    assert h100.scale_up_latency_s == pytest.approx(3e-6)
    assert h100.scale_out_latency_s == pytest.approx(10e-6)
    assert load_system("hgx-h800").scale_up_bandwidth_Bps == pytest.approx(200e9)
    assert load_system("mi300x-8").scale_up_bandwidth_Bps == pytest.approx(448e9)
    assert load_system("dgx-b300").scale_out_bandwidth_Bps == pytest.approx(100e9)


def test_nvl72_racks() -> None:
    gb200 = load_system("gb200-nvl72")
    assert (gb200.gpus_per_node, gb200.scale_up_domain_gpus) == (4, 72)
    assert gb200.scale_up_bandwidth_Bps == pytest.approx(900e9)
    gb300 = load_system("GB300 NVL72")
    assert gb300.gpu.name == "b300" and "B300" in gb300.source
    assert (gb300.gpus_per_node, gb300.scale_up_domain_gpus) == (4, 72)


def test_num_gpus() -> None:
    assert load_system("dgx-h100", num_gpus=1024).num_gpus == 1024
    for bad in (0, -8, 2.5):
        with pytest.raises(InputError) as info:
            load_system("dgx-h100", num_gpus=bad)  # type: ignore[arg-type]
        assert info.value.field == "num_gpus"


def test_unknown_system_suggests() -> None:
    with pytest.raises(InputError) as info:
        load_system("dgx-h300")
    assert info.value.field == "system"
    assert "dgx-h100" in str(info.value) or "dgx-h200" in str(info.value)


@pytest.mark.parametrize(
    ("gpu", "system"),
    [
        ("A100 80GB (Selene, DGX A100)", "dgx-a100"),
        ("A100 40GB", "dgx-a100-40gb"),
        ("H100 (DGX-H100)", "dgx-h100"),
        ("H200", "dgx-h200"),
        ("H800", "hgx-h800"),
        ("B200 (DGX-B200)", "dgx-b200"),
        ("B300", "dgx-b300"),
        ("GB200 (DGX-GB200)", "gb200-nvl72"),
        ("MI300X", "mi300x-8"),
        ("MI355X", "mi355x-8"),
        ("H100 PCIe", "h100-pcie-node"),
        ("Gaudi 3", "gaudi3-node"),
        ("TPU v5e", "tpu-v5e-node"),
    ],
)
def test_system_for_gpu(gpu: str, system: str) -> None:
    assert system_for_gpu(gpu).name == system


@pytest.mark.parametrize("slug", gpu_names())
def test_every_gpu_has_a_system(slug: str) -> None:
    system = system_for_gpu(slug, num_gpus=16)
    assert system.gpu.name == slug and system.num_gpus == 16
    link = gpu_interconnect(slug)
    if system.name.endswith("-node"):
        assert system.gpus_per_node == link.gpus_per_node
        assert system.scale_up_bandwidth_Bps == link.scale_up_bandwidth_Bps


def test_one_default_system_per_gpu() -> None:
    rows = yaml.safe_load(SYSTEMS_FILE.read_text())["systems"]
    defaults = [row["gpu"] for row in rows.values() if row.get("default_for_gpu")]
    assert len(defaults) == len(set(defaults))
