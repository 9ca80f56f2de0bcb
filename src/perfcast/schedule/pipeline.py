"""Pipeline step time from per-stage micro-batch times (closed form).

With per-stage forward+backward times T_i for one micro-batch, m micro-batches and p stages,
1F1B and GPipe take (m − 1)·max T + Σ T_i: the steady state runs at the slowest stage and
fill/drain pass every stage once (Narayanan et al. 2021 §2.2: bubble (p − 1)/m of ideal for
uniform stages). Interleaved 1F1B with v chunks shrinks fill/drain by v: bubble (p − 1)/(v·m)
(Narayanan et al. 2021 §2.2.2). Uniform stages give m·T + (p − 1)·T/v exactly.
"""

from __future__ import annotations

import functools

import numpy as np


def pipeline_time_s(stage_times, num_micro_batches, schedule: str, vpp=1,
                    stage_counts=None):
    """Seconds for ``num_micro_batches`` through the pipeline (compute critical path).

    ``stage_times`` lists per-stage times, or distinct stage times repeated ``stage_counts``
    times each. Array-friendly: times, ``num_micro_batches`` and ``vpp`` may be numpy arrays.
    """
    counts = [1] * len(stage_times) if stage_counts is None else stage_counts
    slowest = functools.reduce(np.maximum, stage_times)
    total = sum(count * t for count, t in zip(counts, stage_times, strict=True))
    chunks = vpp if schedule == "interleaved" else 1
    return num_micro_batches * slowest + (total - slowest) / chunks


def bubble_fraction(num_stages: int, num_micro_batches: int, vpp: int = 1) -> float:
    """Textbook bubble over ideal time for uniform stages: (p − 1)/(v·m)."""
    return (num_stages - 1) / (vpp * num_micro_batches)
