"""config.json without ``hidden_act``: each model_type's documented default activation (issue 22).

GPT-NeoX-20B's published config (EleutherAI/gpt-neox-20b) states ``hidden_act: gelu_fast``;
without it, transformers' GPTNeoXConfig default ``gelu`` applies (non-gated MLP), and the model
has 20,554,567,680 parameters (the HF model card's count). Treating it as SwiGLU gave 27.2B.
"""

from __future__ import annotations

import pytest

from perfcast.catalog.hf_config import model_from_hf_config
from perfcast.errors import InputError
from perfcast.graph.params import count_params

GPT_NEOX_20B = {
    "architectures": ["GPTNeoXForCausalLM"], "hidden_size": 6144, "intermediate_size": 24576,
    "layer_norm_eps": 1e-05, "max_position_embeddings": 2048, "model_type": "gpt_neox",
    "num_attention_heads": 64, "num_hidden_layers": 44, "rotary_emb_base": 10000,
    "rotary_pct": 0.25, "tie_word_embeddings": False, "use_parallel_residual": True,
    "vocab_size": 50432,
}
GPT_NEOX_20B_PARAMS = 20_554_567_680


@pytest.mark.parametrize("act", [None, "gelu_fast", "gelu"])
def test_gpt_neox_20b_parameter_count(act: str | None) -> None:
    config = dict(GPT_NEOX_20B) if act is None else {**GPT_NEOX_20B, "hidden_act": act}
    model = model_from_hf_config(config, "gpt-neox-20b", "test")
    assert model.activation == "gelu"
    assert count_params(model).total == GPT_NEOX_20B_PARAMS


def test_unknown_model_type_without_activation_is_an_error() -> None:
    config = {**GPT_NEOX_20B, "model_type": "somethingnew"}
    with pytest.raises(InputError, match="hidden_act") as err:
        model_from_hf_config(config, "x", "test")
    assert err.value.field == "activation"
    stated = model_from_hf_config({**config, "hidden_act": "gelu"}, "x", "test")
    assert stated.activation == "gelu"
