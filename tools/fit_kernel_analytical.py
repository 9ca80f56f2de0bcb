"""Fit the analytical (tile/wave) kernel calibration to shared/reference/kernel_efficiency.csv.

    python tools/fit_kernel_analytical.py [--csv PATH] [--write] [--date YYYY-MM-DD]

Reads the same observations as the roofline fit (``kernel_reference_rows``), times each row
through ``AnalyticalBackend`` itself on the catalog GPU of the row (SM count, clocks; HBM
bandwidth of the row's variant), and per generation minimises the campaign-weighted sum of
squared ln(predicted/measured) with Nelder-Mead over log-parameters:

* GEMM: Hopper fits main-loop efficiency (bf16, fp8), per-SM load bytes/clock, L2 bytes/clock
  per SM and fixed cycles per tile (the only generation with shape variety: DeepGEMM); other
  generations fit their efficiencies and take the load/L2/tile-cycle knobs from Hopper.
* Attention: Hopper fits forward/backward efficiency, softmax overlap and cycles per unit on
  FA3 + cuDNN rows; Ampere fits the same on FA2 fwd+bwd sums (forward/backward split set
  by the fit, not by separate rows); Blackwell fits its two
  efficiencies on its headline rows with the rest from Hopper; CDNA takes Hopper's.

Prints per-row errors, median / p90 absolute error and MAPE per generation; ``--write`` writes
``src/perfcast/calibration/kernel_analytical.yaml``.
"""

from __future__ import annotations

import argparse
import datetime
import math
from pathlib import Path

import numpy as np
import yaml
from kernel_reference_rows import HARDWARE, Observation, read_observations

from perfcast.calibration.kernel_analytical import KernelAnalyticalCalibration
from perfcast.catalog.gpus import load_gpu
from perfcast.kernels.analytical import AnalyticalBackend
from perfcast.kernels.counts import attention_flops, gemm_flops
from perfcast.specs.hardware import GPUSpec

REPO = Path(__file__).resolve().parents[1]
DEFAULT_CSV = REPO.parent / "shared" / "reference" / "kernel_efficiency.csv"
OUT = REPO / "src" / "perfcast" / "calibration" / "kernel_analytical.yaml"

CATALOG_GPU = {
    "NVIDIA A100 SXM": "a100-80gb", "NVIDIA A100 80GB SXM4": "a100-80gb",
    "NVIDIA A100 PCIe": "a100-80gb", "A100 PCIe 80GB": "a100-80gb",
    "NVIDIA H100": "h100-sxm", "NVIDIA H100 SXM": "h100-sxm", "NVIDIA H100 SXM5": "h100-sxm",
    "NVIDIA H100 80GB SXM5": "h100-sxm", "H100 SXM 80GB": "h100-sxm",
    "NVIDIA H800 SXM5": "h800-sxm", "NVIDIA H800": "h800-sxm", "NVIDIA H200 SXM": "h200-sxm",
    "NVIDIA GH200 SXM (900W, 141GiB)": "h100-sxm", "NVIDIA GH200 SXM": "h100-sxm",
    "NVIDIA B200 SXM": "b200", "NVIDIA B200": "b200", "NVIDIA GB200 SXM": "gb200",
    "AMD MI300X": "mi300x", "AMD MI300X (750W)": "mi300x", "AMD MI325X (1000W)": "mi325x",
    "AMD MI355X": "mi355x",
}
"""Reference hardware name -> catalog GPU (SMs, clocks); HBM bandwidth from the row's variant
(``kernel_reference_rows.HARDWARE``). B300 (no published boost clock) and the MI350X are
timed by the roofline fallback and not fitted here."""

_TILES_NV = "CUTLASS 3.x/2.x profiler tile sets (python/cutlass_library/generator.py)"
STRUCTURE = {
    "ampere": dict(
        tiles=[(256, 128), (128, 256), (128, 128), (128, 64), (64, 128), (64, 64)],
        tiles_source=_TILES_NV + " GenerateSM80_TensorOp_16816 (mma.sync 16x8x16)",
        block_q=128, block_kv=64,
        blocks_source="FlashAttention-2 flash_fwd_launch_template.h, hdim 64/128 on sm80"),
    "hopper": dict(
        tiles=[(128, 256), (256, 128), (128, 128), (128, 64), (64, 256), (64, 128), (64, 64)],
        tiles_source=_TILES_NV + " GenerateSM90_TensorOp_16b_WGMMA; DeepGEMM BLOCK_M 64/128, "
                     "BLOCK_N up to 256",
        block_q=128, block_kv=128,
        blocks_source="FlashAttention-3 hopper/tile_size.h, hdim 128 (kBlockM 128, kBlockN 128)"),
    "blackwell": dict(
        tiles=[(256, 256, 2), (256, 128, 2), (128, 256), (128, 128), (128, 64), (64, 128)],
        tiles_source=_TILES_NV + " GenerateSM100_TensorOp_16b_UMMA (1-SM and 2-SM UMMA; "
                     "256-row tiles span an SM pair)",
        block_q=128, block_kv=128,
        blocks_source="cuDNN/FlashAttention-4 sm100 forward, 128x128 tiles"),
    "cdna3": dict(
        tiles=[(256, 256), (256, 192), (256, 128), (128, 128), (128, 64), (64, 64)],
        tiles_source="hipBLASLt MT256x256/MT256x128 macro tiles; AMD MAF blog recommends "
                     "M=16*256, N=19*192 on 304 CUs (kernel_efficiency.csv line 29)",
        block_q=128, block_kv=64,
        blocks_source="composable_kernel FMHA forward (gfx942), 128x64 tiles"),
}
STRUCTURE["blackwell-ultra"] = STRUCTURE["blackwell"]
STRUCTURE["cdna4"] = STRUCTURE["cdna3"]
EXP_SOURCE = ("NVIDIA CUDA C++ Programming Guide, 'Arithmetic Instructions' throughput table: "
              "16 results/clock/SM for exp2 (MUFU) on compute capability 8.x-10.x; AMD CDNA3 ISA: "
              "v_exp_f32 is quarter rate (16/clock/CU); FA3 paper §3: 3.9 TFLOPS exp on H100")
SPLIT_K = (1, 2, 4, 8, 16)

GEMM_KEYS = ("mma_efficiency_bf16", "mma_efficiency_fp8", "sm_load_bytes_per_clock",
             "l2_bytes_per_clock_per_sm", "tile_overhead_cycles")
ATTN_KEYS = ("mma_efficiency_forward", "mma_efficiency_backward", "softmax_overlap",
             "unit_overhead_cycles")
START = dict(mma_efficiency_bf16=0.85, mma_efficiency_fp8=0.8, sm_load_bytes_per_clock=64.0,
             l2_bytes_per_clock_per_sm=48.0, tile_overhead_cycles=2000.0,
             mma_efficiency_forward=0.8, mma_efficiency_backward=0.7, softmax_overlap=0.5,
             unit_overhead_cycles=2000.0)
BOUNDS = dict(mma_efficiency_bf16=(0.3, 1.0), mma_efficiency_fp8=(0.3, 1.0),
              sm_load_bytes_per_clock=(8.0, 512.0), l2_bytes_per_clock_per_sm=(8.0, 512.0),
              tile_overhead_cycles=(1.0, 50000.0), mma_efficiency_forward=(0.3, 1.0),
              mma_efficiency_backward=(0.3, 1.0), softmax_overlap=(0.0, 1.0),
              unit_overhead_cycles=(1.0, 50000.0))


def gpu_of(o: Observation) -> GPUSpec:
    return load_gpu(CATALOG_GPU[o.hardware]).model_copy(
        update={"hbm_bandwidth_Bps": HARDWARE[o.hardware].hbm_bandwidth_Bps})


def block(gen: str, values: dict[str, float], prov: dict) -> dict:
    st = STRUCTURE[gen]
    tiles = [dict(tile_m=t[0], tile_n=t[1], sms=t[2] if len(t) > 2 else 1) for t in st["tiles"]]
    return {
        "gemm": dict(tiles=tiles, tiles_source=st["tiles_source"], split_k=list(SPLIT_K),
                     provenance=prov["gemm"], **{k: float(values[k]) for k in GEMM_KEYS}),
        "attention": dict(block_q=st["block_q"], block_kv=st["block_kv"],
                          blocks_source=st["blocks_source"], exp_per_clock_per_sm=16.0,
                          exp_source=EXP_SOURCE, provenance=prov["attention"],
                          **{k: float(values[k]) for k in ATTN_KEYS}),
    }


def backend_for(gen: str, values: dict[str, float]) -> AnalyticalBackend:
    prov = {"gemm": {"method": "default"}, "attention": {"method": "default"}}
    data = {"generated_by": "fit", "generated_on": "", "reference": "",
            "generations": {gen: block(gen, values, prov), "default": block(gen, values, prov)}}
    return AnalyticalBackend(calibration=KernelAnalyticalCalibration.model_validate(data))


def predicted_rate(backend: AnalyticalBackend, o: Observation) -> float:
    """Predicted FLOP/s of one observation, counted as the source counts it."""
    gpu = gpu_of(o)
    if o.gemm is not None:
        m, n, k, b = o.gemm
        prec = "fp8" if o.block == "gemm-fp8" else "bf16"
        return float(gemm_flops(m, n, k, b) / backend.gemm_time_s(gpu, m, n, k, b, prec))
    a = o.attention
    args = (gpu, a.batch, a.num_heads, a.seq_q, a.seq_kv, a.head_dim, a.head_dim, a.causal)
    fl = (a.batch, a.num_heads, a.seq_q, a.seq_kv, a.head_dim, a.head_dim, a.causal)
    if o.block == "attn-fwd+bwd":
        t = backend.attention_time_s(*args, False) + backend.attention_time_s(*args, True)
        return float((attention_flops(*fl, False) + attention_flops(*fl, True)) / t)
    backward = o.block == "attn-bwd"
    prec = "fp8" if o.block == "attn-fwd-fp8" else "bf16"
    return float(attention_flops(*fl, backward) / backend.attention_time_s(*args, backward, prec))


def log_errors(gen: str, values: dict[str, float], obs: list[Observation]) -> np.ndarray:
    backend = backend_for(gen, values)
    return np.array([math.log(predicted_rate(backend, o) / o.measured) for o in obs])


def weights(obs: list[Observation]) -> np.ndarray:
    count: dict[str, int] = {}
    for o in obs:
        count[o.implementation] = count.get(o.implementation, 0) + 1
    return np.array([len(obs) / (len(count) * count[o.implementation]) for o in obs])


def fit(gen: str, base: dict[str, float], keys: tuple[str, ...], obs: list[Observation]) -> dict:
    """Nelder-Mead on logit-scaled parameters ``keys`` within BOUNDS, others fixed."""
    from scipy.optimize import minimize

    w = weights(obs)

    def unpack(x: np.ndarray) -> dict[str, float]:
        values = dict(base)
        for key, v in zip(keys, x, strict=True):
            lo, hi = BOUNDS[key]
            values[key] = lo + (hi - lo) / (1.0 + math.exp(-v))
        return values

    def loss(x: np.ndarray) -> float:
        return float(np.sum(w * log_errors(gen, unpack(x), obs) ** 2))

    def pack(values: dict[str, float]) -> list[float]:
        out = []
        for key in keys:
            lo, hi = BOUNDS[key]
            f = min(max((values[key] - lo) / (hi - lo), 1e-3), 1 - 1e-3)
            out.append(math.log(f / (1 - f)))
        return out

    result = minimize(loss, pack(base), method="Nelder-Mead",
                      options={"maxiter": 600, "xatol": 1e-3, "fatol": 1e-6})
    return {k: float(f"{v:.4g}") for k, v in unpack(result.x).items()}


def summary(errors: np.ndarray) -> str:
    rel = np.abs(np.expm1(errors))
    return (f"n={len(rel)} median {np.median(rel):.1%} p90 {np.percentile(rel, 90):.1%} "
            f"MAPE {np.mean(rel):.1%}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--csv", type=Path, default=DEFAULT_CSV)
    parser.add_argument("--write", action="store_true")
    parser.add_argument("--date", default=datetime.date.today().isoformat())
    args = parser.parse_args()
    observations, _ = read_observations(args.csv)
    usable = [o for o in observations if o.fit and o.hardware in CATALOG_GPU
              and (o.block.startswith("gemm") or o.block.startswith("attn"))]
    by_gen: dict[str, list[Observation]] = {}
    for o in usable:
        by_gen.setdefault(load_gpu(CATALOG_GPU[o.hardware]).generation, []).append(o)
    fitted: dict[str, dict[str, float]] = {}
    provenance: dict[str, dict] = {}
    order = ["hopper"] + [g for g in by_gen if g != "hopper"]
    for gen in order:
        obs = by_gen[gen]
        gemm = [o for o in obs if o.gemm is not None]
        attn = [o for o in obs if o.attention is not None]
        base = dict(fitted.get("hopper", START))
        gemm_keys = GEMM_KEYS if gen == "hopper" else tuple(
            k for k in ("mma_efficiency_bf16", "mma_efficiency_fp8")
            if any(o.block == f"gemm-{k[-4:].strip('_')}" for o in gemm))
        attn_keys = ATTN_KEYS if gen in ("hopper", "ampere") else (
            ATTN_KEYS[:2] if attn else ())
        values = fit(gen, base, gemm_keys, gemm) if gemm_keys else base
        values = fit(gen, values, attn_keys, attn) if attn_keys else values
        fitted[gen] = values
        g_err, a_err = log_errors(gen, values, gemm), log_errors(gen, values, attn)
        note_g = "fitted: " + ", ".join(gemm_keys) + ("" if gen == "hopper" else
                                                      "; other knobs from hopper")
        provenance[gen] = {
            "gemm": {"method": "fitted" if gemm_keys else "transferred",
                     "source_rows": sorted({o.line for o in gemm}), "note": note_g,
                     "fit_rms_log_error": round(float(np.sqrt(np.mean(g_err ** 2))), 4)
                     if len(g_err) else None},
            "attention": {"method": "fitted" if attn_keys else "transferred",
                          "source_rows": sorted({o.line for o in attn}),
                          "note": "fitted: " + ", ".join(attn_keys) if attn_keys
                          else "from hopper (no shaped rows)",
                          "fit_rms_log_error": round(float(np.sqrt(np.mean(a_err ** 2))), 4)
                          if len(a_err) else None},
        }
        print(f"== {gen}: {values}")
        for o, e in zip(gemm + attn, np.concatenate([g_err, a_err]), strict=True):
            print(f"  line {o.line:4d} {o.block:13s} {o.hardware[:26]:26s} meas "
                  f"{o.measured / 1e12:7.1f} TF  err {math.expm1(e):+.1%}")
        if len(g_err):
            print("  GEMM", summary(g_err))
        if len(a_err):
            print("  attention", summary(a_err))
    generations = {}
    for gen in ("ampere", "hopper", "blackwell", "blackwell-ultra", "cdna3", "cdna4"):
        src = gen if gen in fitted else {"blackwell-ultra": "blackwell", "cdna4": "cdna3"}[gen]
        prov = provenance[src] if src == gen else {
            part: {"method": "transferred", "note": f"copy of {src} (no rows of its own)"}
            for part in ("gemm", "attention")}
        generations[gen] = block(gen, fitted[src], prov)
    worst = min(fitted, key=lambda g: fitted[g]["mma_efficiency_bf16"])
    generations["default"] = block("hopper", fitted[worst], {
        part: {"method": "default", "note": f"least favourable fitted generation ({worst}) "
               "with Hopper tiles"} for part in ("gemm", "attention")})
    data = {"generated_by": "tools/fit_kernel_analytical.py", "generated_on": args.date,
            "reference": "shared/reference/kernel_efficiency.csv", "generations": generations}
    KernelAnalyticalCalibration.model_validate(data)
    if args.write:
        header = ("# Generated by tools/fit_kernel_analytical.py from shared/reference/"
                  "kernel_efficiency.csv.\n# Do not edit by hand: change the script and re-run "
                  "it. Loaded by perfcast/calibration/kernel_analytical.py.\n")
        OUT.write_text(header + yaml.safe_dump(data, sort_keys=False, width=100))
        print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
