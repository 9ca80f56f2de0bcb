"""MoE / MLA models: parameter counts and FLOPs per token against published figures.

Publishers count "active" parameters two ways: Mistral (Jiang et al. 2024) and Qwen (Qwen3
technical report, Table 1) include the input embedding; DeepSeek (DeepSeek-V3 report §4.2),
Moonshot (Kimi K2 model card) and OpenAI (gpt-oss model card, Table 1) leave it out. Each
figure is compared in its publisher's convention and to the precision it was published with.
"""

from __future__ import annotations

import pytest

from perfcast.catalog.models import load_model
from perfcast.graph.flops import attention_flops_per_token, matmul_params, model_flops_per_token
from perfcast.graph.params import count_params

TOTALS = [
    ("mixtral-8x7b", 46.7e9),  # Jiang et al. 2024: 46.7B
    ("deepseek-v3", 671e9),  # DeepSeek-V3 report §4.2: 671B main model (685B with MTP)
    ("qwen3-235b-a22b", 235e9),  # Qwen3 technical report Table 1: 235B
    ("gpt-oss-120b", 116.83e9),  # gpt-oss model card Table 1: 116.83B
    ("gpt-oss-20b", 20.91e9),  # gpt-oss model card Table 1: 20.91B
]


@pytest.mark.parametrize(("name", "published"), TOTALS, ids=[t[0] for t in TOTALS])
def test_total_within_half_percent(name, published):
    assert count_params(load_model(name)).total == pytest.approx(published, rel=0.005)


@pytest.mark.parametrize(("name", "published"), [
    ("mixtral-8x7b", 12.9e9),  # Jiang et al. 2024: 12.9B active
    ("qwen3-235b-a22b", 22e9),  # Qwen3 report: 22B activated
])
def test_active_with_embedding_within_one_percent(name, published):
    assert count_params(load_model(name)).active == pytest.approx(published, rel=0.01)


@pytest.mark.parametrize(("name", "published"), [
    ("gpt-oss-120b", 5.13e9),  # gpt-oss model card Table 1: 5.13B active
    ("gpt-oss-20b", 3.61e9),  # gpt-oss model card Table 1: 3.61B active
])
def test_active_non_embedding_within_one_percent(name, published):
    assert count_params(load_model(name)).active_non_embedding == pytest.approx(published, rel=0.01)


@pytest.mark.parametrize(("name", "published_b"), [
    ("deepseek-v3", 37),  # DeepSeek-V3 report §4.2: "37B activated for each token"
    ("deepseek-v2", 21),  # DeepSeek-V2 report §1: 21B activated
    ("kimi-k2", 32),  # Kimi K2 model card: 32B activated
])
def test_active_matches_whole_billions(name, published_b):
    """Published to the nearest billion: the non-embedding count rounds to it."""
    assert round(count_params(load_model(name)).active_non_embedding / 1e9) == published_b


def test_deepseek_v3_flops_per_token_is_six_active_plus_attention():
    """Issue: training FLOPs per token = 6 × 37B active + attention, within 2%."""
    model = load_model("deepseek-v3")
    for seq in (4096, 32768):
        published = 6 * 37e9 + attention_flops_per_token(model, seq)
        assert model_flops_per_token(model, seq) == pytest.approx(published, rel=0.02)


def test_model_flops_identity_for_moe():
    """Exactly 6·N_matmul + attention, with N_matmul the non-embedding active count."""
    for name in ("deepseek-v3", "mixtral-8x7b", "qwen3-30b-a3b", "gpt-oss-20b"):
        model = load_model(name)
        counts = count_params(model)
        assert matmul_params(model) == counts.active_non_embedding
        assert model_flops_per_token(model, 4096) == (
            6 * counts.active_non_embedding + attention_flops_per_token(model, 4096))


def test_deepseek_v3_with_mtp_module_is_685b():
    """HF deepseek-ai/DeepSeek-V3 model card: 685B = 671B main model + 14B MTP module, whose
    checkpoint also stores its own copies of the embedding and output head."""
    from perfcast.graph.params import mtp_module_params

    model = load_model("deepseek-v3")
    counts = count_params(model)
    with_mtp = counts.total + mtp_module_params(model) + counts.embedding + counts.lm_head
    assert with_mtp == pytest.approx(685e9, rel=0.005)


def test_mtp_parameters_sit_on_the_last_stage():
    from perfcast import Strategy
    from perfcast.graph import params as P
    from perfcast.graph.param_sharding import stage_params

    model = load_model("deepseek-v3")
    base = Strategy(num_gpus=256, pp=4, ep=8)
    mtp = Strategy(num_gpus=256, pp=4, ep=8, mtp_num_layers=1)
    for stage in range(3):
        assert stage_params(model, mtp, stage) == stage_params(model, base, stage)
    last, last_mtp = stage_params(model, base, 3), stage_params(model, mtp, 3)
    routed = model.num_experts / 8 * P.routed_expert_params(model)
    non_expert = P.moe_layer_params(model, 0) + P.mtp_projection_params(model)
    assert last_mtp.expert - last.expert == routed
    assert last_mtp.dense - last.dense == non_expert + P.embedding_params(model)
    assert (last_mtp.num_layers, last_mtp.num_mtp_layers) == (last.num_layers + 1, 1)


def test_gpt_oss_attention_sinks_one_logit_per_head_per_layer():
    model = load_model("gpt-oss-120b")
    assert model.attention_sinks
    plain = model.model_copy(update={"attention_sinks": False})
    delta = count_params(model).total - count_params(plain).total
    assert delta == model.num_hidden_layers * model.num_attention_heads


def test_vocabulary_padding_megatron():
    """Megatron-LM pads GPT-2's 50,257 tokens to 51,200 with tp=8 (multiple of 128·8)."""
    from perfcast import Strategy
    from perfcast.graph.param_sharding import stage_params
    from perfcast.graph.params import padded_vocab_size

    assert padded_vocab_size(50257, 8) == 51200
    assert padded_vocab_size(50257, 1) == 50304
    assert padded_vocab_size(128256, 8) == 129024
    model = load_model("gpt3-175b")
    one = Strategy(num_gpus=16, tp=8, pp=2, make_vocab_size_divisible_by=1)
    padded = Strategy(num_gpus=16, tp=8, pp=2)
    grown = stage_params(model, padded, 0).embedding - stage_params(model, one, 0).embedding
    assert grown == (51200 - 50257) * model.hidden_size / 8 - (50264 - 50257) * model.hidden_size / 8
