"""The closed-form lower bound of the zero-bubble / DualPipe schedules
(``schedule.pipeline_bound``) against the event simulation: never above it, exact where the
closed form is exact, and within the gap its docstring states."""

from __future__ import annotations

import random

import numpy as np
import pytest

from perfcast.schedule.pipeline_bound import pipeline_work_bound_s
from perfcast.schedule.simulate import simulated_step_time_s
from perfcast.schedule.timeline import PassTimes

SCHEDULES = ("zb-h1", "zb-v", "dualpipe")
MAX_GAP = {"zb-h1": 0.075, "zb-v": 0.167, "dualpipe": 0.272}
"""Largest measured shortfall of the bound below the simulation over ``_grid`` (ZB-H1 7.4%,
ZB-V 16.6%, DualPipe 27.1%, all at the torchtitan-like "fsdp" times: a small W leaves the
greedy schedules bubbles no closed form here sees), rounded up by 0.1 point; the docstring of
``pipeline_work_bound_s`` states it."""


def _passes(kind: str, p: int, rng: random.Random) -> list[PassTimes]:
    if kind == "uniform":
        return [PassTimes(1.0, 1.0, 1.0)] * p
    if kind == "recompute":  # B carries the recomputed forward
        return [PassTimes(1.0, 2.0, 0.8)] * p
    if kind == "fsdp":  # torchtitan-like: full recompute + exposed FSDP in B, small W
        return [PassTimes(0.15 + 0.007 * i, 0.44 + 0.01 * i, 0.033 + 0.005 * i) for i in range(p)]
    if kind == "uneven":  # a heavy last stage (the head)
        return [PassTimes(0.3 + 0.01 * i, 0.35, 0.3) for i in range(p - 1)] + [
            PassTimes(0.6, 0.7, 0.5)]
    return [PassTimes(rng.uniform(0.5, 1.5), rng.uniform(0.5, 2.5), rng.uniform(0.1, 1.2))
            for _ in range(p)]


def _bound(schedule: str, passes: list[PassTimes], m):
    return pipeline_work_bound_s([x.forward_s for x in passes], [x.input_grad_s for x in passes],
                                 [x.weight_grad_s for x in passes], m, schedule)


def _grid():
    rng = random.Random(18)
    for schedule in SCHEDULES:
        for p in (2, 4, 8, 16):
            for m in (1, 2, 3, 4, 8, 16, 64):
                for kind in ("uniform", "recompute", "fsdp", "uneven", "random", "random"):
                    yield schedule, p, m, kind, _passes(kind, p, rng)


def test_bound_is_below_the_simulation_and_within_the_stated_gap():
    worst = dict.fromkeys(SCHEDULES, 0.0)
    for schedule, p, m, kind, passes in _grid():
        simulated = simulated_step_time_s(schedule, passes, m)
        bound = float(_bound(schedule, passes, m))
        assert bound <= simulated * (1 + 1e-12), (schedule, p, m, kind, bound, simulated)
        worst[schedule] = max(worst[schedule], 1 - bound / simulated)
    for schedule, gap in worst.items():
        assert gap <= MAX_GAP[schedule], (schedule, gap)


@pytest.mark.parametrize("schedule", ["zb-h1", "zb-v"])
def test_one_micro_batch_is_exact(schedule):
    # m = 1: the forward down every hop, the backward back and the first hop's W.
    rng = random.Random(1)
    for p in (2, 3, 4, 8, 16):
        for kind in ("uniform", "recompute", "fsdp", "uneven", "random"):
            passes = _passes(kind, p, rng)
            assert _bound(schedule, passes, 1) == pytest.approx(
                simulated_step_time_s(schedule, passes, 1), rel=1e-12), (p, kind)


def test_hand_derived_values():
    # p = 2 uniform F = B = W = 1 s. ZB-H1, m = 4: device 1 starts after F_0 and runs 4·3 s;
    # equally, device 0's B's wait for F_0 + F_1 + B_1 = 3 s, before which it runs its 2
    # capped forwards: 3 + 2·F + 4·(B + W) = 13 s = m·T + (p − 1)·B (Qi et al. 2023 §3.1).
    # ZB-V, m = 4: device 1 starts after F_0 / 2 and then works 12 s: 12.5 s. DualPipe m = 4:
    # each device runs two micro-batches of each stage (12 s). m = 1: the round trip 2F + 2B
    # plus W_0 (ZB-H1, DualPipe 5 s; ZB-V's first hop holds half the stage: 4.5 s).
    one = [1.0, 1.0]
    expected = {("zb-h1", 4): 13.0, ("zb-v", 4): 12.5, ("dualpipe", 4): 12.0,
                ("zb-h1", 1): 5.0, ("zb-v", 1): 4.5, ("dualpipe", 1): 5.0}
    for (schedule, m), seconds in expected.items():
        assert pipeline_work_bound_s(one, one, one, m, schedule) == seconds
        assert simulated_step_time_s(schedule, [PassTimes(1.0, 1.0, 1.0)] * 2, m) == seconds


def test_bound_is_array_friendly():
    rng = random.Random(3)
    rows = [_passes("random", 4, rng) for _ in range(5)]
    ms = np.array([1, 2, 4, 8, 64])
    for schedule in SCHEDULES:
        columns = [[np.array([row[i].__getattribute__(name) for row in rows]) for i in range(4)]
                   for name in ("forward_s", "input_grad_s", "weight_grad_s")]
        bulk = pipeline_work_bound_s(*columns, ms, schedule)
        assert bulk.shape == (5,)
        for k, row in enumerate(rows):
            assert bulk[k] == pytest.approx(float(_bound(schedule, row, int(ms[k]))), rel=1e-12)


def test_unknown_schedule_is_refused():
    with pytest.raises(ValueError, match="1f1b"):
        pipeline_work_bound_s([1.0], [1.0], [1.0], 4, "1f1b")


def test_search_bulk_bound_under_torchtitan_zero_bubble_few_micro_batches():
    # Issue 18: torchtitan (ZB-V), Llama-3-8B, 16 H100, pp = 2, FSDP, full recompute, 1-8
    # micro-batches. The bulk step must stay at or below estimate_training's (the simulation)
    # and close to it: worst measured 0.871 (was 0.606 with the work-only bound; m = 1 exact).
    from perfcast.catalog.frameworks import load_framework_profile
    from perfcast.catalog.models import load_model
    from perfcast.catalog.systems import load_system
    from perfcast.estimate.training import estimate_training
    from perfcast.search.bulk import BulkEvaluator
    from perfcast.search.enumerate import enumerate_strategies
    from perfcast.search.framework_rules import LayoutRules, framework_options
    from perfcast.search.pins import Pin
    from perfcast.search.space import SearchConstraints
    from perfcast.specs import Workload

    model, workload = load_model("llama-3-8b"), Workload(seq_length=32768, global_batch_size=8)
    system = load_system("dgx-h100", num_gpus=16)
    framework = load_framework_profile("torchtitan")
    c = SearchConstraints(max_vpp=1, max_micro_batch_size=1, fp8=False, sharding=("fsdp",),
                          recompute=("full",), fixed=(Pin.parse("pp=2"), Pin.parse("schedule=zb-v")))
    space = enumerate_strategies(model, system, 16, workload, c, LayoutRules.of(framework, "hopper"),
                                 framework_options(framework, "hopper"))
    metrics = BulkEvaluator.for_space(model, system, workload, space).evaluate_all(space)
    seen = set()
    for b, block in enumerate(space.blocks):
        for i in np.linspace(0, len(block) - 1, 3).astype(int):
            strategy = block.strategy(int(i))
            assert strategy.schedule == "zb-v" and strategy.pp == 2
            report = estimate_training(model, system, strategy, workload)
            ratio = metrics[b].step_time_s[i] / report.step_time_s
            assert 0.87 <= ratio <= 1 + 1e-12, (strategy, report.num_micro_batches, ratio)
            if report.num_micro_batches == 1:
                assert ratio == pytest.approx(1.0, rel=1e-9)
            seen.add(report.num_micro_batches)
    assert len(seen) >= 3 and 1 in seen, seen
