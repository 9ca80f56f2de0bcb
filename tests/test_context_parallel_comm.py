"""Context-parallel exchanges (--cp-comm-type): volumes by hand, identities between the types,
exposure, memory buffers, CLI errors and the search dimension."""

from __future__ import annotations

import random

import numpy as np
import pytest
from typer.testing import CliRunner

from perfcast.catalog.frameworks import load_framework_profile
from perfcast.catalog.models import load_model
from perfcast.catalog.systems import load_system
from perfcast.cli.main import app
from perfcast.estimate.training import estimate_training
from perfcast.graph.context_parallel import cp_comm_buffer_bytes
from perfcast.graph.layer import LayerShape, attention_forward_ops, layer_comm_ops
from perfcast.graph.ops import AttentionOp, Collective, Group, Phase
from perfcast.memory.estimate import estimate_memory
from perfcast.search.bulk import BulkEvaluator
from perfcast.search.enumerate import enumerate_strategies
from perfcast.search.framework_rules import LayoutRules
from perfcast.search.pins import Pin
from perfcast.search.space import SearchConstraints
from perfcast.specs import Strategy, Workload
from perfcast.specs.strategy import CP_COMM_TYPES

LLAMA = load_model("llama-3-8b")  # h 4096, 32 heads, 8 KV heads, head dim 128
SEQ, CP = 32768, 4
WORKLOAD = Workload(seq_length=SEQ, global_batch_size=8)


def _comm(shape_kwargs, model=LLAMA):
    shape = LayerShape(micro_batch=1, seq_length=SEQ, **shape_kwargs)
    return {op.name: op for op in layer_comm_ops(model, shape)}


def test_ulysses_and_ring_bytes_by_hand():
    # b = 1, s = 32768, cp = 4, tp = 1: 8192 tokens per rank, 2 B each.
    a2a = _comm(dict(cp=CP, cp_a2a=CP))
    assert a2a["cp_a2a_q"].size_bytes == 2 * 8192 * 32 * 128 == 67_108_864
    assert a2a["cp_a2a_k"].size_bytes == a2a["cp_a2a_v"].size_bytes == 2 * 8192 * 8 * 128
    assert a2a["cp_a2a_out"].size_bytes == 67_108_864
    fwd = [op for op in a2a.values() if op.phase == Phase.FORWARD]
    assert len(fwd) == 4 and all(op.collective == Collective.ALL_TO_ALL for op in fwd)
    assert sum(op.size_bytes for op in fwd) == 167_772_160
    assert len([op for op in a2a.values() if op.phase != Phase.FORWARD]) == 4
    assert all(op.group == Group.CP_A2A and not op.overlappable for op in a2a.values())
    # Ring: the whole sequence's K and V gathered, 2 B · 32768 · 2 · 8 · 128.
    ring = _comm(dict(cp=CP))
    assert set(ring) == {"cp_kv_all_gather", "cp_kv_all_gather_backward",
                         "cp_dkv_reduce_scatter"}
    assert ring["cp_kv_all_gather"].size_bytes == 2 * 32768 * 2 * 8 * 128 == 134_217_728
    assert ring["cp_kv_all_gather"].overlappable
    # Only the local K/V chunk is saved: the backward passes K/V round the ring again beside
    # dK/dV (Transformer Engine AttnFuncWithCPAndKVP2P.backward, buffers of shape (2, *kv)).
    assert ring["cp_kv_all_gather_backward"].phase == Phase.BACKWARD_DGRAD
    assert ring["cp_kv_all_gather_backward"].size_bytes == 134_217_728
    assert ring["cp_kv_all_gather_backward"].collective == Collective.ALL_GATHER
    assert ring["cp_kv_all_gather_backward"].overlappable
    backward = sum(op.size_bytes for op in ring.values() if op.phase != Phase.FORWARD)
    assert backward == 2 * ring["cp_kv_all_gather"].size_bytes
    gathered = _comm(dict(cp=CP, cp_kv_all_gather=True))
    assert gathered["cp_kv_all_gather"].size_bytes == 134_217_728
    assert not gathered["cp_kv_all_gather"].overlappable


def test_ulysses_mha_is_s_h_over_cp_per_all_to_all():
    """Jacobs et al. 2023 §3.1: each all-to-all moves s·h/cp elements per GPU with MHA."""
    mha = LLAMA.model_copy(update={"num_key_value_heads": LLAMA.num_attention_heads})
    ops = _comm(dict(cp=CP, cp_a2a=CP), mha)
    per_gpu = 2 * SEQ * LLAMA.hidden_size / CP
    for name in ("cp_a2a_q", "cp_a2a_k", "cp_a2a_v", "cp_a2a_out"):
        assert ops[name].size_bytes == per_gpu


def test_hierarchical_ring_moves_one_a2a_share():
    """a2a+p2p with A = 2: the ring over P = 2 ranks carries the K/V of the rank's heads/A."""
    ops = _comm(dict(cp=CP, cp_a2a=2))
    assert ops["cp_kv_all_gather"].group == Group.CP_RING
    assert ops["cp_kv_all_gather"].size_bytes == 134_217_728 / 2
    assert ops["cp_a2a_q"].size_bytes == 67_108_864


@pytest.mark.parametrize("a2a", [1, 2, 4])
def test_attention_work_is_one_cp_share_for_every_split(a2a):
    shape = LayerShape(micro_batch=1, seq_length=SEQ, cp=CP, cp_a2a=a2a)
    att = next(op for op in attention_forward_ops(LLAMA, shape) if isinstance(op, AttentionOp))
    ring = CP // a2a
    assert att.heads == 32 / a2a and att.seq_q == SEQ / ring
    assert att.balanced_causal_chunks == (ring > 1)
    # Causal work: 2 · heads · s² / 2 · (d_qk + d_v) / cp for every split (the kernel's causal
    # fraction of a square block is (s + 1)/(2s), within 1e-4 of 1/2 here).
    assert att.flops == pytest.approx(2 * 32 * SEQ**2 / 2 * 256 / CP, rel=1e-4)


def _train(num_gpus=8, **fields):
    system = load_system("dgx-h100", num_gpus=num_gpus)
    return estimate_training(LLAMA, system, Strategy(num_gpus=num_gpus, **fields), WORKLOAD)


@pytest.mark.parametrize("cp_comm_type", ["all_gather", "a2a"])
def test_cp_one_equals_no_cp_exchange(cp_comm_type):
    base, other = _train(tp=2), _train(tp=2, cp_comm_type=cp_comm_type)
    assert other.step_time_s == base.step_time_s
    assert other.memory.peak_bytes == base.memory.peak_bytes


def test_hierarchical_limits_equal_the_plain_types():
    """a2a+p2p with A = cp is Ulysses, with A = 1 the ring."""
    a2a = _train(cp=CP, cp_comm_type="a2a")
    whole = _train(cp=CP, cp_comm_type="a2a+p2p", hierarchical_cp_a2a_size=CP)
    ring = _train(cp=CP)
    ring_only = _train(cp=CP, cp_comm_type="a2a+p2p", hierarchical_cp_a2a_size=1)
    assert whole.step_time_s == pytest.approx(a2a.step_time_s, rel=1e-12)
    assert ring_only.step_time_s == pytest.approx(ring.step_time_s, rel=1e-12)
    assert whole.memory.peak_bytes == a2a.memory.peak_bytes


def test_blocking_exchanges_are_exposed():
    ring, gathered, ulysses = (_train(cp=CP, cp_comm_type=t) for t in ("p2p", "all_gather", "a2a"))
    assert gathered.breakdown.cp_comm_s > ring.breakdown.cp_comm_s > 0
    assert gathered.step_time_s > ring.step_time_s
    assert ulysses.breakdown.cp_comm_s > 0


def test_cp_buffer_bytes_by_hand():
    tokens = SEQ / CP  # 8192
    chunk = 2 * tokens * 2 * 8 * 128  # one rank's K and V
    assert cp_comm_buffer_bytes(LLAMA, tokens, 1, CP, 1, False) == 2 * chunk
    assert cp_comm_buffer_bytes(LLAMA, tokens, 1, CP, 1, True) == CP * chunk
    assert cp_comm_buffer_bytes(LLAMA, tokens, 1, CP, CP, False) == 2 * tokens * (32 + 16) * 128
    assert cp_comm_buffer_bytes(LLAMA, tokens, 1, 1, 1, False) == 0.0
    arr = cp_comm_buffer_bytes(LLAMA, tokens, 1, np.array([CP, CP]), np.array([1, CP]),
                               np.array([True, False]))
    assert list(arr) == [CP * chunk, 2 * tokens * 48 * 128]
    system = load_system("dgx-h100", num_gpus=CP)
    acts = {t: estimate_memory(LLAMA, system, Strategy(num_gpus=CP, cp=CP, cp_comm_type=t),
                               WORKLOAD).stages[0].activations_bytes
            for t in ("p2p", "all_gather")}
    assert acts["all_gather"] - acts["p2p"] == pytest.approx((CP - 2) * chunk, rel=1e-9)


runner = CliRunner()


@pytest.mark.parametrize(("args", "words"), [
    (["--gpus", "64", "--tp", "8", "--cp", "4", "--cp-comm-type", "a2a"], "cp=4"),
    (["--gpus", "16", "--tp", "1", "--cp", "16", "--cp-comm-type", "a2a"], "KV heads"),
    (["--gpus", "8", "--cp", "4", "--cp-comm-type", "a2a+p2p"], "hierarchical"),
    (["--gpus", "8", "--cp", "4", "--cp-comm-type", "a2a+p2p",
      "--hierarchical-context-parallel-sizes", "3,2"], "A*P=6"),
    (["--gpus", "8", "--cp", "4", "--hierarchical-context-parallel-sizes", "2,2"], "a2a+p2p"),
    (["--gpus", "8", "--cp", "4", "--cp-comm-type", "ring"], "ring"),
])
def test_cli_bad_cp_exchange_exits_2(args, words):
    for command in ("train", "memory"):
        result = runner.invoke(app, [command, "-m", "llama-3-70b" if "64" in args else
                                     "llama-3-8b", "--seq-length", "32768", *args])
        assert result.exit_code == 2, result.output
        assert words in result.output and "Traceback" not in result.output


def test_cli_train_reports_the_exchange():
    result = runner.invoke(app, ["train", "-m", "llama-3-8b", "--gpus", "8", "--cp", "4",
                                 "--seq-length", "32768", "--cp-comm-type", "a2a+p2p",
                                 "--hierarchical-context-parallel-sizes", "2,2"])
    assert result.exit_code == 0, result.output
    assert "CP 4 (a2a 2 × p2p 2)" in result.output


def _space(rules=None, **constraints):
    system = load_system("dgx-h100", num_gpus=16)
    c = SearchConstraints(max_vpp=1, max_micro_batch_size=1, fp8=False, sharding=("none",),
                          recompute=("none",), **constraints)
    return system, enumerate_strategies(LLAMA, system, 16, WORKLOAD, c, rules)


def _exchanges(space):
    return {(int(cp), CP_COMM_TYPES[int(code)]) for b in space.blocks
            for cp, code in zip(b.column("cp"), b.column("cp_comm"), strict=True)}


def _levels(space) -> set[tuple[int, int, int]]:
    """(tp, cp, inner a2a level) of every a2a+p2p row."""
    code = CP_COMM_TYPES.index("a2a+p2p")
    return {(int(tp), int(cp), int(a)) for b in space.blocks
            for tp, cp, c, a in zip(b.column("tp"), b.column("cp"), b.column("cp_comm"),
                                    b.column("cp_a2a"), strict=True) if c == code}


def test_search_offers_the_framework_exchanges_the_heads_allow():
    _, space = _space()
    found = _exchanges(space)
    assert (4, "a2a") in found and (4, "p2p") in found and (1, "p2p") in found
    assert not any(t == "all_gather" for _, t in found)  # dominated by the ring
    assert (16, "a2a") not in found  # 8 KV heads do not split over 16 ranks
    torchtitan = LayoutRules.of(load_framework_profile("torchtitan"))
    assert {t for _, t in _exchanges(_space(torchtitan)[1])} == {"p2p"}
    deepspeed = LayoutRules.of(load_framework_profile("deepspeed"))
    assert {t for cp, t in _exchanges(_space(deepspeed)[1]) if cp > 1} == {"a2a"}


def test_search_offers_every_hierarchical_level_megatron_accepts():
    """a2a+p2p once per inner level A with A x P = cp and 1 < A < cp (Megatron's
    --hierarchical-context-parallel-sizes A,P), where the 32 heads and 8 KV heads per TP rank
    split over A: tp 1 all proper divisors of cp, tp 2 (4 KV heads) A <= 4, tp 4 (2 KV heads)
    A = 2, tp 8 (1 KV head) none."""
    _, space = _space()
    levels = _levels(space)
    expected = {(1, 4, 2), (1, 8, 2), (1, 8, 4), (1, 16, 2), (1, 16, 4), (1, 16, 8),
                (2, 4, 2), (2, 8, 2), (2, 8, 4), (4, 4, 2)}
    assert levels == expected
    for b in space.blocks:
        a2a, cp, comm = b.column("cp_a2a"), b.column("cp"), b.column("cp_comm")
        assert np.array_equal(a2a, np.where(comm == CP_COMM_TYPES.index("a2a"), cp,
                                            np.where(comm == CP_COMM_TYPES.index("a2a+p2p"),
                                                     a2a, 1)))
    torchtitan = LayoutRules.of(load_framework_profile("torchtitan"))
    assert _levels(_space(torchtitan)[1]) == set()


def test_search_hierarchical_rows_are_strategies_train_accepts():
    """Each a2a+p2p row is a ``Strategy`` with its level as hierarchical_cp_a2a_size, and
    ``perfcast train`` runs it with --hierarchical-context-parallel-sizes A,P."""
    _, space = _space(fixed=(Pin.parse("cp_comm_type=a2a+p2p"), Pin.parse("tp=2"),
                             Pin.parse("cp=8")))
    strategies = {b.strategy(i) for b in space.blocks for i in range(len(b))}
    sizes = {s.hierarchical_cp_a2a_size for s in strategies}
    assert sizes == {2, 4}
    assert all(s.cp_comm_type == "a2a+p2p" and s.cp_a2a_size == s.hierarchical_cp_a2a_size
               for s in strategies)
    for a in sorted(sizes):
        result = runner.invoke(app, ["train", "-m", "llama-3-8b", "--gpus", "16", "--tp", "2",
                                     "--cp", "8", "--seq-length", str(SEQ),
                                     "--global-batch-size", "8", "--cp-comm-type", "a2a+p2p",
                                     "--hierarchical-context-parallel-sizes", f"{a},{8 // a}"])
        assert result.exit_code == 0, result.output
        assert f"CP 8 (a2a {a} × p2p {8 // a})" in result.output


def test_search_pins_the_exchange():
    fix = (Pin.parse("cp_comm_type=all_gather"),)
    assert {t for cp, t in _exchanges(_space(fixed=fix)[1]) if cp > 1} == {"all_gather"}
    drop = (Pin.parse("cp_comm=a2a"), Pin.parse("cp_comm=a2a+p2p"))
    assert {t for cp, t in _exchanges(_space(excluded=drop)[1]) if cp > 1} == {"p2p"}
    level = (Pin.parse("cp_comm_type=a2a+p2p"), Pin.parse("cp_a2a=4"))
    assert {(tp, cp) for tp, cp, a in _levels(_space(fixed=level)[1])} == {(1, 8), (1, 16),
                                                                             (2, 8)}
    assert {a for _, _, a in _levels(_space(fixed=level)[1])} == {4}
    no_two = (Pin.parse("hierarchical_cp_a2a_size=2"),)
    assert {a for _, _, a in _levels(_space(excluded=no_two)[1])} == {4, 8}


def test_search_bulk_equals_estimate_training_with_exchanges():
    system, space = _space(fixed=(Pin.parse("cp=4"),))
    metrics = BulkEvaluator.for_space(LLAMA, system, WORKLOAD, space).evaluate_all(space)
    rng, seen = random.Random(3), set()
    for _ in range(200):
        b = rng.randrange(len(space.blocks))
        i = rng.randrange(len(space.blocks[b]))
        strategy = space.blocks[b].strategy(i)
        seen.add(strategy.cp_comm_type)
        report = estimate_training(LLAMA, system, strategy, WORKLOAD)
        assert metrics[b].step_time_s[i] == pytest.approx(report.step_time_s, rel=1e-9)
        assert metrics[b].memory_bytes[i] == pytest.approx(report.memory.peak_bytes, rel=1e-9)
    assert seen == {"p2p", "a2a", "a2a+p2p"}


@pytest.mark.parametrize(("framework", "extra", "label"), [
    ("deepspeed", [], "CP 4 (a2a)"),  # DeepSpeed has Ulysses, no ring
    ("megatron-core", [], "CP 4 ·"),  # the ring, Megatron's default
    ("deepspeed", ["--cp-comm-type", "p2p"], "CP 4 ·"),  # stated on the command line: kept
])
def test_framework_without_a_ring_defaults_to_its_exchange(framework, extra, label):
    result = runner.invoke(app, ["train", "-m", "llama-3-8b", "--gpus", "8", "--cp", "4",
                                 "--seq-length", "32768", "--framework", framework, *extra])
    assert result.exit_code == 0, result.output
    assert label in result.output
