"""Bad input is rejected at construction with a message naming the field and value."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from perfcast.errors import InputError, format_validation_error
from perfcast.specs import ModelSpec, Strategy, Workload
from perfcast.specs.compat import check_strategy_for_model, check_workload_for_strategy

from conftest import megatron_gpt


def test_dp_is_derived():
    assert Strategy(num_gpus=64, tp=8, pp=2).dp == 4


@pytest.mark.parametrize("field", ["tp", "pp", "cp", "micro_batch_size", "num_gpus"])
@pytest.mark.parametrize("value", [0, -4])
def test_non_positive_sizes_rejected(field, value):
    kwargs = {"num_gpus": 8, field: value}
    with pytest.raises(ValidationError) as info:
        Strategy(**kwargs)
    assert field in format_validation_error(info.value)
    assert str(value) in format_validation_error(info.value)


def test_gpus_not_divisible_names_values():
    with pytest.raises(ValidationError) as info:
        Strategy(num_gpus=12, tp=8)
    message = format_validation_error(info.value)
    assert "num_gpus=12" in message and "tp*pp*cp=8" in message


def test_tp_must_divide_heads():
    model = megatron_gpt("gpt-test", 24, 2304, 24)
    with pytest.raises(InputError) as info:
        check_strategy_for_model(model, Strategy(num_gpus=16, tp=16))
    assert "tp=16" in str(info.value) and "num_attention_heads=24" in str(info.value)


def test_global_batch_must_split_into_micro_batches():
    strategy = Strategy(num_gpus=16, tp=2, micro_batch_size=2)  # dp = 8
    with pytest.raises(InputError) as info:
        check_workload_for_strategy(Workload(seq_length=2048, global_batch_size=20), strategy)
    assert "global_batch_size=20" in str(info.value)


def test_model_rejects_bad_gqa():
    with pytest.raises(ValidationError) as info:
        ModelSpec(name="x", hidden_size=4096, num_hidden_layers=2, num_attention_heads=32,
                  num_key_value_heads=5, intermediate_size=100, vocab_size=10)
    assert "num_key_value_heads=5" in format_validation_error(info.value)


def test_zero_hidden_size_rejected():
    with pytest.raises(ValidationError) as info:
        ModelSpec(name="x", hidden_size=0, num_hidden_layers=2, num_attention_heads=32,
                  intermediate_size=100, vocab_size=10)
    assert "hidden_size=0" in format_validation_error(info.value)


def test_specs_are_frozen():
    strategy = Strategy(num_gpus=8)
    with pytest.raises(ValidationError):
        strategy.tp = 2  # type: ignore[misc]


def test_vpp_needs_pp():
    with pytest.raises(ValidationError):
        Strategy(num_gpus=8, vpp=2)
