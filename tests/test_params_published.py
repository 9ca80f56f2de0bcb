"""Parameter counts against published totals (within 0.5%), exact GPT identity."""

from __future__ import annotations

import pytest

from perfcast.catalog.models import load_model
from perfcast.graph.params import count_params

PUBLISHED = [
    ("llama-3-8b", 8.03e9),  # Meta model card: 8.03B
    ("llama-3.1-70b", 70.6e9),  # Meta Llama 3.1 model card: 70.6B
    ("llama-3.1-405b", 405.9e9),  # Meta Llama 3.1 model card: 405B (405.85B exact)
    ("mixtral-8x7b", 46.7e9),  # Mistral AI, "Mixtral of experts" (Jiang et al. 2024): 46.7B
    ("gpt3-175b", 175.0e9),  # Brown et al. 2020 Table 2.1: 175.0B
]


@pytest.mark.parametrize(("name", "published"), PUBLISHED, ids=[p[0] for p in PUBLISHED])
def test_total_within_half_percent(name, published):
    assert count_params(load_model(name)).total == pytest.approx(published, rel=0.005)


def test_mixtral_active():
    # Jiang et al. 2024: 12.9B active parameters per token.
    assert count_params(load_model("mixtral-8x7b")).active == pytest.approx(12.9e9, rel=0.01)


def test_narayanan_equation_2_exact():
    """P = 12·l·h²·(1 + 13/(12h) + (V + s)/(12·l·h)) for the Megatron GPT family, plus the
    final LayerNorm (2h), which the paper's equation leaves out."""
    for name, layers, h in (("megatron-gpt-18.4b", 40, 6144), ("megatron-gpt-1t", 128, 25600)):
        model = load_model(name)
        V, s = model.vocab_size, model.max_position_embeddings
        expected = 12 * layers * h**2 * (1 + 13 / (12 * h) + (V + s) / (12 * layers * h))
        assert count_params(model).total == pytest.approx(expected + 2 * h, rel=1e-12)


def test_aliases_resolve_to_same_entry():
    assert load_model("llama3.1-405b") == load_model("llama-3.1-405b")
    assert load_model("llama3-8b") == load_model("llama-3-8b")
