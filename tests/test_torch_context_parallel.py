"""PyTorch's ring attention (--cp-implementation torch, torchtitan's context parallelism):
bytes by hand from torch 2.6.0 ``_attention.py``, the first-step overlap window, recompute of
the exchange, the framework default, CLI errors and the search path."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
from typer.testing import CliRunner

from perfcast.catalog.framework_defaults import RunFacts, apply_framework_profile
from perfcast.catalog.frameworks import load_framework_profile
from perfcast.catalog.models import load_model
from perfcast.catalog.systems import load_system
from perfcast.cli.main import app
from perfcast.estimate.training import estimate_training
from perfcast.graph.layer import LayerShape, layer_comm_ops, layer_ops
from perfcast.graph.ops import Collective, Group, MemoryOp, Phase
from perfcast.graph.stage import stage_graph
from perfcast.graph.torch_context_parallel import (
    merge_backward_bytes,
    merge_forward_bytes,
    torch_ring_buffer_bytes,
)
from perfcast.kernels.backend import get_backend
from perfcast.memory.estimate import estimate_memory
from perfcast.schedule.stage_time import assemble_stage_time, extra_time, layer_time
from perfcast.search.bulk import BulkEvaluator
from perfcast.search.enumerate import enumerate_strategies
from perfcast.search.framework_rules import LayoutRules, framework_options
from perfcast.search.pins import Pin
from perfcast.search.space import SearchConstraints
from perfcast.specs import Strategy, Workload

LLAMA = load_model("llama-3-8b")  # h 4096, 32 heads, 8 KV heads, head dim 128
SEQ, CP = 32768, 4
TOKENS = SEQ // CP  # 8192 tokens per rank
WORKLOAD = Workload(seq_length=SEQ, global_batch_size=8)
runner = CliRunner()


def _comm(**shape):
    ops = layer_comm_ops(LLAMA, LayerShape(micro_batch=1, seq_length=SEQ, cp=CP, **shape))
    return {op.name: op for op in ops}


def test_exchange_bytes_by_hand():
    torch = _comm(cp_torch_ring=True)
    assert set(torch) == {"cp_kv_all_gather", "cp_kv_all_gather_backward", "cp_dkv_send"}
    # K and V repeated to the 32 query heads (repeat_kv), 2 B, gathered from 4 ranks.
    gathered = 2 * TOKENS * 2 * 32 * 128 * CP
    assert gathered == 536_870_912
    for name in ("cp_kv_all_gather", "cp_kv_all_gather_backward"):
        op = torch[name]
        assert op.size_bytes == gathered and op.collective == Collective.ALL_GATHER
        assert op.overlappable and op.first_ring_step_only and op.group == Group.CP_RING
    assert torch["cp_kv_all_gather"].phase == Phase.FORWARD
    assert torch["cp_kv_all_gather_backward"].phase == Phase.BACKWARD_DGRAD
    # dK/dV in fp32 sent at each of the 4 steps.
    send = torch["cp_dkv_send"]
    assert send.collective == Collective.SEND_RECV and send.count == CP
    assert send.size_bytes == 4 * TOKENS * 2 * 32 * 128 == gathered / 2
    assert not send.first_ring_step_only
    # Transformer Engine's ring moves the 8 KV heads: a/kv = 4 times less.
    te = _comm()
    assert te["cp_kv_all_gather"].size_bytes * 4 == gathered


def test_merge_bytes_by_hand():
    """Counted from torch 2.6.0 _attention.py, per element (module docstring)."""
    q, kv = 1.0, 2.0
    # P = 2: casts up twice (6 B each), one merge (half full 32 B, half partial 16 + 8 B),
    # cast down (6 B); K/V concatenated once (4 B per K/V element).
    assert merge_forward_bytes(q, kv, 2) == 2 * 6 + 6 + 28 + 4 * 2
    # P = 2 backward: fp32 zeros (4 B per dQ, dK, dV element); dK/dV: step-0 add 10, two fp32
    # concatenations 8 each, cast down 6, one bf16 K/V concatenation 4, one later step
    # (half partial add 5 + cat 8, half add 10); dQ: add 10, cast down 6, one later step
    # (half add 10, half partial 13).
    dkv = 10 + 2 * 8 + 6 + 4 + (13 + 10) / 2
    dq = 10 + 6 + (10 + 13) / 2
    assert merge_backward_bytes(q, kv, 2) == pytest.approx(4 * (q + kv) + kv * dkv + q * dq)


def test_merge_passes_are_memory_ops_of_the_torch_ring_only():
    def memory_names(**shape):
        compute, _ = layer_ops(LLAMA, LayerShape(micro_batch=1, seq_length=SEQ, cp=CP, **shape))
        return {op.name: op for op in compute if isinstance(op, MemoryOp)}

    torch = memory_names(cp_torch_ring=True)
    q_elements = TOKENS * 32 * 128
    assert torch["cp_softmax_merge"].bytes_moved == merge_forward_bytes(
        q_elements, 2 * q_elements, CP)
    assert torch["cp_grad_accumulate"].phase == Phase.BACKWARD_DGRAD
    assert not {"cp_softmax_merge", "cp_grad_accumulate"} & set(memory_names())


def _train(num_gpus=8, system="dgx-h100", **fields):
    system = load_system(system, num_gpus=num_gpus)
    return estimate_training(LLAMA, system, Strategy(num_gpus=num_gpus, **fields), WORKLOAD)


def test_torch_ring_is_slower_and_exposes_more_across_nodes():
    """Across nodes the gather outlasts the first ring step: more exposed than TE's ring,
    and more with every doubling of cp (the window shrinks to 1/P of the attention)."""
    exposed = {}
    for cp in (2, 4, 8):
        te = _train(num_gpus=64, tp=8, cp=cp)
        torch = _train(num_gpus=64, tp=8, cp=cp, cp_implementation="torch")
        assert torch.step_time_s > te.step_time_s
        exposed[cp] = torch.breakdown.cp_comm_s
    assert exposed[2] < exposed[4] < exposed[8]


def test_cp_one_is_the_same_for_both_implementations():
    te, torch = _train(tp=2), _train(tp=2, cp_implementation="torch")
    assert torch.step_time_s == te.step_time_s


@pytest.mark.parametrize(("recompute", "fields", "times"), [
    ("full", {}, 32),  # every layer's forward, its CP exchange included, once more
    ("selective", {}, 32),  # the attention core (core_attn) with its exchange
    ("selective", {"recompute_modules": ("mlp",)}, 0),  # the exchange is not re-run
    ("none", {}, 0),
])
def test_recompute_re_runs_the_forward_exchange(recompute, fields, times):
    """Recompute = forward compute + the forward's exposed CP seconds of the re-run layers:
    adding x seconds to a layer's exposed forward CP time adds times·x to ``recompute_s``."""
    system = load_system("dgx-h100", num_gpus=64)
    strategy = Strategy(num_gpus=64, tp=8, cp=8, cp_comm_type="all_gather",
                        recompute=recompute, **fields)
    graph = stage_graph(LLAMA, strategy, SEQ, 0)
    backend = get_backend("analytical")
    layers = [(g.count, layer_time(g, system, strategy, backend)) for g in graph.layers]
    extra = extra_time(graph.extra_compute, system, strategy, backend)
    more = [(n, replace(lt, cp_forward_s=lt.cp_forward_s + 0.01,
                        selective_recompute_s=lt.selective_recompute_s
                        + (0.01 if "core_attn" in strategy.recompute_modules else 0.0)))
            for n, lt in layers]
    assert sum(n for n, _ in layers) == 32 and layers[0][1].cp_forward_s > 0
    base = assemble_stage_time(layers, extra, strategy).recompute_s
    assert assemble_stage_time(more, extra, strategy).recompute_s - base == pytest.approx(
        times * 0.01)
    if recompute == "selective" and times:  # layer_time charges the exchange itself
        lt = layers[0][1]
        assert lt.selective_recompute_s >= lt.cp_forward_s


def test_torch_ring_memory_by_hand():
    # gathered K/V 2 B · 8192 · 4 · 8192 + fp32 (q 4096 + 3 · 8192) · 8192 tokens.
    assert torch_ring_buffer_bytes(LLAMA, TOKENS, 1, CP) == (
        2 * TOKENS * CP * 8192 + 4 * TOKENS * (4096 + 3 * 8192))
    system = load_system("dgx-h100", num_gpus=8)
    te = estimate_memory(LLAMA, system, Strategy(num_gpus=8, cp=CP), WORKLOAD)
    torch = estimate_memory(LLAMA, system, Strategy(num_gpus=8, cp=CP, cp_implementation="torch"),
                            WORKLOAD)
    assert torch.peak_bytes > te.peak_bytes


def test_torchtitan_profile_runs_the_torch_ring():
    facts = RunFacts(tp=1, ep=1, precision="bf16", generation="hopper", layers_per_stage=32, cp=4)
    applied = apply_framework_profile(load_framework_profile("torchtitan"), {}, facts)
    assert applied.fields["cp_implementation"] == "torch"
    kept = apply_framework_profile(load_framework_profile("torchtitan"),
                                   {"cp_implementation": "transformer-engine"}, facts)
    assert "cp_implementation" not in kept.fields
    megatron = apply_framework_profile(load_framework_profile("megatron-core"), {}, facts)
    assert "cp_implementation" not in megatron.fields
    no_cp = RunFacts(tp=1, ep=1, precision="bf16", generation="hopper", layers_per_stage=32)
    assert "cp_implementation" not in apply_framework_profile(
        load_framework_profile("torchtitan"), {}, no_cp).fields


def test_cli_framework_default_and_flag():
    args = ["train", "-m", "llama-3-8b", "--gpus", "8", "--cp", "4", "--seq-length", "32768",
            "--json"]
    titan = runner.invoke(app, [*args, "--framework", "torchtitan"])
    te = runner.invoke(app, [*args, "--framework", "torchtitan",
                             "--cp-implementation", "transformer-engine"])
    flag = runner.invoke(app, [*args, "--cp-implementation", "torch"])
    assert titan.exit_code == te.exit_code == flag.exit_code == 0, titan.output
    assert '"cp_implementation": "torch"' in titan.output
    assert '"cp_implementation": "transformer-engine"' in te.output
    assert '"cp_implementation": "torch"' in flag.output


@pytest.mark.parametrize(("args", "words"), [
    (["--cp-implementation", "megatron"], "megatron"),
    (["--cp-implementation", "torch", "--cp-comm-type", "a2a"], "cp_implementation"),
])
def test_cli_bad_implementation_exits_2(args, words):
    result = runner.invoke(app, ["train", "-m", "llama-3-8b", "--gpus", "8", "--cp", "4",
                                 "--seq-length", "32768", *args])
    assert result.exit_code == 2, result.output
    assert words in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_search_bulk_equals_estimate_training_under_torchtitan():
    system = load_system("dgx-h100", num_gpus=16)
    framework = load_framework_profile("torchtitan")
    rules = LayoutRules.of(framework, "hopper")
    options = framework_options(framework, "hopper")
    assert options.cp_implementation == "torch"
    c = SearchConstraints(max_vpp=1, max_micro_batch_size=1, fp8=False, sharding=("fsdp",),
                          recompute=("full",), fixed=(Pin.parse("cp=4"), Pin.parse("pp=1")))
    space = enumerate_strategies(LLAMA, system, 16, WORKLOAD, c, rules, options)
    metrics = BulkEvaluator.for_space(LLAMA, system, WORKLOAD, space).evaluate_all(space)
    rng = random.Random(5)
    for _ in range(40):
        b = rng.randrange(len(space.blocks))
        i = rng.randrange(len(space.blocks[b]))
        strategy = space.blocks[b].strategy(i)
        assert strategy.cp_torch_ring
        report = estimate_training(LLAMA, system, strategy, WORKLOAD)
        assert metrics[b].step_time_s[i] == pytest.approx(report.step_time_s, rel=1e-9)
        assert metrics[b].memory_bytes[i] == pytest.approx(report.memory.peak_bytes, rel=1e-9)
