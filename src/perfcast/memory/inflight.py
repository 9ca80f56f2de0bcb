"""Micro-batches whose activations a pipeline stage holds at its peak.

1F1B (Narayanan et al. 2021 §2.2.1, PipeDream-Flush): stage i of p (0-based) runs p − i warm-up
forwards before its first backward, so it holds min(p − i, m) micro-batches.
Interleaved 1F1B with v chunks (Megatron-LM schedules.py warm-up count
(p − i − 1)·2 + (v − 1)·p, plus the one in the steady state) holds that many chunk-micro-batches
of L_i/v layers each; on stage 0 this is p·(1 + (p − 1)/(p·v)) stage-activations, the factor of
Korthikanti et al. 2022 §4.2.3. GPipe holds all m micro-batches.
ZB-H1 (Qi et al. 2023 §3.1): p − i forwards before a B plus the deferred W's, at most p on every
stage (1F1B's peak; counted in full although a pending W keeps only its layer inputs and
output gradients). ZB-V (Qi et al. 2023 §4): half-size chunks, p stage-activations on every
stage in the paper's hand-made schedule; the simulator's greedy V holds p + 1/2.
DualPipe (DeepSeek-V3 technical report §3.2.1, Table 2): p + 1 on every rank. These are the
peaks of ``schedule.simulate`` with uniform stages (tested).
"""

from __future__ import annotations

import numpy as np


def inflight_layer_units(schedule: str, stage: int, pp: int, vpp: int, num_micro_batches: int):
    """Stage-activation units held at the peak, in units of "all of this stage's layers for one
    micro-batch" (so memory = units × per-micro-batch stage activations). Array-friendly in
    ``vpp`` and ``num_micro_batches``."""
    m = num_micro_batches
    if pp == 1:
        return 1.0
    if schedule == "gpipe":
        return 1.0 * m
    if schedule == "zb-h1":
        return 1.0 * np.minimum(pp, m)
    if schedule == "zb-v":
        return 1.0 * np.minimum(pp + 0.5, m)
    if schedule == "dualpipe":
        return 1.0 * np.minimum(pp + 1, m)
    if schedule == "interleaved":
        chunks = np.minimum((pp - stage - 1) * 2 + (vpp - 1) * pp + 1, m * vpp)
        return chunks / vpp
    return 1.0 * np.minimum(pp - stage, m)
