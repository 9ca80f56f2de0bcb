"""Megatron-Core layout rules: pipeline splits (layout string, first/last stage layers,
embedding/loss accounting), the expert grid world = pp x etp x ep x edp, the rows they unlock
and the CLI flags."""

from __future__ import annotations

import itertools
import json

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from perfcast.catalog.models import load_model
from perfcast.catalog.systems import load_system
from perfcast.cli.main import app
from perfcast.errors import InputError
from perfcast.estimate.training import estimate_training
from perfcast.graph.param_sharding import stage_params
from perfcast.memory.estimate import estimate_memory
from perfcast.specs.compat import check_strategy_for_model
from perfcast.specs.pipeline_layout import (
    chunk_layer_counts,
    parse_pipeline_layout,
    stage_layer_indices,
)
from perfcast.specs.strategy import Strategy
from perfcast.specs.workload import Workload
from perfcast.validate.training_rows import ParsedRow, parse_row
from test_validate_rows import _training_rows

runner = CliRunner()


def _parsed(row_id: str) -> ParsedRow:
    """A ground-truth row parsed with the shipped catalog."""
    result = parse_row(_training_rows()[row_id])
    assert isinstance(result, ParsedRow), getattr(result, "reason", result)
    return result


# ----- layout string ---------------------------------------------------------------------------

def test_layout_string_expands_like_megatron():
    """The docstring example of Megatron's TransformerConfig: 1 + 29 + 1 + 1 segments."""
    segments = parse_pipeline_layout("Et*3|(tt|)*29,m|L")
    assert len(segments) == 32
    assert segments[0] == "Ettt" and segments[1] == "tt" and segments[-2:] == ("m", "L")
    assert sum(s.count("t") for s in segments) == 3 + 2 * 29


def test_layout_of_the_deepseek_gb200_rows_has_an_empty_last_chunk():
    """'Et|(tt|)*30L' on PP8 x VPP4 (rows 542-554): 1 + 30x2 + 0 = 61 layers, the last chunk
    holds only the loss, so the last rank holds one layer fewer than the middle ranks."""
    strategy = Strategy(num_gpus=256, pp=8, vpp=4, ep=32, pipeline_layout="Et|(tt|)*30L")
    counts = chunk_layer_counts(61, strategy)
    assert counts[0] == 1 and counts[-1] == 0 and sum(counts) == 61
    assert [len(ls) for ls in stage_layer_indices(61, strategy)] == [7, 8, 8, 8, 8, 8, 8, 6]


@pytest.mark.parametrize("text", ["Ex|L", "E|L", "Et|(tt|)*2)"])
def test_bad_layout_strings_are_refused(text):
    with pytest.raises(ValidationError, match="pipeline_layout"):
        Strategy(num_gpus=8, pp=2, pipeline_layout=text)


def test_layout_with_the_wrong_number_of_stages_or_layers_is_refused():
    model = load_model("llama-3-8b")  # 32 layers
    with pytest.raises(InputError, match="pp\\*vpp=4"):
        check_strategy_for_model(model, Strategy(num_gpus=4, pp=4, pipeline_layout="Et*16|t*16L"))
    with pytest.raises(InputError, match="places 30 decoder layers"):
        check_strategy_for_model(model, Strategy(num_gpus=2, pp=2, pipeline_layout="Et*15|t*15L"))


def test_layout_conflicts_with_the_other_split_options():
    with pytest.raises(ValidationError, match="conflicts"):
        Strategy(num_gpus=8, pp=2, pipeline_layout="Et|tL", account_for_loss_in_pipeline_split=True)
    with pytest.raises(ValidationError, match="conflict"):
        Strategy(num_gpus=8, pp=2, num_layers_in_first_pipeline_stage=3,
                 account_for_embedding_in_pipeline_split=True)
    with pytest.raises(ValidationError, match="pp > 1"):
        Strategy(num_gpus=8, num_layers_in_first_pipeline_stage=3)


# ----- first/last stage layers and embedding/loss accounting -------------------------------------

def test_first_and_last_stage_layers_leave_the_rest_even():
    strategy = Strategy(num_gpus=4, pp=4, num_layers_in_first_pipeline_stage=14,
                        num_layers_in_last_pipeline_stage=13)
    assert chunk_layer_counts(61, strategy) == [14, 17, 17, 13]


def test_uneven_rest_is_refused_as_megatron_does():
    strategy = Strategy(num_gpus=4, pp=4, num_layers_in_first_pipeline_stage=14)
    with pytest.raises(InputError, match="split evenly"):
        chunk_layer_counts(61, strategy)


def test_embedding_and_loss_count_as_layers():
    """Qwen3-235B (94 layers) on PP32 x VPP3 (row 562): 96 = 94 + embedding + loss chunks."""
    strategy = Strategy(num_gpus=96, pp=32, vpp=3, account_for_embedding_in_pipeline_split=True,
                        account_for_loss_in_pipeline_split=True)
    counts = chunk_layer_counts(94, strategy)
    assert counts[0] == 0 and counts[-1] == 0 and set(counts[1:-1]) == {1}


@pytest.mark.parametrize("pp,vpp", [(2, 1), (4, 1), (4, 2), (8, 1), (8, 4), (3, 1), (16, 1)])
def test_every_layer_is_held_exactly_once(pp, vpp):
    """Identity: the stages' layers partition the model's layers, for every split option."""
    num_layers = 64
    options = [{}, {"account_for_embedding_in_pipeline_split": True},
               {"account_for_loss_in_pipeline_split": True},
               {"num_layers_in_first_pipeline_stage": num_layers // pp - vpp * (pp > 2)}]
    for extra in options:
        strategy = Strategy(num_gpus=pp, pp=pp, vpp=vpp, **extra)
        try:
            held = stage_layer_indices(num_layers, strategy)
        except InputError:
            continue  # a split Megatron refuses
        assert sorted(itertools.chain.from_iterable(held)) == list(range(num_layers))


def test_stage_params_and_memory_follow_the_split():
    model = load_model("llama-3-8b")
    even = Strategy(num_gpus=4, pp=4)
    light_ends = Strategy(num_gpus=4, pp=4, num_layers_in_first_pipeline_stage=6,
                          num_layers_in_last_pipeline_stage=6)
    assert [stage_params(model, light_ends, s).num_layers for s in range(4)] == [6, 10, 10, 6]
    assert sum(stage_params(model, light_ends, s).total for s in range(4)) == pytest.approx(
        sum(stage_params(model, even, s).total for s in range(4)))
    system, workload = load_system("dgx-h100", num_gpus=4), Workload(seq_length=4096,
                                                                     global_batch_size=32)
    memory = estimate_memory(model, system, light_ends, workload)
    assert [s.num_layers for s in memory.stages] == [6, 10, 10, 6]


def test_pipeline_time_uses_the_slowest_stage():
    """Uneven stages: the steady state runs at the slowest stage, so moving layers off the
    embedding/head stages onto a middle one makes the step longer, not shorter."""
    model = load_model("llama-3-8b")
    system = load_system("dgx-h100", num_gpus=4)
    workload = Workload(seq_length=4096, global_batch_size=32)
    even = estimate_training(model, system, Strategy(num_gpus=4, pp=4), workload)
    skewed = estimate_training(model, system, Strategy(
        num_gpus=4, pp=4, num_layers_in_first_pipeline_stage=2,
        num_layers_in_last_pipeline_stage=2), workload)
    assert skewed.step_time_s > even.step_time_s * 1.2
    assert skewed.critical_stage in (1, 2)


# ----- expert grid -------------------------------------------------------------------------------

def test_expert_grid_is_independent_of_tp():
    """frameworks.md §1.8: EDP = world / (etp x ep x pp); TP 2 with ETP 1 and EP 32 on 256."""
    strategy = Strategy(num_gpus=256, tp=2, pp=8, ep=32, etp=1)
    assert strategy.dp == 16 and strategy.expert_dp == 1
    with pytest.raises(ValidationError, match="pp\\*etp\\*ep=512"):
        Strategy(num_gpus=256, tp=2, pp=8, ep=32)  # etp defaults to tp = 2


def test_expert_compute_per_gpu_does_not_depend_on_etp():
    """The routed tokens of a TP group split over tp/etp expert-TP groups: the expert FLOPs
    per GPU are the same for ETP 1 and ETP = TP."""
    from perfcast.graph.stage import stage_graph

    model = load_model("mixtral-8x7b")

    def expert_flops(etp):
        strategy = Strategy(num_gpus=8, tp=2, ep=4 if etp == 2 else 8, etp=etp)
        graph = stage_graph(model, strategy, 4096, 0)
        moe = [g for g in graph.layers if g.moe][0]
        return sum(op.flops for op in moe.compute if op.name.startswith("expert"))

    assert expert_flops(1) == pytest.approx(expert_flops(2), rel=1e-9)


@pytest.mark.parametrize("row_id,edp", [("559", 1), ("560", 1), ("561", 32), ("562", 1),
                                        ("563", 4)])
def test_modelzoo_rows_parse_with_their_stated_expert_dp(row_id, edp):
    """Rows 559/560/562 were refused ("ep*etp does not divide tp*cp*dp"); each states ETP 1 and
    its expert-DP size, which the expert grid reproduces."""
    parsed = _parsed(row_id)
    assert parsed.strategy.expert_tp == 1
    assert parsed.strategy.expert_dp == edp


def test_row_562_counts_embedding_and_loss_in_the_split():
    parsed = _parsed("562")
    assert parsed.strategy.account_for_embedding_in_pipeline_split
    assert parsed.strategy.account_for_loss_in_pipeline_split


# ----- CLI ---------------------------------------------------------------------------------------

def _stage_layers(args):
    result = runner.invoke(app, ["memory", "--model", "llama-3-8b", "--gpus", "4", "--pp", "4",
                                 "--json", *args])
    assert result.exit_code == 0, result.output
    return [s["num_layers"] for s in json.loads(result.stdout)["stages"]]


def test_cli_pipeline_split_flags():
    assert _stage_layers([]) == [8, 8, 8, 8]
    assert _stage_layers(["--decoder-first-pipeline-num-layers", "6",
                          "--decoder-last-pipeline-num-layers", "6"]) == [6, 10, 10, 6]
    assert _stage_layers(["--pipeline-layout", "Et*5|t*9|t*9|t*9L"]) == [5, 9, 9, 9]
    assert _stage_layers(["--pipeline-model-parallel-layout", "Et*5|t*9|t*9|t*9L"]) == [5, 9, 9, 9]


def test_cli_pipeline_split_accounting_flags():
    """33 = 32 layers + the embedding over 3 stages: the first stage holds one layer fewer."""
    result = runner.invoke(app, ["memory", "--model", "llama-3-8b", "--gpus", "3", "--pp", "3",
                                 "--account-for-embedding-in-pipeline-split", "--json"])
    assert result.exit_code == 0, result.output
    assert [s["num_layers"] for s in json.loads(result.stdout)["stages"]] == [10, 11, 11]


def test_cli_bad_layout_is_one_line_exit_2():
    result = runner.invoke(app, ["memory", "--model", "llama-3-8b", "--gpus", "4", "--pp", "4",
                                 "--pipeline-layout", "Et*5|t*9|t*9"])
    assert result.exit_code == 2
    assert "pipeline_layout" in result.output and "Traceback" not in result.output
