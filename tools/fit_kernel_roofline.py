"""Fit the roofline kernel calibration to shared/reference/kernel_efficiency.csv and write it.

    python tools/fit_kernel_roofline.py [--csv PATH] [--out PATH] [--date YYYY-MM-DD]

Per GPU generation, by least squares on log error (ln predicted/measured), each measurement
campaign (implementation) weighing the same in total, using the backend's own formulas
(``perfcast.kernels.efficiency`` / ``counts``):

1. attention: eff_max, keys_half, head_dim_half for forward, backward and FP8 forward where
   the generation has shaped rows (Hopper FA3 + cuDNN; Ampere FA2 fwd+bwd with the backward/
   forward ratio taken from FA2 on Hopper; Blackwell anchored on one headline row);
2. HBM efficiency from plateau bandwidth rows and decode attention with >= 512 MiB of KV;
3. GEMM eff_max and flops_half: both fitted on Hopper FP8 (the only block with shape variety);
   elsewhere eff_max is fitted and flops_half follows from Hopper's fixed ramp time
   t_ramp = flops_half/(peak·eff_max) (``kernels.efficiency.gemm_efficiency``).

Generations without rows for a block get a transferred value or the conservative ``default``
(the least favourable value over the fitted generations). Prints every row's error through
``RooflineBackend`` itself, aggregates per generation, and writes the YAML.
"""

from __future__ import annotations

import argparse
import datetime
import math
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from kernel_reference_rows import Observation, read_observations
from kernel_roofline_report import report, summary

from perfcast.calibration.kernel_roofline import (
    AttentionEfficiency,
    GemmEfficiency,
    GenerationKernelCalibration,
    KernelRooflineCalibration,
    ScalarValue,
)
from perfcast.kernels.efficiency import attention_roofline_time_s, gemm_roofline_time_s
from perfcast.kernels.roofline import RooflineBackend
from perfcast.op_counts import (
    attention_bytes,
    attention_flops,
    attention_keys_per_query,
    gemm_bytes,
    gemm_flops,
)

REPO = Path(__file__).resolve().parents[1]
DEFAULT_CSV = REPO.parent / "shared" / "reference" / "kernel_efficiency.csv"
DEFAULT_OUT = REPO / "src" / "perfcast" / "calibration" / "kernel_roofline.yaml"
LAUNCH_S, LAUNCH_LINE = 2e-6, 35  # torchao KERNEL_LAUNCH_OVERHEAD_SEC, measured on H100
GENERATIONS = ("ampere", "hopper", "blackwell", "blackwell-ultra", "cdna3", "cdna4")


def grid_fit(loss: Callable[..., np.ndarray], bounds: list[tuple[float, float, bool]],
             points: int = 25, rounds: int = 10) -> tuple[list[float], float]:
    """Minimise ``loss(*params)`` (vectorised over (N, 1) parameter columns) by a grid search
    refined around the best point each round. bounds: (lo, hi, log-spaced?)."""
    lo = np.array([math.log(b[0]) if b[2] else b[0] for b in bounds])
    hi = np.array([math.log(b[1]) if b[2] else b[1] for b in bounds])
    lo0, hi0 = lo.copy(), hi.copy()
    best, best_loss = lo, float("inf")
    for _ in range(rounds):
        axes = [np.linspace(a, b, points) for a, b in zip(lo, hi, strict=True)]
        mesh = [g.reshape(-1, 1) for g in np.meshgrid(*axes, indexing="ij")]
        params = [np.exp(g) if b[2] else g for g, b in zip(mesh, bounds, strict=True)]
        values = loss(*params)
        i = int(np.argmin(values))
        best, best_loss = np.array([g[i, 0] for g in mesh]), float(values[i])
        step = (hi - lo) / (points - 1)
        lo, hi = np.maximum(best - 2 * step, lo0), np.minimum(best + 2 * step, hi0)
    return [float(math.exp(v) if b[2] else v) for v, b in zip(best, bounds, strict=True)], best_loss


def sq_log_err(predicted: np.ndarray, obs: list[Observation]) -> np.ndarray:
    """Weighted sum of squared log errors; every implementation (measurement campaign) in
    ``obs`` weighs the same in total, so 28 DeepGEMM rows do not drown 3 cuBLAS rows."""
    count: dict[str, int] = defaultdict(int)
    for o in obs:
        count[o.implementation] += 1
    weight = np.array([len(obs) / (len(count) * count[o.implementation]) for o in obs])
    return np.sum(weight * np.log(predicted / _measured(obs)) ** 2, axis=-1)


def rms_log(predicted: np.ndarray, obs: list[Observation]) -> float:
    """Unweighted RMS of ln(predicted/measured), for the record."""
    return round(float(np.sqrt(np.mean(np.log(predicted / _measured(obs)) ** 2))), 4)


def _arrays(obs: list[Observation], field: str) -> np.ndarray:
    return np.array([getattr(o.attention, field) for o in obs], dtype=float)


def attention_time(obs: list[Observation], backward: bool, fp8: bool, eff: Any, kh: Any,
                   dh: Any, hbm: Any) -> np.ndarray:
    b, h, sq, skv, d = (_arrays(obs, f) for f in ("batch", "num_heads", "seq_q", "seq_kv",
                                                 "head_dim"))
    causal = np.array([o.attention.causal for o in obs])
    flops = attention_flops(b, h, sq, skv, d, d, causal, backward)
    nbytes = attention_bytes(b, h, h, sq, skv, d, d, backward, "fp8" if fp8 else "bf16")
    keys = attention_keys_per_query(sq, skv, causal)
    peak = np.array([o.hw.peak_fp8_flops if fp8 else o.hw.peak_bf16_flops for o in obs])
    bw = np.array([o.hw.hbm_bandwidth_Bps for o in obs])
    return attention_roofline_time_s(flops, nbytes, keys, d, peak, bw, eff, kh, dh, hbm, LAUNCH_S)


def attention_rate(obs: list[Observation], block: str, fwd: tuple, bwd: tuple | None,
                   hbm: float = 0.9) -> np.ndarray:
    fp8 = block == "attn-fwd-fp8"
    b, h, sq, skv, d = (_arrays(obs, f) for f in ("batch", "num_heads", "seq_q", "seq_kv",
                                                 "head_dim"))
    causal = np.array([o.attention.causal for o in obs])
    f_fwd = attention_flops(b, h, sq, skv, d, d, causal, False)
    if block == "attn-fwd+bwd":
        t = attention_time(obs, False, False, *fwd, hbm) + attention_time(obs, True, False,
                                                                           *bwd, hbm)
        return 3.5 * f_fwd / t
    backward = block == "attn-bwd"
    return f_fwd * (2.5 if backward else 1.0) / attention_time(obs, backward, fp8, *fwd, hbm)


def gemm_rate(obs: list[Observation], eff: Any, half: Any, hbm: dict[str, float]) -> np.ndarray:
    m, n, k, batch = (np.array([o.gemm[i] for o in obs]) for i in range(4))
    fp8 = obs[0].block == "gemm-fp8"
    flops = gemm_flops(m, n, k, batch)
    nbytes = gemm_bytes(m, n, k, batch, "fp8" if fp8 else "bf16")
    peak = np.array([o.hw.peak_fp8_flops if fp8 else o.hw.peak_bf16_flops for o in obs])
    bw = np.array([o.hw.hbm_bandwidth_Bps for o in obs])
    eff_hbm = np.array([hbm[o.generation] for o in obs])
    return flops / gemm_roofline_time_s(flops, nbytes, peak, bw, eff, half, eff_hbm, LAUNCH_S)


def sig(x: float, digits: int = 4) -> float:
    return float(f"{x:.{digits}g}")


def lines(obs: list[Observation]) -> tuple[int, ...]:
    return tuple(sorted({o.line for o in obs}))


def fit(predict: Callable[..., np.ndarray], group: list[Observation],
        bounds: list[tuple[float, float, bool]]) -> tuple[list[float], float]:
    """Parameters minimising ``sq_log_err(predict(*params), group)``, and their RMS log error."""
    params, _ = grid_fit(lambda *p: sq_log_err(predict(*p), group), bounds)
    return params, rms_log(predict(*params), group)


def fit_attention(obs: list[Observation], rho: float) -> dict[str, dict[str, AttentionEfficiency]]:
    out: dict[str, dict[str, AttentionEfficiency]] = defaultdict(dict)
    bounds = [(0.1, 1.0, False), (1.0, 1e5, True), (0.1, 4096.0, True)]
    for (gen, block), group in _groups(obs, ("attn-fwd", "attn-bwd", "attn-fwd-fp8")).items():
        if gen == "hopper":
            (e, kh, dh), err = fit(lambda e, kh, dh, g=group, b=block: attention_rate(
                g, b, (e, kh, dh), None), group, bounds)
            out[gen][block] = AttentionEfficiency(
                eff_max=sig(e), keys_half=sig(kh), head_dim_half=sig(dh), method="fitted",
                source_rows=lines(group), fit_num_rows=len(group), fit_rms_log_error=err,
                note=f"{', '.join(sorted({o.implementation for o in group}))} on H100 SXM5, "
                     "batch*seqlen=16k, hidden 2048 (FA3 paper figures).")
    for gen, block in (("blackwell", "attn-fwd"), ("blackwell", "attn-bwd")):
        group, ref = _groups(obs, (block,))[(gen, block)], out["hopper"][block]
        (e,), err = fit(lambda e, g=group, b=block, r=ref: attention_rate(
            g, b, (e, r.keys_half, r.head_dim_half), None), group, [(0.1, 1.0, False)])
        out[gen][block] = ref.model_copy(update=dict(
            eff_max=sig(e), method="anchored", source_rows=lines(group), fit_num_rows=1,
            fit_rms_log_error=err, note="B200 SM100 kernel headline number (shape not given; "
            "taken as seq 8k, d 128, non-causal); keys_half, head_dim_half from hopper."))
    group = _groups(obs, ("attn-fwd+bwd",))[("ampere", "attn-fwd+bwd")]
    (e, kh, dh), err = fit(lambda e, kh, dh: attention_rate(
        group, "attn-fwd+bwd", (e, kh, dh), (rho * e, kh, dh)), group, bounds)
    common = dict(keys_half=sig(kh), head_dim_half=sig(dh), method="fitted",
                  source_rows=lines(group), fit_num_rows=len(group), fit_rms_log_error=err)
    note = (f"FA2 fwd+bwd on A100 SXM4 fitted jointly; backward eff_max = {rho:.3f} x forward "
            "(FA2 bwd/fwd on H100, lines 233-238, 251-256 over 124-129, 160-165).")
    out["ampere"]["attn-fwd"] = AttentionEfficiency(eff_max=sig(e), note=note, **common)
    out["ampere"]["attn-bwd"] = AttentionEfficiency(eff_max=sig(rho * e), note=note, **common)
    for part in ("fwd", "bwd"):
        out["ampere"][f"fa2-{part}"] = out["ampere"][f"attn-{part}"].model_copy(update=dict(
            note="Ampere's own kernel is FlashAttention-2: same curve as attention_"
                 f"{'forward' if part == 'fwd' else 'backward'}."))
    out["hopper"] |= fit_fa2_on_hopper(obs, bounds)
    return out


def fit_fa2_on_hopper(obs: list[Observation], bounds: list) -> dict[str, AttentionEfficiency]:
    """FlashAttention-2 (Ampere-design kernel) on H100: forward on its forward rows, then
    backward on its backward and fwd+bwd rows with that forward held fixed."""
    fa2 = [o for o in obs if o.generation == "hopper"
           and o.implementation in ("FA2", "FlashAttention-2")]
    fwd_rows = [o for o in fa2 if o.block == "attn-fwd"]
    (e, kh, dh), err = fit(lambda e, kh, dh: attention_rate(fwd_rows, "attn-fwd", (e, kh, dh),
                                                            None), fwd_rows, bounds)
    fwd = AttentionEfficiency(
        eff_max=sig(e), keys_half=sig(kh), head_dim_half=sig(dh), method="fitted",
        source_rows=lines(fwd_rows), fit_num_rows=len(fwd_rows), fit_rms_log_error=err,
        note="FlashAttention-2 forward on H100 SXM5 (FA3 paper figures, FA2 bars).")
    bwd_only = [o for o in fa2 if o.block == "attn-bwd"]
    both = [o for o in fa2 if o.block == "attn-fwd+bwd"]
    f = (fwd.eff_max, fwd.keys_half, fwd.head_dim_half)
    (e, kh, dh), err = fit(lambda e, kh, dh: np.concatenate([
        attention_rate(bwd_only, "attn-bwd", (e, kh, dh), None),
        attention_rate(both, "attn-fwd+bwd", f, (e, kh, dh))], axis=-1), bwd_only + both,
        bounds)
    bwd = AttentionEfficiency(
        eff_max=sig(e), keys_half=sig(kh), head_dim_half=sig(dh), method="fitted",
        source_rows=lines(bwd_only + both), fit_num_rows=len(bwd_only + both),
        fit_rms_log_error=err, note="FlashAttention-2 backward on H100 SXM5 (FA3 paper FA2 "
        "backward bars; FA2 fwd+bwd benchmark with the forward above held fixed).")
    return {"fa2-fwd": fwd, "fa2-bwd": bwd}


def fa2_backward_ratio(obs: list[Observation]) -> float:
    """Geometric mean of FA2 backward/forward TFLOP/s on H100 at matching (seq, d, causal)."""
    def key(o: Observation) -> tuple:
        return (o.attention.seq_q, o.attention.head_dim, o.attention.causal)
    fwd = {key(o): o.measured for o in obs if o.block == "attn-fwd"
           and o.generation == "hopper" and o.implementation == "FlashAttention-2"}
    ratios = [o.measured / fwd[key(o)] for o in obs if o.block == "attn-bwd"
              and o.implementation == "FA2" and key(o) in fwd]
    return float(np.exp(np.mean(np.log(ratios))))


def _groups(obs: list[Observation], blocks: tuple[str, ...]) -> dict[tuple[str, str], list]:
    out: dict[tuple[str, str], list[Observation]] = defaultdict(list)
    for o in obs:
        if o.fit and o.block in blocks:
            out[(o.generation, o.block)].append(o)
    return out


def _measured(obs: list[Observation]) -> np.ndarray:
    return np.array([o.measured for o in obs])


def hbm_fraction(obs: list[Observation], eff: Any, fwd: AttentionEfficiency | None) -> np.ndarray:
    """Plateau rows predict ``eff``; decode rows run through the attention formula."""
    plateau = np.array([o.decode_bytes is None for o in obs])
    pred = np.broadcast_to(np.asarray(eff, dtype=float), np.broadcast(eff, plateau).shape).copy()
    if fwd is not None and not plateau.all():
        dec = [o for o in obs if o.decode_bytes is not None]
        t = attention_time(dec, False, False, fwd.eff_max, fwd.keys_half, fwd.head_dim_half, eff)
        b, h, skv, d = (_arrays(dec, f) for f in ("batch", "num_heads", "seq_kv", "head_dim"))
        nbytes = attention_bytes(b, h, h, 1.0, skv, d, d, False, "bf16")
        frac = nbytes / t / np.array([o.hw.hbm_bandwidth_Bps for o in dec])
        pred[..., ~plateau] = frac
    return pred


def fit_hbm(obs: list[Observation], attn: dict) -> dict[str, ScalarValue]:
    out: dict[str, ScalarValue] = {}
    for (gen, _), group in sorted(_groups(obs, ("hbm",)).items()):
        fwd = attn.get(gen, {}).get("attn-fwd")
        (e,), err = fit(lambda e, g=group, f=fwd: hbm_fraction(g, e, f), group,
                        [(0.3, 1.0, False)])
        kinds = sorted({o.implementation for o in group})
        out[gen] = ScalarValue(value=sig(e, 3), method="fitted", source_rows=lines(group),
                               fit_num_rows=len(group), fit_rms_log_error=err,
                               note="Plateau bandwidth of: " + "; ".join(kinds) + ".")
    out["blackwell"] = out["blackwell-ultra"].model_copy(update=dict(
        method="transferred", fit_num_rows=0, fit_rms_log_error=None,
        note="From blackwell-ultra (B300, same 8 TB/s HBM3e); the B200 'measurement' in "
             "torchao is a placeholder copied from H100 (line 34)."))
    return out


def fit_gemm(obs: list[Observation], hbm: dict[str, float]) -> tuple[dict, float]:
    groups = _groups(obs, ("gemm-bf16", "gemm-fp8"))
    ref = groups[("hopper", "gemm-fp8")]
    (e, half), err = fit(lambda e, h: gemm_rate(ref, e, h, hbm), ref,
                         [(0.2, 1.0, False), (1e6, 1e13, True)])
    t_ramp = half / (ref[0].hw.peak_fp8_flops * e)
    out: dict[str, dict[str, GemmEfficiency]] = defaultdict(dict)
    out["hopper"]["fp8"] = GemmEfficiency(
        eff_max=sig(e), flops_half=sig(half), method="fitted", source_rows=lines(ref),
        fit_num_rows=len(ref), fit_rms_log_error=err,
        note=f"eff_max and flops_half fitted (ramp time {t_ramp * 1e6:.2f} us); torch._scaled_mm "
             "max-achievable search plus DeepGEMM block-scaled dense and grouped GEMMs.")
    for (gen, block), group in sorted(groups.items()):
        if (gen, block) == ("hopper", "gemm-fp8"):
            continue
        peak = float(np.median([o.hw.peak_fp8_flops if "fp8" in block else o.hw.peak_bf16_flops
                                for o in group]))
        (e,), err = fit(lambda e, g=group, p=peak: gemm_rate(g, e, t_ramp * p * e, hbm), group,
                        [(0.2, 1.0, False)])
        hardware = ", ".join(sorted({o.hardware for o in group}))
        out[gen][block[5:]] = GemmEfficiency(
            eff_max=sig(e), flops_half=sig(t_ramp * peak * e), method="fitted",
            source_rows=lines(group), fit_num_rows=len(group),
            fit_rms_log_error=err,
            note=f"eff_max fitted on {hardware}; flops_half from the Hopper FP8 ramp time "
                 f"{t_ramp * 1e6:.2f} us at {peak / 1e12:.0f} TFLOP/s.")
    ratios = [out[g]["fp8"].eff_max / out[g]["bf16"].eff_max for g in out if len(out[g]) == 2]
    ratio = float(np.exp(np.mean(np.log(ratios))))
    for gen, fp8_peak in (("ampere", None), ("cdna4", 5000e12)):
        bf16 = out[gen]["bf16"]
        if fp8_peak is None:
            out[gen]["fp8"] = bf16.model_copy(update=dict(
                method="transferred", fit_num_rows=0, fit_rms_log_error=None,
                note="Copy of the bf16 block: Ampere has no FP8 tensor cores (never used)."))
        else:
            eff = sig(bf16.eff_max * ratio)
            out[gen]["fp8"] = GemmEfficiency(
                eff_max=eff, flops_half=sig(t_ramp * fp8_peak * eff), method="transferred",
                note=f"No FP8 rows: bf16 eff_max x {ratio:.3f} (geometric-mean fp8/bf16 ratio "
                     "of the generations measured in both).")
    return out, t_ramp


def conservative_default(blocks: list, fields_low: tuple, fields_high: tuple) -> dict:
    values = {f: min(getattr(b, f) for b in blocks) for f in fields_low}
    values |= {f: max(getattr(b, f) for b in blocks) for f in fields_high}
    return values


def transfer_attention(gemm: dict, attn: dict) -> dict[str, dict[str, AttentionEfficiency]]:
    """Attention for generations without attention rows: blackwell-ultra copies blackwell (same
    SM100 tensor cores); AMD generations get Hopper's curves with eff_max scaled by their GEMM
    eff_max relative to Hopper's (attention is matmul-bound and throttles with the clock)."""
    out = {g: dict(blocks) for g, blocks in attn.items()}
    out["blackwell-ultra"] = {p: b.model_copy(update=dict(
        method="transferred", fit_num_rows=0, fit_rms_log_error=None,
        note="From blackwell (same SM100 tensor cores); no B300 attention rows."))
        for p, b in attn["blackwell"].items()}
    for gen in ("cdna3", "cdna4"):
        scale = gemm[gen]["bf16"].eff_max / gemm["hopper"]["bf16"].eff_max
        out[gen] = {p: attn["hopper"][p].model_copy(update=dict(
            eff_max=sig(attn["hopper"][p].eff_max * scale), method="transferred",
            fit_num_rows=0, fit_rms_log_error=None,
            note=f"No attention rows: hopper curve, eff_max x {scale:.3f} (this generation's "
                 "bf16 GEMM eff_max over hopper's)."))
            for p in ("attn-fwd", "attn-bwd")}
    return out


def assemble(gemm: dict, attn: dict, hbm: dict[str, ScalarValue], date: str,
             csv_path: Path) -> KernelRooflineCalibration:
    launch = ScalarValue(value=LAUNCH_S, method="transferred", source_rows=(LAUNCH_LINE,),
                         note="torchao KERNEL_LAUNCH_OVERHEAD_SEC, measured on H100 from a "
                              "trace; the only launch measurement, used for every generation.")
    attn = transfer_attention(gemm, attn)
    default_attn = {p: AttentionEfficiency(
        method="default", note="Least favourable value over the generations.",
        **conservative_default([attn[g][p] for g in attn], ("eff_max",),
                               ("keys_half", "head_dim_half")))
        for p in ("attn-fwd", "attn-bwd")}
    default_gemm = {c: GemmEfficiency(
        method="default", note="Least favourable value over the fitted generations.",
        **conservative_default([gemm[g][c] for g in gemm if gemm[g][c].method == "fitted"],
                               ("eff_max",), ("flops_half",)))
        for c in ("bf16", "fp8")}
    default_hbm = ScalarValue(value=min(h.value for h in hbm.values()), method="default",
                              note="Least favourable value over the fitted generations.")
    generations = {gen: GenerationKernelCalibration(
        gemm=gemm[gen], hbm_efficiency=hbm.get(gen, default_hbm),
        attention_forward=attn[gen]["attn-fwd"], attention_backward=attn[gen]["attn-bwd"],
        attention_forward_fp8=attn[gen].get("attn-fwd-fp8"),
        attention_fa2_forward=attn[gen].get("fa2-fwd"),
        attention_fa2_backward=attn[gen].get("fa2-bwd"), launch_overhead_s=launch)
        for gen in GENERATIONS}
    generations["default"] = GenerationKernelCalibration(
        gemm=default_gemm, attention_forward=default_attn["attn-fwd"],
        attention_backward=default_attn["attn-bwd"], hbm_efficiency=default_hbm,
        launch_overhead_s=launch)
    return KernelRooflineCalibration(
        generated_by="tools/fit_kernel_roofline.py", generated_on=date,
        reference=f"shared/reference/{csv_path.name}",
        row_numbering="source_rows are 1-based line numbers of the reference CSV (header = 1)",
        generations=generations)


def _spans(excluded: dict[int, str]) -> list[tuple[str, str]]:
    """Consecutive lines with the same reason as one 'first-last' span."""
    spans: list[list] = []
    for line, why in sorted(excluded.items()):
        if spans and spans[-1][2] == why and spans[-1][1] == line - 1:
            spans[-1][1] = line
        else:
            spans.append([line, line, why])
    return [(f"{a}" if a == b else f"{a}-{b}", why) for a, b, why in spans]


def write(calibration: KernelRooflineCalibration, out: Path, excluded: dict[int, str]) -> None:
    header = [
        f"# Generated by tools/fit_kernel_roofline.py on {calibration.generated_on} from",
        f"# {calibration.reference}. Do not edit by hand: change the script and re-run it.",
        "# Loaded by perfcast/calibration/kernel_roofline.py; formulas in",
        "# perfcast/kernels/efficiency.py. SI units (FLOPs, seconds); efficiencies are fractions",
        "# of the GPUSpec peak. MI300X/MI325X throttle their clock under dense matmul load (CSV",
        "# lines 23-29), which shows up here as a low cdna3 GEMM eff_max.",
        "# Reference lines not used:",
        *(f"#   {span}: {why}" for span, why in _spans(excluded)),
    ]
    data = calibration.model_dump(mode="json")
    body = yaml.safe_dump(data, sort_keys=False, width=100, allow_unicode=True,
                          default_flow_style=None)
    out.write_text("\n".join(header) + "\n" + body, encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--csv", type=Path, default=DEFAULT_CSV)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--date", default=datetime.date.today().isoformat())
    args = parser.parse_args()
    obs, excluded = read_observations(args.csv)
    rho = fa2_backward_ratio(obs)
    attn = fit_attention(obs, rho)
    hbm = fit_hbm(obs, attn)
    gemm, t_ramp = fit_gemm(obs, {g: (hbm[g].value if g in hbm else min(
        h.value for h in hbm.values())) for g in GENERATIONS})
    calibration = assemble(gemm, attn, hbm, args.date, args.csv)
    print(f"FA2 backward/forward ratio on H100: {rho:.3f}; GEMM ramp time {t_ramp * 1e6:.2f} us")
    report(obs, RooflineBackend(calibration))
    summary(calibration)
    write(calibration, args.out, excluded)
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
