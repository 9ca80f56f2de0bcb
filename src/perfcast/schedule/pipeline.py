"""Pipeline step time from per-stage micro-batch times (closed form).

With per-stage forward+backward times T_i for one micro-batch, m micro-batches and p stages,
1F1B and GPipe take (m − 1)·max T + Σ T_i: the steady state runs at the slowest stage and
fill/drain pass every stage once (Narayanan et al. 2021 §2.2: bubble (p − 1)/m of ideal for
uniform stages). Interleaved 1F1B with v chunks shrinks fill/drain by v: bubble (p − 1)/(v·m)
(Narayanan et al. 2021 §2.2.2). Uniform stages give m·T + (p − 1)·T/v exactly.

GPipe, 1F1B and interleaved use this closed form (exact on uniform stages; on uneven stages the
standard estimate, close to the simulation); the zero-bubble / bidirectional schedules use the
event-level simulation (``simulated_pipeline_time_s``) in a forecast, and a lower bound (the
warm-up, backward arrival and cool-down of every device,
``schedule.pipeline_bound.pipeline_work_bound_s``) in the bulk search, which re-scores its best
candidates with the simulation.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np

from perfcast.schedule.timeline import PassTimes

CLOSED_FORM_SCHEDULES = ("gpipe", "1f1b", "interleaved")


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


def schedule_chunks(schedule: str, vpp: int) -> int:
    """Model chunks per device: v for interleaved, 2 for ZB-V (Qi et al. 2023 §4), else 1."""
    return {"interleaved": vpp, "zb-v": 2}.get(schedule, 1)


def simulated_pipeline_time_s(schedule: str, passes: Sequence[PassTimes],
                              num_micro_batches: int, vpp: int = 1) -> float:
    """Compute critical path of the pipeline phase from the event-level simulation
    (``schedule.simulate``), for schedules without a closed form (ZB-H1, ZB-V, DualPipe).

    GPipe, 1F1B and interleaved use ``pipeline_time_s`` everywhere — also on uneven stages,
    where it is the standard (m − 1)·max + Σ estimate; ``tests/test_schedule_simulate.py``
    bounds its gap to the simulation — so that the bulk search evaluates the same formula."""
    from perfcast.schedule.simulate import simulated_step_time_s

    return simulated_step_time_s(schedule, passes, num_micro_batches, vpp)
