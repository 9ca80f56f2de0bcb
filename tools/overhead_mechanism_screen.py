"""Screen candidate overhead mechanisms by leave-one-source-out CV (issue 21 item 3).

Each candidate replaces or extends the per-generation overhead fraction f of
``estimate.training.assemble_step`` (step = a + f·k, a and k from the response table of
``validate/response_table.py``) with terms that stand for a mechanism:

* ``per-step s``: fixed seconds per optimizer step (optimizer launch, grad-norm all-reduce of
  small tensors, data loader, logging sync) -- feature 1;
* ``per-micro-batch s``: fixed seconds per micro-batch (host-side schedule work, pipeline
  hand-offs) -- feature num_micro_batches;
* ``per-layer-pass s``: inter-kernel gaps that depend on kernel count, not kernel time --
  feature num_micro_batches · layers per stage;
* ``framework multiplier``: f times a factor per framework profile (the row's
  ``framework`` column resolved as ``validate/row_framework.py`` does);
* ``kernel gap s``: GPU idle seconds after every kernel on the critical path
  (``host_launch.yaml`` ``kernel_gap_s``), fitted with one pooled f: a per-kernel constant
  is a larger share of the step on faster GPUs, so it could stand for the per-generation
  spread -- feature = kernels per step (the step's change at kernel_gap_s = 10 us / 10 us);
* ``f per generation x dense/MoE``: the fraction per (generation, architecture class), the
  classes of the forecast bands.

Results on 2026-11-24 (oos21c, after the BF16-layer rows; screening MAPE all / dense):
shipped 12.1 / 9.9%; pooled f 17.0 / 14.8%; pooled f + kernel gap 16.6 / 15.1% (no gap
explains the generation spread); f per generation + kernel gap 12.2 / 10.0%; f per
generation x dense/MoE 12.1 / 10.2% (nemo_perf 18.2 -> 17.0%, megatron_dsv3_gb200 37 -> 26%,
torchtitan_nvfp4 13 -> 31%: it moves error between Blackwell sources, not shipped).

Kernel-rate screens of 2026-11-24 (resid21; kernel_analytical.yaml edited, full refit, full
``perfcast validate --cross-validate source``; CV all / dense / MoE, start 13.39 / 12.28 / 20.68%):
Blackwell BF16 main-loop efficiency on SimuMax's 514 B200 dense GEMMs (sustained, 0.7721 ->
0.5609) 13.11 / 12.15 / 19.43%, Blackwell fraction 0.373 -> 0.302: shipped. The same with the
108 grouped GEMMs in the fit (0.485) 12.93 / 12.08 / 18.58% (torchao_moe 30%, but
mcore_moe_modelzoo 16.1% over its bound; grouped GEMMs want their own knob). Blackwell FP8
scaled by the same sustained/burst ratio 13.55 / 12.39 / 21.16% (fraction 0.12: the residual
shrinks, held-out error grows). Ampere on SimuMax's A100-PCIe table (0.846 -> 0.742) 12.34 /
11.35 / 18.86%, Ampere fraction 0.121 -> 0.017, but korthikanti2022 4.2 -> 5.2% and
torchao_float8 39 -> 45% (the pooled fallback drops), and the table is a 300 W PCIe part, not
the 400 W SXM of the public rows. Hopper BF16 scaled by B200's ratio (no Hopper sustained
table) 15.9 / 15.5 / 18.9%: Hopper's fraction is not a GEMM rate.

Blackwell low-precision screens of 2026-11-24 evening (mtp21, issues 21/16; full refit, full
``perfcast validate --cross-validate source``; CV all / dense / MoE, main 8.75 / 7.46 / 17.25%,
with moebw-mtp's PP layout / MTP depth 8.51 / 7.28 / 16.62% but torchtitan_nvfp4 14.76% and
torchao_moe 30.31% over their bounds 0.14 / 0.27). (a) Blackwell FP8 efficiency scaled by the
BF16 sustained/burst ratio (0.7827 -> 0.5686), with moebw-mtp: 9.04% all, Blackwell fraction
0.26 -> 0.07, torchao_moe 48%, nemo_perf 11.3% (the NeMo TE tensorwise FP8 Blackwell rows, already
-1..-20%, want FP8 fast): not shipped. (b) a block-scaled GEMM class for MXFP8 / NVFP4
(``kernels/scaled_gemm.py``, ``scaled_gemm_time_ratio[block-scaled]``), with moebw-mtp: ratio
1.263 ± 0.118, 8.44 / 7.19 / 16.71%, torchtitan_nvfp4 12.07%, megatron_dsv3_gb200 17.25%,
mcore_moe_modelzoo 14.81% but torchao_moe 32.57%; on main alone: ratio 1.407 ± 0.143, 8.60 /
7.30 / 17.15%, megatron_dsv3_gb200 17.85%, torchtitan_nvfp4 10.58%, nemo_perf 10.01%,
mcore_moe_modelzoo 15.45% but torchao_moe 26.41 -> 31.11% (bound 0.27): code kept, entry not
shipped. (c) (b) plus torchao's MXFP8 casts, each layout quantized from BF16 by its own
kernel (torchao 0.18.0 testing/training/roofline_utils.py ``mxfp8_cublas``: "kernel 1: x_bf16 ->
x_mxfp8_dim0, kernel 2: x_bf16 -> x_mxfp8_dim1"; prototype/moe_training/mxfp8_linear.py:
Triton dim0, CUDA dim1), applied to every MXFP8 row as a screen: 8.57% all, torchao_moe
31.24%: the cast bytes are a few percent of a step, not the gap. torchao_moe's four B200
Llama-4-Scout 2-layer proxy rows are too fast in BF16 too (+37..+42%), so no low-precision term
that lowers the fitted Blackwell fraction can keep it under its bound.

Screening only: the grid parameters (stream-overlap share, Triton attention ratio) stay at
their all-data fit and held-out rows are predicted from the table, so the numbers sit below
the full ``perfcast validate --cross-validate source`` ones; compare candidates with each
other. Loss and bounds as ``fit_training`` (soft-L1, f_scale 0.05; f in [0, 3]).

    python tools/overhead_mechanism_screen.py
"""

from __future__ import annotations

import csv
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

import numpy as np
from scipy.optimize import least_squares

from perfcast.calibration.bundle import Calibration, load_calibration
from perfcast.calibration.host_launch import load_host_launch
from perfcast.validate.fit_training import (
    MIN_ROWS_PER_GENERATION,
    fit_training,
    load_training_data,
)
from perfcast.validate.row_framework import row_framework

DATA = Path(__file__).resolve().parents[2] / "shared/ground_truth/training.csv"


@dataclass(frozen=True)
class Rows:
    """Per-row arrays of the response table at the fitted grid values."""

    a: np.ndarray
    k: np.ndarray
    tokens_per_gpu_step: np.ndarray
    log_measured: np.ndarray
    generation: np.ndarray
    framework: np.ndarray
    source: np.ndarray
    fit: np.ndarray
    dense: np.ndarray
    features: dict[str, np.ndarray]


GAP_PROBE_S = 10e-6
"""kernel_gap_s at which the kernels-per-step feature is read off the response table."""


def _with_kernel_gap(calibration: Calibration, gap_s: float) -> Calibration:
    host = calibration.host_launch or load_host_launch()
    gap = host.kernel_gap_s.model_copy(update={"value": gap_s})
    return calibration.replace(host_launch=host.model_copy(update={"kernel_gap_s": gap}))


def load(path: Path = DATA) -> Rows:
    data = load_training_data([path])
    fitted = fit_training(data)
    table = data.table
    values = [fitted.value(p.name) for p in table.parameters]
    a, k = table.response(values)
    probe = load_training_data([path], calibration=_with_kernel_gap(load_calibration(),
                                                                    GAP_PROBE_S))
    kernels = (probe.table.response(values)[0] - a) / GAP_PROBE_S
    text = {r["row_id"]: r for r in csv.DictReader(path.open(newline="", encoding="utf-8"))}
    rows = table.data.rows
    frameworks = []
    for r in rows:
        resolved = row_framework(text[r.row_id])
        frameworks.append(resolved.profile.name if resolved is not None else "none")
    micro = np.array([r.workload.global_batch_size / (r.strategy.micro_batch_size * r.strategy.dp)
                      for r in rows], float)
    layers = np.array([r.model.num_hidden_layers / r.strategy.pp for r in rows], float)
    return Rows(a, k, table.data.tokens_per_gpu_step, np.log(table.data.measured),
                np.array(table.data.generation), np.array(frameworks),
                np.array([r.source_id for r in rows]), data.fit_mask(),
                np.array([r.model.arch_type == "dense" for r in rows]),
                {"per-step s": np.ones(len(rows)), "per-micro-batch s": micro,
                 "per-layer-pass s": micro * layers, "kernel gap s": kernels})


def by_class(rows: Rows) -> Rows:
    """``rows`` with each generation split into its dense and MoE rows."""
    classes = [f"{g}|{'dense' if d else 'moe'}" for g, d in zip(rows.generation, rows.dense,
                                                               strict=True)]
    return replace(rows, generation=np.array(classes))


def _residual(rows: Rows, extra: np.ndarray, gi: np.ndarray, fi: np.ndarray, ng: int, nf: int,
              x: np.ndarray) -> np.ndarray:
    """log(predicted/measured) of every row: f = f_generation · framework factor, step =
    a + f·k + extra · seconds."""
    factor = np.where(fi >= 0, x[ng:ng + nf][np.maximum(fi, 0)], 1.0) if nf else 1.0
    f = x[:ng][gi] * factor
    step = rows.a + f * rows.k + extra @ x[ng + nf:]
    return np.log(rows.tokens_per_gpu_step / step) - rows.log_measured


def _masked(residual: Callable[[np.ndarray], np.ndarray], mask: np.ndarray,
            x: np.ndarray) -> np.ndarray:
    return residual(x)[mask]


def _cv(rows: Rows, terms: tuple[str, ...], per_generation: bool,
        framework_multiplier: bool) -> np.ndarray:
    """Held-out |error| of every row under one candidate."""
    extra = np.stack([rows.features[t] for t in terms], 1) if terms else np.zeros((len(rows.a), 0))
    predicted = np.zeros(len(rows.a))
    for source in sorted(set(rows.source)):
        mask = rows.fit & (rows.source != source)
        gens = sorted(g for g, c in Counter(rows.generation[mask]).items()
                      if per_generation and c >= MIN_ROWS_PER_GENERATION)
        fams = sorted(f for f, c in Counter(rows.framework[mask]).items()
                      if framework_multiplier and c >= MIN_ROWS_PER_GENERATION)
        gi = np.array([gens.index(g) if g in gens else len(gens) for g in rows.generation])
        fi = np.array([fams.index(f) if f in fams else -1 for f in rows.framework])
        ng, nf = len(gens) + 1, len(fams)

        residual = partial(_residual, rows, extra, gi, fi, ng, nf)
        x0 = np.r_[np.full(ng, 0.2), np.ones(nf), np.zeros(extra.shape[1])]
        low = np.r_[np.zeros(ng), np.full(nf, 0.1), np.zeros(extra.shape[1])]
        high = np.r_[np.full(ng, 3.0), np.full(nf, 5.0), np.full(extra.shape[1], 10.0)]
        fit = least_squares(partial(_masked, residual, mask), x0, bounds=(low, high),
                            loss="soft_l1", f_scale=0.05, x_scale="jac", diff_step=1e-3)
        held = rows.source == source
        predicted[held] = np.exp(residual(fit.x) + rows.log_measured)[held]
    return np.abs(predicted / np.exp(rows.log_measured) - 1)


CANDIDATES: dict[str, Callable[[Rows], np.ndarray]] = {
    "f per generation (shipped)": lambda r: _cv(r, (), True, False),
    "pooled f": lambda r: _cv(r, (), False, False),
    "f per generation + per-step s": lambda r: _cv(r, ("per-step s",), True, False),
    "pooled f + per-step s": lambda r: _cv(r, ("per-step s",), False, False),
    "f per generation + per-micro-batch s": lambda r: _cv(r, ("per-micro-batch s",), True,
                                                          False),
    "pooled f + per-micro-batch s": lambda r: _cv(r, ("per-micro-batch s",), False, False),
    "f per generation + per-layer-pass s": lambda r: _cv(r, ("per-layer-pass s",), True, False),
    "pooled f + per-layer-pass s": lambda r: _cv(r, ("per-layer-pass s",), False, False),
    "f per generation x framework": lambda r: _cv(r, (), True, True),
    "pooled f + kernel gap s": lambda r: _cv(r, ("kernel gap s",), False, False),
    "f per generation + kernel gap s": lambda r: _cv(r, ("kernel gap s",), True, False),
    "f per generation x dense/MoE": lambda r: _cv(by_class(r), (), True, False),
}


def main() -> None:
    rows = load()
    sources = sorted(set(rows.source))
    print(f"{len(rows.a)} rows, {len(sources)} sources; screening MAPE (table-based LOSO CV)")
    for name, run in CANDIDATES.items():
        err = run(rows)
        worst = max(sources, key=lambda s: float(err[rows.source == s].mean()))
        print(f"{name:40} all {err.mean():6.1%}  dense {err[rows.dense].mean():6.1%}  "
              f"MoE {err[~rows.dense].mean():6.1%}  worst {worst} "
              f"{err[rows.source == worst].mean():.1%}")


if __name__ == "__main__":
    main()
