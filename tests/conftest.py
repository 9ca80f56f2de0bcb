"""Shared fixtures: small hand-built specs (no catalog), and the shared ground-truth folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from perfcast.specs import GPUSpec, ModelSpec, SystemSpec

SHARED = Path(__file__).resolve().parents[2] / "shared"


def shared_path(*parts: str) -> Path:
    """A path under ../shared; the test fails loudly when it is not there (the measured data
    must sit beside the checkout: ../shared/ground_truth, ../shared/reference)."""
    path = SHARED.joinpath(*parts)
    if not path.exists():
        pytest.fail(f"{path} is missing: perfcast's tests need the shared measured data in "
                    f"{SHARED} (a folder beside the checkout)", pytrace=False)
    return path


def megatron_gpt(name: str, layers: int, hidden: int, heads: int, vocab: int = 51200,
                 dropout: float = 0.1) -> ModelSpec:
    """A GPT of Narayanan et al. 2021 / Korthikanti et al. 2022 (GELU 4h MLP, LayerNorm,
    learned positions, biases, tied embeddings, dropout 0.1)."""
    return ModelSpec(
        name=name, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
        intermediate_size=4 * hidden, vocab_size=vocab, max_position_embeddings=2048,
        activation="gelu", norm_type="layernorm", position_embedding="learned",
        attention_bias=True, mlp_bias=True, tie_word_embeddings=True,
        hidden_dropout=dropout, attention_dropout=dropout,
    )


@pytest.fixture(scope="session")
def a100_system() -> SystemSpec:
    gpu = GPUSpec(
        name="a100-80gb-test", display_name="A100 80GB (test)", vendor="nvidia",
        generation="ampere", peak_bf16_flops=312e12, hbm_capacity_bytes=80e9,
        hbm_bandwidth_Bps=2.039e12, num_sms=108, source="test",
    )
    return SystemSpec(
        name="dgx-a100-test", gpu=gpu, gpus_per_node=8, scale_up_domain_gpus=8,
        scale_up_bandwidth_Bps=300e9, scale_out_bandwidth_Bps=25e9, source="test",
    )
