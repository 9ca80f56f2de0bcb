"""The search proposes only layouts the named framework runs (issue 18, item 1).

The best layouts of the issue's cases pass ``perfcast train`` and ``perfcast schedule``; every
enumerated strategy is a valid ``Strategy`` accepted by ``estimate_training`` (property test);
the published layouts of ../shared/ground_truth/training.csv are in the searched space.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from perfcast.catalog.frameworks import framework_of_text, load_framework_profile
from perfcast.catalog.models import load_model
from perfcast.catalog.systems import load_system
from perfcast.cli.main import app
from perfcast.estimate.training import estimate_training
from perfcast.search.enumerate import enumerate_strategies
from perfcast.search.framework_rules import LayoutRules
from perfcast.search.pins import Pin
from perfcast.search.run import search_strategies
from perfcast.search.space import SearchConstraints
from perfcast.specs import Workload
from perfcast.specs.compat import check_strategy_for_model, check_workload_for_strategy
from perfcast.specs.strategy import Strategy

GROUND_TRUTH = Path(__file__).resolve().parents[1] / ".." / "shared" / "ground_truth"


def _rules(name: str) -> LayoutRules:
    return LayoutRules.of(load_framework_profile(name))


@pytest.mark.parametrize("framework, layers, pp, vpp, expected", [
    ("megatron-core@0.12", 80, 4, 8, None),  # 2.5 layers per chunk: the 70B defect
    ("megatron-core", 80, 4, 8, "layout"),  # runs with --pipeline-model-parallel-layout (0.13+)
    ("megatron-core", 80, 4, 5, "even"),
    ("megatron-core@0.12", 126, 16, 7, None),  # the 405B defect
    ("megatron-core", 126, 16, 7, "layout"),
    ("megatron-core", 61, 8, 4, "layout"),  # DeepSeek-V3's published PP8 x VPP4
    ("megatron-core", 80, 8, 11, None),  # 88 chunks > 80 layers + embedding + loss
    ("megatron-core", 126, 16, 1, "embedding_and_loss_as_layers"),  # Llama 3 405B, PP 16
    ("megatron-core", 126, 8, 8, "embedding_and_loss_as_layers"),  # NeMo 405B, PP 8 VPP 8
    ("megatron-core", 61, 2, 1, "embedding_as_layer"),
    ("megatron-core@0.10", 126, 16, 1, None),  # before --account-for-*-in-pipeline-split
    ("megatron-lm", 126, 16, 1, None),
    ("torchtitan", 126, 16, 1, "uneven"),
    ("torchtitan", 80, 81, 1, None),  # more chunks than layers
    ("llm-foundry", 32, 2, 1, None),  # no pipeline parallelism
    ("llm-foundry", 32, 1, 1, "even"),
])
def test_pipeline_split_rules(framework, layers, pp, vpp, expected):
    assert _rules(framework).pipeline_split(layers, pp, vpp) == expected


def test_split_flags_name_the_megatron_options():
    rules = _rules("megatron-core")
    assert rules.split_flags(126, 16, 1) == ("--account-for-embedding-in-pipeline-split",
                                             "--account-for-loss-in-pipeline-split")
    assert rules.split_flags(80, 4, 5) == ()
    assert rules.split_flags(61, 8, 4) == ("--pipeline-model-parallel-layout", "Et|(tt|)*30L")
    assert rules.split_fields(61, 8, 4)["pipeline_layout"] == "Et|(tt|)*30L"
    assert rules.split_fields(80, 4, 5)["pipeline_layout"] is None


@settings(max_examples=60, deadline=None)
@given(layers=st.integers(1, 200), pp=st.integers(2, 64), vpp=st.integers(1, 8))
def test_generated_layouts_place_every_layer_once(layers, pp, vpp):
    from perfcast.specs.pipeline_layout import chunk_layer_counts, parse_pipeline_layout

    layout = _rules("megatron-core").layout(layers, pp, vpp)
    if layout is None:
        return
    segments = parse_pipeline_layout(layout)
    assert len(segments) == pp * vpp
    assert segments[0].startswith("E") and segments[-1].endswith("L")
    units = [len(seg) for seg in segments]  # E and L count as a layer each
    assert max(units) - min(units) <= 1 and units == sorted(units, reverse=True)
    strategy = Strategy(num_gpus=pp, pp=pp, vpp=vpp, pipeline_layout=layout)
    assert sum(chunk_layer_counts(layers, strategy)) == layers


def _cli_args(strategy) -> list[str]:
    args = ["--tp", str(strategy.tp), "--pp", str(strategy.pp), "--vpp", str(strategy.vpp),
            "--cp", str(strategy.cp), "--micro-batch-size", str(strategy.micro_batch_size),
            "--recompute-granularity", strategy.recompute, "--precision", strategy.precision]
    if strategy.ep > 1:
        args += ["--ep", str(strategy.ep), "--etp", str(strategy.expert_tp)]
    if strategy.account_for_embedding_in_pipeline_split:
        args += ["--account-for-embedding-in-pipeline-split"]
    if strategy.account_for_loss_in_pipeline_split:
        args += ["--account-for-loss-in-pipeline-split"]
    if strategy.pipeline_layout:
        args += ["--pipeline-layout", strategy.pipeline_layout]
    if strategy.ep > 1:
        args += ["--moe-token-dispatcher", strategy.moe_token_dispatcher]
    if strategy.ep_overlap:
        args += ["--ep-overlap"]
    if strategy.delay_wgrad_compute:
        args += ["--delay-wgrad-compute"]
    if strategy.recompute_num_layers:
        args += ["--recompute-num-layers", str(strategy.recompute_num_layers)]
    if strategy.recompute == "selective":
        args += ["--recompute-modules", ",".join(strategy.recompute_modules)]
    if strategy.fp8_gemm_scope != "all":
        args += ["--fp8-gemm-scope", strategy.fp8_gemm_scope]
    if strategy.sequence_parallel:
        args += ["--sequence-parallel"]
    if strategy.tp_comm_overlap:
        args += ["--tp-comm-overlap"]
    if strategy.cuda_graphs != "none":
        args += ["--cuda-graphs", strategy.cuda_graphs]
    if strategy.cpu_offload_activation_layers:
        args += ["--cpu-offloading-num-layers", str(strategy.cpu_offload_activation_layers)]
    if strategy.precision != "bf16":
        args += ["--fp8-recipe", strategy.fp8_recipe]
    if strategy.cp > 1:
        args += ["--cp-comm-type", strategy.cp_comm_type]
    if strategy.hierarchical_cp_a2a_size:
        a2a = strategy.hierarchical_cp_a2a_size
        args += ["--hierarchical-context-parallel-sizes", f"{a2a},{strategy.cp // a2a}"]
    if strategy.tp2d_rows > 1:
        args += ["--tp2d", f"{strategy.tp2d_rows}x{strategy.tp2d_cols}"]
    if strategy.pipeline_schedule is not None:
        args += ["--pipeline-schedule", strategy.pipeline_schedule]
    if strategy.fsdp:
        args += ["--fsdp"]
    elif strategy.distributed_optimizer:
        args += ["--distributed-optimizer"]
    elif strategy.zero_stage:
        args += ["--zero-stage", str(strategy.zero_stage)]
    return args


SEARCH_CASES = [
    ("llama-3.1-70b", 256, 4096, 512, {}),
    ("llama-3.1-405b", 16384, 8192, 2048, {"recompute": ("none", "selective")}),
    ("llama-3-8b", 16, 4096, 3, {}),  # the interleaved-with-one-micro-batch defect
    ("deepseek-v3", 1024, 4096, 1024, {"recompute": ("none", "selective"),
                                       "max_micro_batch_size": 2, "max_cp": 1}),
    # hierarchical CP: every cp = 8 row is a2a+p2p with an inner level of 2 or 4
    ("llama-3-8b", 16, 32768, 8, {"fixed": (Pin.parse("cp_comm_type=a2a+p2p"),
                                            Pin.parse("cp=8")), "max_vpp": 2}),
]


@pytest.mark.parametrize("name, gpus, seq, gbs, constraints", SEARCH_CASES)
def test_best_layouts_run_in_train_and_schedule(name, gpus, seq, gbs, constraints):
    model = load_model(name)
    system = load_system("dgx-h100", num_gpus=gpus)
    workload = Workload(seq_length=seq, global_batch_size=gbs)
    result = search_strategies(model, system, workload, gpus,
                               constraints=SearchConstraints(**constraints), top=3)
    assert result.best
    runner = CliRunner()
    for candidate in result.best:
        s, report = candidate.report.strategy, candidate.report
        # the search's options are the framework's defaults: train gets the same --framework,
        # and forecasts exactly what the search reported (the same strategy, not a neighbour)
        train = runner.invoke(app, ["train", "-m", name, "-g", str(gpus), "--seq-length",
                                    str(seq), "--global-batch-size", str(gbs), "--json",
                                    "--framework", "megatron-core", *_cli_args(s)])
        assert train.exit_code == 0, train.output
        assert json.loads(train.stdout)["tokens_per_s_per_gpu"] == pytest.approx(
            report.tokens_per_s_per_gpu, rel=1e-9)
        schedule = runner.invoke(app, [
            "schedule", "--schedule", s.schedule, "--stages", str(s.pp), "--micro-batches",
            str(report.num_micro_batches), "--virtual-stages", str(s.vpp), "--forward-time",
            "1", "--backward-time", "2", "--json"])
        assert schedule.exit_code == 0, schedule.output
        assert _rules("megatron-core").pipeline_split(
            model.num_hidden_layers, s.pp, s.vpp) is not None


@settings(max_examples=20, deadline=None)
@given(name=st.sampled_from(["llama-3-8b", "llama-3.1-70b", "mixtral-8x7b", "gpt3-175b",
                             "llama-3.1-405b", "qwen3-30b-a3b"]),
       gpus=st.sampled_from([1, 2, 3, 6, 8, 12, 16, 24, 48, 64, 96, 128, 256]),
       gbs=st.sampled_from([1, 3, 8, 12, 64, 256]),
       framework=st.sampled_from(["megatron-core", "megatron-lm", "torchtitan", "llm-foundry"]),
       seed=st.integers(0, 2 ** 16))
def test_every_enumerated_strategy_is_valid(name, gpus, gbs, framework, seed):
    model = load_model(name)
    system = load_system("dgx-h100", num_gpus=gpus)
    workload = Workload(seq_length=4096, global_batch_size=gbs)
    rules = _rules(framework)
    space = enumerate_strategies(model, system, gpus, workload, SearchConstraints(
        max_vpp=4, max_micro_batch_size=2, max_cp=4, recompute=("none", "full")), rules)
    for block in space.blocks:  # every row of every block, checked in bulk
        m = gbs // (block.micro_batch_size * block.dp)
        assert np.all(m * block.micro_batch_size * block.dp == gbs)
        if block.schedule == "interleaved":
            assert np.all(m % block.pp == 0)
        for v in np.unique(block.vpp):
            assert rules.pipeline_split(model.num_hidden_layers, block.pp, int(v)) is not None
    rng = random.Random(seed)
    for block in rng.sample(space.blocks, min(4, len(space.blocks))):
        strategy = block.strategy(rng.randrange(len(block)))  # Strategy validator runs here
        # with the split the framework needs, as the search re-scores it (search.run): e.g.
        # Megatron-Core's explicit layout where pp x vpp exceeds the layers (embedding/loss
        # stages; llama-3.1-405b's 126 layers on pp 128)
        strategy = Strategy.model_validate({**strategy.model_dump(), **rules.split_fields(
            model.num_hidden_layers, strategy.pp, strategy.vpp)})
        check_strategy_for_model(model, strategy)
        check_workload_for_strategy(workload, strategy)
        report = estimate_training(model, system, strategy, workload)
        assert report.step_time_s > 0


def test_published_layouts_are_in_the_searched_space():
    """Every parsed A/B row that states tp and pp: its layout is among the enumerated ones
    under its own framework's rules (Megatron-Core's when the row names none)."""
    from perfcast.validate.training_rows import parse_row, read_rows

    checked, missing = 0, []
    for row in read_rows(GROUND_TRUTH / "training.csv"):
        if row["quality"] not in ("A", "B") or not row["tp"] or not row["pp"]:
            continue
        parsed = parse_row(row)
        if not hasattr(parsed, "strategy"):
            continue
        s = parsed.strategy
        resolved = framework_of_text(row["framework"] or "", row["version_or_date"] or "")
        rules = LayoutRules.of(resolved or load_framework_profile("megatron-core"))
        constraints = SearchConstraints(
            tp=s.tp, pp=s.pp, vpp=s.vpp, cp=s.cp, ep=s.ep, micro_batch_size=s.micro_batch_size,
            max_cp=None, max_vpp=max(8, s.vpp), max_micro_batch_size=min(256, max(
                8, s.micro_batch_size)), recompute=("none",), sharding=("none",), fp8=False)
        space = enumerate_strategies(parsed.model, parsed.system, s.num_gpus, parsed.workload,
                                     constraints, rules)
        found = any(np.any((block.etp == s.expert_tp) & (block.vpp == s.vpp))
                    for block in space.blocks)
        checked += 1
        if not found:
            missing.append(f"{row['source_id']} {row['model']} tp{s.tp} pp{s.pp} vpp{s.vpp} "
                           f"({rules.framework})")
    assert checked > 300
    # Megatron-Core's DeepSeek-V3 PP8 x VPP4 ('Et|(tt|)*30L') is in the space since the search
    # writes explicit --pipeline-model-parallel-layout strings (core_v0.13.0 on).
    assert missing == [], missing


@pytest.mark.parametrize("framework, offered", [
    ("megatron-core", {"none", "distributed_optimizer", "fsdp"}),
    ("megatron-lm", {"none"}),
    ("torchtitan", {"none", "zero2", "fsdp"}),
    ("deepspeed", {"none", "distributed_optimizer", "zero2", "fsdp"}),
])
def test_only_the_frameworks_sharding_modes_are_tried(framework, offered):
    model, system = load_model("llama-3-8b"), load_system("dgx-h100", num_gpus=16)
    space = enumerate_strategies(model, system, 16, Workload(seq_length=4096,
                                                             global_batch_size=32),
                                 SearchConstraints(max_vpp=1, max_micro_batch_size=1,
                                                   recompute=("none",)), _rules(framework))
    assert {block.sharding for block in space.blocks} == offered


def test_llama3_405b_published_pp16_is_proposed_with_its_split_flags():
    """Llama 3 405B's published TP 8 x PP 16 on 16,384 H100 (126 layers: the first and last
    stage one layer short) is a Megatron-Core layout once embedding and loss count as layers."""
    model = load_model("llama-3.1-405b")
    system = load_system("dgx-h100", num_gpus=16384)
    result = search_strategies(
        model, system, Workload(seq_length=8192, global_batch_size=2048), 16384,
        constraints=SearchConstraints(tp=8, pp=16, vpp=1, cp=1, micro_batch_size=1,
                                      recompute=("selective",)), top=2)
    assert result.best
    for candidate in result.best:
        assert candidate.framework_flags == ("--account-for-embedding-in-pipeline-split",
                                             "--account-for-loss-in-pipeline-split")
        assert candidate.to_dict()["framework_flags"] == list(candidate.framework_flags)


def test_deepseek_v3_published_pp8_vpp4_layout_is_feasible():
    """Megatron-Bridge's recommended DeepSeek-V3 layout on 1,024 H100 (TP2 PP8 VPP4 EP64
    ETP1, MBS 1, GBS 8192, layout Et|(tt|)*30mL; frameworks.md 2.5): the search proposes
    PP8 x VPP4 with the published layout string (no MTP here), it fits, and the proposal runs
    in ``perfcast train`` and ``perfcast schedule``."""
    model = load_model("deepseek-v3")
    system = load_system("dgx-h100", num_gpus=1024)
    workload = Workload(seq_length=4096, global_batch_size=8192)
    result = search_strategies(model, system, workload, 1024, constraints=SearchConstraints(
        tp=2, pp=8, vpp=4, ep=64, micro_batch_size=1, max_cp=1,
        recompute=("none", "selective")), top=2)
    assert result.feasible > 0 and result.best
    runner = CliRunner()
    for candidate in result.best:
        s = candidate.report.strategy
        assert s.pipeline_layout == "Et|(tt|)*30L" and s.expert_tp == 1
        assert candidate.report.memory.fits
        assert candidate.framework_flags == ("--pipeline-model-parallel-layout", "Et|(tt|)*30L")
        train = runner.invoke(app, ["train", "-m", "deepseek-v3", "-g", "1024", "--seq-length",
                                    "4096", "--global-batch-size", "8192", "--json",
                                    *_cli_args(s)])
        assert train.exit_code == 0, train.output
        assert json.loads(train.output)["strategy"]["pipeline_layout"] == "Et|(tt|)*30L"
        schedule = runner.invoke(app, [
            "schedule", "--schedule", s.schedule, "--stages", "8", "--micro-batches",
            str(candidate.report.num_micro_batches), "--virtual-stages", "4",
            "--forward-time", "1", "--backward-time", "2", "--json"])
        assert schedule.exit_code == 0, schedule.output
