"""Attention DP in serving: one scheduler per rank, KV of a sequence on one rank, MoE dispatch
of one rank's tokens (``estimate.serving.attention_dp_scheduler``, ``serving_memory``,
``inference_ops.step_layer_ops``)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from perfcast.catalog.models import load_model
from perfcast.catalog.serving_engines import engine_config
from perfcast.catalog.systems import load_system
from perfcast.estimate.inference_ops import step_layer_ops
from perfcast.estimate.serving import attention_dp_scheduler, estimate_serving
from perfcast.estimate.serving_memory import kv_bytes_per_token_per_gpu, serving_memory_paged
from perfcast.graph.ops import Group
from perfcast.specs.inference import InferencePrecision
from perfcast.specs.serving import ServingWorkload
from perfcast.specs.strategy import Strategy
from perfcast.units import GiB
from perfcast.validate.serving_rows import attention_dp_stated

FP8 = InferencePrecision(weights="fp8", activations="fp8", kv_cache="fp8")


def test_each_rank_schedules_its_own_requests():
    rank = replace(engine_config("tensorrt-llm", 180 * GiB), max_running_seqs=896,
                   token_budget_per_step=2048)
    replica = attention_dp_scheduler(rank, tp=8)
    assert replica.max_running_seqs == 8 * 896
    assert replica.token_budget_per_step == 8 * 2048
    assert replica.cuda_graph_max_batch == 8 * rank.cuda_graph_max_batch
    assert attention_dp_scheduler(rank, tp=1) == rank


@pytest.mark.parametrize("model", ["deepseek-v3", "llama-3.1-70b"])
def test_the_replica_pool_is_every_rank_holding_whole_tokens(model):
    """With attention DP a token's KV lives unsplit on one rank: the replica holds tp × one
    GPU's pool of unsplit tokens (MLA's latent is replicated without DP, so DP multiplies the
    sequences it holds by tp; GQA heads split over TP hold about the same tokens either way)."""
    spec, strategy = load_model(model), Strategy(num_gpus=8, tp=8)
    engine = engine_config("sglang", 141 * GiB)
    plain = serving_memory_paged(spec, 141 * GiB, strategy, FP8, engine)
    dp = serving_memory_paged(spec, 141 * GiB, strategy, FP8, engine, attention_dp=True)
    unsplit = kv_bytes_per_token_per_gpu(spec, strategy, "fp8", attention_dp=True)
    assert dp.kv_bytes_per_token == unsplit
    assert dp.kv_pool_tokens == pytest.approx(8 * plain.kv_pool_bytes / unsplit, rel=1e-3)
    assert dp.max_running_seqs == 8 * plain.max_running_seqs
    if spec.is_mla:
        assert dp.kv_pool_tokens == pytest.approx(8 * plain.kv_pool_tokens, rel=1e-3)
    else:
        assert dp.kv_pool_tokens == pytest.approx(plain.kv_pool_tokens, rel=1e-3)


def test_moe_dispatch_carries_one_ranks_tokens():
    spec, strategy = load_model("deepseek-v3"), Strategy(num_gpus=8, tp=8, ep=8, etp=1)
    def ep_bytes(attention_dp: bool) -> float:
        ops = step_layer_ops(spec, strategy, 4096.0, (), moe=True, attention_dp=attention_dp)
        return sum(op.size_bytes * op.count for op in ops.comm if op.group == Group.EP)
    assert ep_bytes(False) > 0
    assert ep_bytes(True) == pytest.approx(ep_bytes(False) / 8)


def test_attention_dp_raises_max_throughput_at_high_concurrency():
    """DeepSeek-R1 at 2,048 clients on 8×B200: per-rank schedulers run all of them at once
    (one scheduler capped at 512 would queue 3 in 4), so throughput rises with attention DP."""
    w = ServingWorkload(mode="concurrency", concurrency=2048, num_requests=4096, input_len=1024,
                        output_len=512, length_range_ratio=1.0)
    system, strategy = load_system("dgx-b200", num_gpus=8), Strategy(num_gpus=8, tp=8, ep=8, etp=1)
    common = dict(engine="tensorrt-llm", precision="fp8", kv_precision="fp8",
                  engine_overrides={"max_running_seqs": 512})
    one = estimate_serving(load_model("deepseek-v3"), system, strategy, w, **common)
    per_rank = estimate_serving(load_model("deepseek-v3"), system, strategy, w,
                                attention_dp=True, **common)
    assert one.max_concurrent_seqs == 512 and per_rank.max_concurrent_seqs >= 2048
    assert per_rank.output_tokens_per_s > 1.5 * one.output_tokens_per_s


@pytest.mark.parametrize("notes, on", [
    ("single node aggregated serving: TP8, EP1, DP-attention=off; run date", False),
    ("single node aggregated serving: TP8, EP8, DP-attention=on; run date", True),
    ("TP8 with --enable-dp-attention; FlashInfer 0.2.1", True),
    ("attention DP (enable_attention_dp) + EP8 MoE", True),
    ("TP8, EP8", False),
])
def test_attention_dp_is_read_from_the_notes(notes, on):
    assert attention_dp_stated(notes) is on


@pytest.mark.parametrize("version, rank_budget", [("0.4.3", 8192 // 2), ("0.5.12", 8192 // 8)])
def test_sglang_splits_its_chunk_over_the_dp_ranks(version, rank_budget):
    """SGLang gives each DP-attention worker chunked_prefill_size // 2 (0.4.3) or
    // dp_size (from 0.4.6) tokens a step (sglang.yaml attention_dp_rank_budget); a request's
    chunk stays within its rank's budget."""
    rank = engine_config("sglang", 141 * GiB, version)
    assert rank.token_budget_per_step == 8192
    replica = attention_dp_scheduler(rank, tp=8)
    assert replica.max_chunk_tokens == rank_budget
    assert replica.token_budget_per_step == 8 * rank_budget
    assert attention_dp_scheduler(engine_config("tensorrt-llm", 141 * GiB), tp=8).max_chunk_tokens \
        == 8192


def test_a_prompt_longer_than_its_ranks_budget_takes_several_steps():
    """One 4096-token prompt under SGLang 0.5 attention DP on 8 ranks: 1024 tokens a step on its
    rank, so its first token comes after 4 prefill steps, later than with the whole budget."""
    args = (load_model("deepseek-v3"), load_system("dgx-h200", num_gpus=8),
            Strategy(num_gpus=8, tp=8, ep=8, etp=1),
            ServingWorkload(mode="concurrency", concurrency=1, num_requests=2, input_len=4096,
                            output_len=8))
    split = estimate_serving(*args, engine="sglang", engine_version="0.5.12", precision="fp8",
                             attention_dp=True)
    whole = estimate_serving(*args, engine="sglang", engine_version="0.5.12", precision="fp8",
                             attention_dp=True,
                             engine_overrides={"attention_dp_rank_budget": "full"})
    assert split.ttft.mean_s > 1.2 * whole.ttft.mean_s
    assert split.tpot.mean_s == pytest.approx(whole.tpot.mean_s, rel=0.05)


class _FlatCost:
    """Every prefill step 0.1 s, every decode step 0.01 s (duck-typed ``StepCost``)."""

    def decode_s(self, b, kv_total):
        return 0.01

    def mixed_s(self, b, kv_total, prefill_tokens, prefill_attn_s, sampled):
        return 0.1

    def chunk_attention_s(self, done, chunk):
        return 0.0


def test_ranks_prefill_their_own_requests_in_the_same_step():
    """8 prompts of 2048 tokens on 8 ranks of 1024 tokens each: every step advances all 8 by
    one rank budget, so all first tokens come with the second prefill step; without the rank
    cap the budget goes FCFS (4 prompts finish in the first step, 4 later)."""
    from perfcast.estimate.serving_sim import simulate

    replica = attention_dp_scheduler(engine_config("sglang", 141 * GiB, "0.5.12"), tp=8)
    w = ServingWorkload(mode="offline", num_requests=8, input_len=2048, output_len=2)
    ranks = simulate(w, _FlatCost(), replica, 10**7, 1)
    assert ranks.first_token_s.tolist() == pytest.approx([0.2] * 8)
    fcfs = sorted(simulate(w, _FlatCost(), replace(replica, max_chunk_tokens=None), 10**7,
                           1).first_token_s.tolist())
    assert fcfs[:4] == pytest.approx([0.1] * 4) and min(fcfs[4:]) >= 0.2
