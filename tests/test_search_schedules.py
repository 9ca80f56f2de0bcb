"""Pipeline schedules in the search (issue 18, item 2): only those the framework runs.

Megatron-Core runs 1F1B and interleaved 1F1B, torchtitan also GPipe and ZB-V, DeepSpeed 1F1B
only (``pipeline_schedules_accepted``). The bulk path ranks ZB-V / ZB-H1 / DualPipe by a lower
bound on their step (never above the event simulation), the best are re-scored by the full
forecast, and the reported best equals ``perfcast train`` with the same flags.
"""

from __future__ import annotations

import json
from functools import cache

import numpy as np
import pytest
from typer.testing import CliRunner

from perfcast.catalog.frameworks import load_framework_profile
from perfcast.catalog.models import load_model
from perfcast.catalog.systems import load_system
from perfcast.cli.main import app
from perfcast.estimate.training import estimate_training
from perfcast.schedule.pipeline import pipeline_time_s, simulated_pipeline_time_s
from perfcast.schedule.pipeline_bound import pipeline_work_bound_s
from perfcast.schedule.timeline import PassTimes
from perfcast.search.bulk import BulkEvaluator
from perfcast.search.framework_rules import LayoutRules
from perfcast.search.pins import Pin
from perfcast.search.run import search_space, search_strategies
from perfcast.search.space import SearchConstraints
from perfcast.specs import Workload

MODEL, GPUS = "llama-3-8b", 16
WORKLOAD = Workload(seq_length=4096, global_batch_size=64)


@cache
def _space(framework: str, pins: tuple[str, ...] = (), excluded: tuple[str, ...] = ()):
    constraints = SearchConstraints(fixed=tuple(Pin.parse(p) for p in pins),
                                    excluded=tuple(Pin.parse(p) for p in excluded),
                                    recompute=("none",), max_micro_batch_size=2)
    system = load_system("dgx-h100", num_gpus=GPUS)
    return search_space(load_model(MODEL), system, WORKLOAD, GPUS, constraints, framework)[1]


@pytest.mark.parametrize("framework, expected", [
    ("megatron-core", {"1f1b", "interleaved"}),
    ("torchtitan", {"gpipe", "1f1b", "interleaved", "zb-v"}),
    ("deepspeed", {"1f1b"}),
])
def test_only_the_frameworks_schedules_are_enumerated(framework, expected):
    assert {b.schedule for b in _space(framework).blocks} == expected
    assert {b.schedule for b in _space(framework).blocks if b.pp == 1} == {"1f1b"}


def test_profile_lists_are_sourced_and_default_to_megatron_style():
    for name in ("megatron-core", "torchtitan", "deepspeed"):
        entries = load_framework_profile(name).profile.pipeline_schedules_accepted
        assert entries and all(e.source and e.says for e in entries)
    assert LayoutRules.of(load_framework_profile("pytorch-fsdp")).schedules == (
        "1f1b", "interleaved")


def test_zero_bubble_and_dualpipe_layout_rules():
    rules = LayoutRules(framework="x", pipeline_splits=("uneven",),
                        schedules=("1f1b", "interleaved", "zb-v", "dualpipe"))
    assert rules.pipeline_schedules(3, [1, 2]) == [
        ("1f1b", [1]), ("interleaved", [2]), ("zb-v", [1])]  # DualPipe needs an even pp
    assert ("dualpipe", [1]) in rules.pipeline_schedules(4, [1, 2])
    assert rules.pipeline_schedules(1, [1]) == [("1f1b", [1])]


def test_fix_and_exclude_schedule():
    assert {b.schedule for b in _space("torchtitan", ("schedule=zb-v",)).blocks} == {"zb-v"}
    kept = {b.schedule for b in _space("torchtitan", (), ("schedule=zb-v",)).blocks}
    assert kept == {"gpipe", "1f1b", "interleaved"}
    assert Pin.parse("schedule=dualpipe").value == "dualpipe"
    result = CliRunner().invoke(app, ["search", "-m", MODEL, "-g", "16", "--fix",
                                      "schedule=zb-w"])
    assert result.exit_code == 2 and "zb-w" in result.output


def test_bulk_is_a_lower_bound_for_zero_bubble_and_exact_for_closed_forms():
    model, system = load_model(MODEL), load_system("dgx-h100", num_gpus=GPUS)
    space = _space("torchtitan")
    evaluator = BulkEvaluator.for_space(model, system, WORKLOAD, space)
    checked = {"zb-v": 0, "1f1b": 0, "gpipe": 0}
    for block in space.blocks:
        if block.schedule not in checked or block.pp == 1 or checked[block.schedule] >= 2:
            continue
        metrics = evaluator.evaluate(block)
        for row in np.linspace(0, len(block) - 1, 3).astype(int):
            exact = estimate_training(model, system, block.strategy(int(row)), WORKLOAD)
            bulk = metrics.step_time_s[row]
            if block.schedule == "zb-v":
                assert bulk <= exact.step_time_s * (1 + 1e-12)
                assert bulk >= 0.9 * exact.step_time_s  # the bound is close, not vacuous
            else:
                assert bulk == pytest.approx(exact.step_time_s, rel=1e-9)
        checked[block.schedule] += 1
    assert all(checked.values())


def test_work_bound_of_dualpipe_and_zero_bubble():
    # 4 stages (3 of F, B, W = 0.25, 0.5, 0.25 s, the last 1, 1.5, 0.5 s), 8 micro-batches.
    # ZB-H1: the last device waits for the first forward over the 3 earlier stages (0.75 s),
    # then works 8 * 3 s; ZB-V half of that wait; DualPipe: device 0 runs 4 micro-batches of
    # stage 0 and 4 of stage 3 (4 + 12 s). ZB-H1 / ZB-V are exact here.
    forward, input_grad, weight_grad = [0.25] * 3 + [1.0], [0.5] * 3 + [1.5], [0.25] * 3 + [0.5]
    passes = [PassTimes(*x) for x in zip(forward, input_grad, weight_grad, strict=True)]
    for schedule, seconds in (("zb-h1", 24.75), ("zb-v", 24.375), ("dualpipe", 16.0)):
        assert pipeline_work_bound_s(forward, input_grad, weight_grad, 8, schedule) == seconds
        assert seconds <= simulated_pipeline_time_s(schedule, passes, 8)
    assert simulated_pipeline_time_s("zb-h1", passes, 8) == 24.75
    assert simulated_pipeline_time_s("zb-v", passes, 8) == 24.375
    assert pipeline_time_s([1.0, 3.0], 8, "1f1b", stage_counts=[3, 1]) == 27.0


def test_work_bound_is_below_the_simulation():
    # Measured lowest bound / simulation here: 0.840 (DualPipe p = 8, m = 8; was 0.7 with
    # the work-only bound). tests/test_pipeline_bound.py covers the full grid.
    for schedule in ("zb-h1", "zb-v", "dualpipe"):
        for p, m in ((2, 2), (4, 8), (8, 8), (16, 64)):
            passes = [PassTimes(0.3 + 0.01 * i, 0.35, 0.3) for i in range(p)]
            simulated = simulated_pipeline_time_s(schedule, passes, m)
            bound = pipeline_work_bound_s([x.forward_s for x in passes],
                                          [x.input_grad_s for x in passes],
                                          [x.weight_grad_s for x in passes], m, schedule)
            assert bound <= simulated * (1 + 1e-12)
            assert bound >= 0.84 * simulated, (schedule, p, m)


def _train_args(s) -> list[str]:
    args = ["--tp", str(s.tp), "--pp", str(s.pp), "--vpp", str(s.vpp), "--cp", str(s.cp),
            "--micro-batch-size", str(s.micro_batch_size), "--recompute-granularity",
            s.recompute, "--precision", s.precision, "--pipeline-schedule", s.schedule]
    if s.precision == "fp8":
        args += ["--fp8-recipe", s.fp8_recipe]
    if s.cuda_graphs != "none":
        args += ["--cuda-graphs", s.cuda_graphs]
    if s.cpu_offload_activation_layers:
        args += ["--cpu-offloading-num-layers", str(s.cpu_offload_activation_layers)]
    if s.sequence_parallel:
        args += ["--sequence-parallel"]
    if s.tp_comm_overlap:
        args += ["--tp-comm-overlap"]
    if s.fsdp:
        args += ["--fsdp"]
    elif s.distributed_optimizer:
        args += ["--distributed-optimizer"]
    elif s.zero_stage:
        args += ["--zero-stage", str(s.zero_stage)]
    return args


def test_reported_best_is_rescored_and_equals_perfcast_train():
    model, system = load_model(MODEL), load_system("dgx-h100", num_gpus=GPUS)
    constraints = SearchConstraints(min_pp=2, recompute=("none",), max_micro_batch_size=2)
    result = search_strategies(model, system, WORKLOAD, GPUS, constraints, top=3,
                               framework="torchtitan")
    tps = [c.report.tokens_per_s_per_gpu for c in result.best]
    assert tps == sorted(tps, reverse=True)  # ordered by the full forecast, not the bound
    assert "zb-v" in {c.report.strategy.schedule for c in result.best}
    best = result.best[0].report
    out = CliRunner().invoke(app, [
        "train", "-m", MODEL, "-g", str(GPUS), "--seq-length", "4096", "--global-batch-size",
        "64", "--framework", "torchtitan", "--json", *_train_args(best.strategy)])
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["step_time_s"] == pytest.approx(best.step_time_s, rel=1e-9)
