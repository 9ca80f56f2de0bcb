"""Per-row errors of the roofline backend against the reference rows, and a value summary.

Used by ``tools/fit_kernel_roofline.py``: every prediction goes through ``RooflineBackend``'s
public methods, so the printed errors are those of the shipped backend, not of the fit code.
"""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np
from kernel_reference_rows import Observation

from perfcast.calibration.kernel_roofline import KernelRooflineCalibration
from perfcast.kernels.roofline import RooflineBackend
from perfcast.op_counts import attention_bytes, attention_flops, gemm_flops


def predict(o: Observation, backend: RooflineBackend) -> float:
    """The backend's own prediction, in the unit of ``o.measured``."""
    gpu, a = o.hw.gpu(o.hardware), o.attention
    if o.gemm is not None:
        precision = "fp8" if o.block == "gemm-fp8" else "bf16"
        return float(gemm_flops(*o.gemm) / backend.gemm_time_s(gpu, *o.gemm, precision=precision))
    if o.block == "hbm" and a is None:
        return float(1e12 / backend.memory_bound_time_s(gpu, 1e12) / gpu.hbm_bandwidth_Bps)
    shape = (a.batch, a.num_heads, a.seq_q, a.seq_kv, a.head_dim, a.head_dim, a.causal)
    if o.block == "hbm":
        t = backend.attention_time_s(gpu, *shape, backward=False)
        return float(attention_bytes(a.batch, a.num_heads, a.num_heads, a.seq_q, a.seq_kv,
                                     a.head_dim, a.head_dim, False, "bf16")
                     / t / gpu.hbm_bandwidth_Bps)
    precision = "fp8" if o.block == "attn-fwd-fp8" else "bf16"
    passes = {"attn-fwd+bwd": (False, True), "attn-bwd": (True,)}.get(o.block, (False,))
    flops = sum(attention_flops(*shape, backward=bw) for bw in passes)
    time = sum(backend.attention_time_s(gpu, *shape, backward=bw, precision=precision)
               for bw in passes)
    return float(flops / time)


def report(obs: list[Observation], backend: RooflineBackend) -> None:
    errors: dict[tuple[str, str, bool], list[float]] = defaultdict(list)
    print(f"{'line':>4} {'generation':<15} {'block':<13} {'implementation':<22} "
          f"{'measured':>9} {'predicted':>9} {'error':>7}  use")
    for o in sorted(obs, key=lambda o: o.line):
        pred = predict(o, backend)
        scale = 1 if o.block == "hbm" else 1e12
        err = pred / o.measured - 1
        errors[(o.generation, o.block, o.fit)].append(math.log(pred / o.measured))
        print(f"{o.line:>4} {o.generation:<15} {o.block:<13} {o.implementation[:22]:<22} "
              f"{o.measured / scale:>9.3f} {pred / scale:>9.3f} {err:>+7.1%}  "
              f"{'fit' if o.fit else 'eval: ' + o.why_not_fit}")
    print("\naggregate (rms = RMS of ln(pred/meas); mape = mean |pred/meas - 1|)")
    for fit in (True, False):
        print("fit rows" if fit else "evaluation-only rows")
        for (gen, block, f), logs in sorted(errors.items()):
            if f == fit:
                e = np.exp(np.array(logs)) - 1
                print(f"  {gen:<15} {block:<13} n={len(logs):>3} "
                      f"rms={math.sqrt(np.mean(np.square(logs))):.3f} "
                      f"mape={np.mean(np.abs(e)):6.1%} worst={e[np.argmax(np.abs(e))]:+.1%}")
        logs = [x for (_, _, f), v in errors.items() if f == fit for x in v]
        print(f"  {'ALL':<29} n={len(logs):>3} rms={math.sqrt(np.mean(np.square(logs))):.3f} "
              f"mape={np.mean(np.abs(np.exp(logs) - 1)):6.1%}")


def summary(calibration: KernelRooflineCalibration) -> None:
    """One line per calibrated block: values, how obtained, RMS log error of its fit rows."""
    print("\nfitted values (rms = RMS ln(pred/meas) over the block's fit rows)")
    for gen, c in calibration.generations.items():
        for cls, g in c.gemm.items():
            print(f"  {gen:<15} gemm {cls:<4}      eff_max={g.eff_max:.4f} "
                  f"flops_half={g.flops_half:.3g} [{g.method}, rms={g.fit_rms_log_error}]")
        for name in ("attention_forward", "attention_backward", "attention_forward_fp8"):
            a = getattr(c, name)
            if a is not None:
                print(f"  {gen:<15} {name[10:]:<14} eff_max={a.eff_max:.4f} "
                      f"keys_half={a.keys_half:.4g} head_dim_half={a.head_dim_half:.4g} "
                      f"[{a.method}, rms={a.fit_rms_log_error}]")
        h = c.hbm_efficiency
        print(f"  {gen:<15} hbm            efficiency={h.value} [{h.method}, "
              f"rms={h.fit_rms_log_error}]; launch={c.launch_overhead_s.value:g} s")
