"""Layer ops take arrays of token counts (serving tabulates step costs on grids of them):
a model with hidden dropout (GPT-3: fused dropout-add) included. Regression: the fused
dropout-add bytes were converted with float(), a TypeError for an array (found by the fuzz,
``perfcast infer-search -m gpt3-175b --gpus 1``)."""

from __future__ import annotations

import numpy as np

from perfcast.catalog.models import load_model
from perfcast.graph.layer import LayerShape, layer_memory_bound_ops


def test_dropout_add_bytes_follow_an_array_of_tokens() -> None:
    model = load_model("gpt3-175b")
    assert model.hidden_dropout > 0
    tokens = np.array([1.0, 8.0, 64.0])
    ops = {op.name: op for op in layer_memory_bound_ops(model, LayerShape(1, tokens))}
    one = {op.name: op for op in layer_memory_bound_ops(model, LayerShape(1, 1.0))}
    dropout = np.asarray(ops["dropout_add"].bytes_moved)
    assert dropout.shape == tokens.shape
    np.testing.assert_allclose(dropout, one["dropout_add"].bytes_moved * tokens, rtol=1e-12)
