"""Pipeline step time from per-stage micro-batch times (closed form).

With per-stage forward+backward times T_i for one micro-batch, m micro-batches and p stages,
1F1B and GPipe take (m − 1)·max T + Σ T_i: the steady state runs at the slowest stage and
fill/drain pass every stage once (Narayanan et al. 2021 §2.2: bubble (p − 1)/m of ideal for
uniform stages). Interleaved 1F1B with v chunks shrinks fill/drain by v: bubble (p − 1)/(v·m)
(Narayanan et al. 2021 §2.2.2). Uniform stages give m·T + (p − 1)·T/v exactly.

``pipeline_step_time_s`` uses that closed form where it is exact (uniform stages; GPipe, 1F1B,
interleaved) and the event-level simulation (``schedule.simulate``) elsewhere: uneven stages
(embedding, LM head) and the zero-bubble / bidirectional schedules.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from perfcast.schedule.timeline import PassTimes

CLOSED_FORM_SCHEDULES = ("gpipe", "1f1b", "interleaved")


def pipeline_time_s(stage_times: list[float], num_micro_batches: int, schedule: str,
                    vpp: int = 1) -> float:
    """Seconds for ``num_micro_batches`` through the pipeline (compute critical path)."""
    slowest = max(stage_times)
    chunks = vpp if schedule == "interleaved" else 1
    return num_micro_batches * slowest + (sum(stage_times) - slowest) / chunks


def bubble_fraction(num_stages: int, num_micro_batches: int, vpp: int = 1) -> float:
    """Textbook bubble over ideal time for uniform stages: (p − 1)/(v·m)."""
    return (num_stages - 1) / (vpp * num_micro_batches)


def schedule_chunks(schedule: str, vpp: int) -> int:
    """Model chunks per device: v for interleaved, 2 for ZB-V (Qi et al. 2023 §4), else 1."""
    return {"interleaved": vpp, "zb-v": 2}.get(schedule, 1)


def use_closed_form(schedule: str, stage_totals: Sequence[float], num_micro_batches: int) -> bool:
    """Whether ``pipeline_time_s`` stands for the step: uniform stages of a classic schedule,
    where it equals the simulation exactly; and interleaved with m not divisible by p, where
    the simulator has no Megatron-LM order and the closed form is the estimate."""
    if schedule not in CLOSED_FORM_SCHEDULES:
        return False
    if schedule == "interleaved" and num_micro_batches % len(stage_totals) != 0:
        return True
    first = stage_totals[0]
    return all(math.isclose(t, first, rel_tol=1e-12, abs_tol=0.0) for t in stage_totals)


def pipeline_step_time_s(schedule: str, passes: Sequence[PassTimes], num_micro_batches: int,
                         vpp: int = 1) -> float:
    """Compute critical path of the pipeline phase: closed form where exact, else simulated."""
    totals = [p.total_s for p in passes]
    if use_closed_form(schedule, totals, num_micro_batches):
        return pipeline_time_s(totals, num_micro_batches, schedule, vpp)
    from perfcast.schedule.simulate import simulated_step_time_s

    return simulated_step_time_s(schedule, passes, num_micro_batches, vpp)
