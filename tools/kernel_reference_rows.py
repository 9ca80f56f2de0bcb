"""Read ``shared/reference/kernel_efficiency.csv`` into typed observations for the roofline fit.

Each CSV row becomes zero or more ``Observation``s (a GEMM, an attention pass, a decode-attention
HBM fraction, or a plateau HBM fraction) or an ``Excluded`` entry with the reason. Rows are
named by their 1-based line number in the file (header = line 1). Peaks are the catalog peaks
(``shared/reference/hardware_specs.csv``) that ``GPUSpec`` will report, not the row's own
``peak_used`` where they differ (MI355X: 2500, not 2300), so fitted efficiencies apply to specs.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from pathlib import Path

from perfcast.specs.hardware import GPUSpec

T = 1e12


@dataclass(frozen=True)
class Hardware:
    generation: str
    peak_bf16_flops: float
    peak_fp8_flops: float | None
    hbm_bandwidth_Bps: float

    def gpu(self, name: str) -> GPUSpec:
        return GPUSpec(
            name=name, display_name=name, vendor="amd" if "cdna" in self.generation else "nvidia",
            generation=self.generation, peak_bf16_flops=self.peak_bf16_flops,
            peak_fp8_flops=self.peak_fp8_flops, hbm_capacity_bytes=80e9,
            hbm_bandwidth_Bps=self.hbm_bandwidth_Bps, source="hardware_specs.csv (fit table)",
        )


_A100_SXM = Hardware("ampere", 312 * T, None, 2.039 * T)
_A100_PCIE = Hardware("ampere", 312 * T, None, 1.935 * T)  # NVIDIA A100 datasheet, 80GB PCIe
_H100 = Hardware("hopper", 989 * T, 1979 * T, 3.35 * T)
_GH200 = Hardware("hopper", 989 * T, 1979 * T, 4.9 * T)  # GH200 144GB HBM3e datasheet
_B200 = Hardware("blackwell", 2250 * T, 4500 * T, 8.0 * T)
_B300 = Hardware("blackwell-ultra", 2250 * T, 4500 * T, 8.0 * T)
_MI300X = Hardware("cdna3", 1307.4 * T, 2614.9 * T, 5.3 * T)

HARDWARE: dict[str, Hardware] = {
    "NVIDIA A100 SXM": _A100_SXM,
    "NVIDIA A100 80GB SXM4": _A100_SXM,
    "NVIDIA A100 PCIe": _A100_PCIE,
    "A100 PCIe 80GB": _A100_PCIE,
    "NVIDIA H100": _H100,
    "NVIDIA H100 SXM": _H100,
    "NVIDIA H100 SXM5": _H100,
    "NVIDIA H100 80GB SXM5": _H100,
    "H100 SXM 80GB": _H100,
    "NVIDIA H800 SXM5": _H100,  # same GH100 silicon and HBM3 (hardware_specs.csv)
    "NVIDIA H800": _H100,
    "NVIDIA H200 SXM": Hardware("hopper", 989 * T, 1979 * T, 4.8 * T),
    "NVIDIA H100 (Meta variant, 2.4 TB/s HBM)": Hardware("hopper", 989 * T, 1979 * T, 2.4 * T),
    "NVIDIA GH200 SXM (900W, 141GiB)": _GH200,
    "NVIDIA GH200 SXM": _GH200,
    "NVIDIA B200 SXM": _B200,
    "NVIDIA B200": _B200,
    "NVIDIA GB200 SXM": Hardware("blackwell", 2500 * T, 5000 * T, 8.0 * T),
    "NVIDIA B300 SXM": _B300,
    "NVIDIA B300 SXM6 AC": _B300,
    "AMD MI300X": _MI300X,
    "AMD MI300X (750W)": _MI300X,
    "AMD MI325X (1000W)": Hardware("cdna3", 1307.4 * T, 2614.9 * T, 6.0 * T),
    "AMD MI355X": Hardware("cdna4", 2500 * T, 5000 * T, 8.0 * T),
    "AMD MI350X (gfx950, 256 CU)": Hardware("cdna4", 2300 * T, 4600 * T, 8.0 * T),
}


@dataclass(frozen=True)
class Attention:
    batch: float
    num_heads: float
    seq_q: float
    seq_kv: float
    head_dim: float
    causal: bool


@dataclass(frozen=True)
class Observation:
    """One measured number. ``block`` says what it calibrates; ``measured`` is FLOP/s for
    compute rows and a fraction of peak HBM bandwidth for ``hbm`` rows."""

    line: int
    hardware: str
    block: str  # gemm-bf16 | gemm-fp8 | attn-fwd | attn-bwd | attn-fwd+bwd | attn-fwd-fp8 | hbm
    implementation: str
    measured: float
    fit: bool
    why_not_fit: str = ""
    gemm: tuple[float, float, float, float] | None = None  # m, n, k, batch
    attention: Attention | None = None
    decode_bytes: float | None = None  # for decode attention HBM rows

    @property
    def hw(self) -> Hardware:
        return HARDWARE[self.hardware]

    @property
    def generation(self) -> str:
        return self.hw.generation


def _tokens(text: str) -> float:
    return float(text[:-1]) * 1024 if text.endswith("k") else float(text)


def _precision_class(dtype: str) -> str:
    return "fp8" if dtype.startswith("fp8") else "bf16"


def _gemm(line: int, row: dict[str, str]) -> Observation | str:
    shape, kernel = row["shape_params"], row["kernel"]
    if m := re.search(r"MxNxK=(\d+)x(\d+)x(\d+)", shape):
        dims = (*map(float, m.groups()), 1.0)
    elif m := re.search(r"groups=(\d+) M/group=(\d+) N=(\d+) K=(\d+)", shape):
        g, mm, n, k = map(float, m.groups())
        dims = (mm, n, k, g)
    elif m := re.search(r"M=(\d+) N=(\d+) K=(\d+)", shape):
        dims = (*map(float, m.groups()), 1.0)
    elif "ROCm 6.1" in row["notes"]:
        return "ROCm 6.1 result, superseded by ROCm 6.2+ (lines 13, 23-28)"
    else:
        return "no GEMM shape (headline number)"
    if row["hardware"].startswith("Intel"):
        return "Gaudi is not a calibrated generation"
    if "software efficiency" in kernel:
        return "same measurement as line 24, restated against the throttled clock"
    impl = "DeepGEMM" if "block-scaled" in kernel or "grouped" in kernel else kernel.split("(")[-1]
    return Observation(line, row["hardware"], f"gemm-{_precision_class(row['dtype'])}",
                       impl.strip(") "), float(row["measured_tflops"]) * T, True, gemm=dims)


def _attention(line: int, row: dict[str, str]) -> Observation | str:
    shape, kernel, dtype = row["shape_params"], row["kernel"], row["dtype"]
    m = re.search(r"seqlen=(\w+), headdim=(\d+), ([\w -]+)", shape)
    if m is None or not row["measured_tflops"]:
        return "no shape or no value (label hidden / headline number)"
    seq, head_dim = _tokens(m.group(1)), float(m.group(2))
    mask = m.group(3)
    if "unlabelled" in mask:
        return "causal flag not labelled in the source figure"
    causal = "non-causal" not in mask
    batch, heads = 16384 / seq, 2048 / head_dim  # all these figures: batch*seqlen=16k, hidden 2048
    impl = re.sub(r".*\((.*)\).*", r"\1", kernel) if "(" in kernel else kernel.split()[0]
    if "fwd+bwd" in kernel:
        block, impl = "attn-fwd+bwd", "FlashAttention-2"
    elif "backward" in kernel:
        block = "attn-bwd"
    else:
        block = "attn-fwd-fp8" if dtype.startswith("fp8") else "attn-fwd"
    hw = HARDWARE[row["hardware"]]
    fit, why = True, ""
    if hw.generation == "hopper" and ("FA2" in impl or "FlashAttention-2" in impl):
        fit, why = False, "FA2 (Ampere-design kernel) on Hopper; production uses FA3/cuDNN"
    elif "Triton" in impl:
        fit, why = False, "Triton tutorial kernel; production uses FA3/cuDNN"
    return Observation(line, row["hardware"], block, impl, float(row["measured_tflops"]) * T,
                       fit, why, attention=Attention(batch, heads, seq, seq, head_dim, causal))


def _decode(line: int, row: dict[str, str]) -> Observation | str:
    shape = row["shape_params"]
    pct = float(re.search(r"~(\d+)%", row["pct_of_peak"]).group(1)) / 100
    if m := re.search(r"kv_len=(\w+),", shape):
        batch, kv = 1.0, _tokens(m.group(1))
    else:
        m = re.search(r"batch=(\d+), kv_len/request=(\w+)", shape)
        batch, kv = float(m.group(1)), _tokens(m.group(2))
    attn = Attention(batch, 32, 1, kv, 128, False)  # Llama-7B: 32 q/kv heads, head_dim 128, fp16
    kv_bytes = 2 * batch * 32 * kv * 128 * 2
    fit = kv_bytes >= 512 * 2**20
    why = "" if fit else "KV < 512 MiB: fixed split-KV/page-table cost beyond launch not modelled"
    return Observation(line, row["hardware"], "hbm", "FlashInfer decode", pct, fit, why,
                       attention=attn, decode_bytes=kv_bytes)


def _plateau_hbm(line: int, row: dict[str, str]) -> list[Observation] | str:
    peak = float(re.search(r"(\d+) GB/s", row["peak_used"]).group(1))
    if row["measured_GBps"]:
        values = [float(v) for v in re.findall(r"(\d+(?:\.\d+)?)(?: \(|$)", row["measured_GBps"])]
        fractions = [v / peak for v in values]
    else:
        fractions = [float(row["pct_of_peak"].rstrip("%")) / 100]
    return [Observation(line, row["hardware"], "hbm", row["kernel"], f, True)
            for f in fractions]


def read_observations(path: Path) -> tuple[list[Observation], dict[int, str]]:
    """All observations and, for every other line, why it was not used."""
    observations: list[Observation] = []
    excluded: dict[int, str] = {}
    with path.open(newline="", encoding="utf-8") as f:
        for line, row in enumerate(csv.DictReader(f), start=2):
            kernel, hardware = row["kernel"], row["hardware"]
            result: Observation | list[Observation] | str
            if hardware not in HARDWARE and not hardware.startswith("Intel"):
                result = "no single calibrated GPU (text, ratio or model description)"
            elif "GEMM" in kernel and "roofline constant" not in kernel:
                result = _gemm(line, row)
            elif "decode attention" in kernel:
                result = _decode(line, row)
            elif "FlashAttention-2 fwd+bwd" in kernel or kernel.startswith("attention "):
                result = _attention(line, row)
            elif ("pct_achievable_mem_bw" in kernel or "memory-bound roofline" in kernel
                  or "HBM read bandwidth" in kernel or "memory-bound config" in kernel):
                result = _plateau_hbm(line, row)
            elif "dense MHA prefill" in kernel:
                fwd, bwd = (float(v) * T for v in re.findall(r"(\d+) (?:fwd|bwd)",
                                                              row["measured_tflops"]))
                shape = Attention(16384 / 8192, 16, 8192, 8192, 128, False)  # assumed: large
                result = [Observation(line, hardware, "attn-fwd", "SM100", fwd, True,
                                      attention=shape),
                          Observation(line, hardware, "attn-bwd", "SM100", bwd, True,
                                      attention=shape)]
            elif "FA3 (flash_v3)" in kernel:
                values = re.findall(r"(\d+\.\d+)", row["notes"].split("TFLOPS")[0])
                result = [Observation(line, hardware, "attn-fwd", "FA3 (tritonbench)",
                                      float(v) * T, False, "tritonbench; causal flag not stated",
                                      attention=Attention(16384 / s, 16, s, s, 128, False))
                          for v, s in zip(values, (512, 1024, 2048, 4096, 8192, 16384),
                                          strict=True)]
            elif "launch overhead" in kernel:
                result = "launch overhead: used directly (2 us), not fitted"
            else:
                result = "no shape to time (headline, constant, MLA or host-link number)"
            if isinstance(result, str):
                excluded[line] = result
            elif isinstance(result, list):
                observations.extend(result)
            else:
                observations.append(result)
    return observations, excluded
