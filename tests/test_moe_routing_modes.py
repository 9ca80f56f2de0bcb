"""MoE routing modes: dropless, token dropping (capacity factor), padding to capacity and forced
load balancing change the routed load that sets expert compute and all-to-all volume."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from perfcast.calibration.moe_routing import load_moe_routing
from perfcast.catalog.models import load_model
from perfcast.graph.stage import layer_shape
from perfcast.specs.strategy import Strategy
from perfcast.validate.row_strategy import moe_routing

MODEL = load_model("mixtral-8x7b")


def _load(**fields):
    return layer_shape(MODEL, Strategy(num_gpus=8, ep=8, **fields), 4096, True).routed_load


def test_routed_load_by_mode():
    learned = load_moe_routing().dropless_load_imbalance.value
    assert learned > 1.0
    assert _load() == learned                                        # dropless, learned router
    assert _load(moe_capacity_factor=1.2) == min(learned, 1.2)       # the capacity caps it
    assert _load(moe_load_imbalance=1.0) == 1.0                      # stated: balanced
    assert layer_shape(MODEL, Strategy(num_gpus=8), 4096, True).routed_load == 1.0  # no EP
    assert _load(moe_load_imbalance=1.4) == 1.4                      # dropless, skewed
    assert _load(moe_load_imbalance=1.4, moe_capacity_factor=1.2) == 1.2   # dropped beyond
    assert _load(moe_load_imbalance=1.0, moe_capacity_factor=1.2,
                 moe_pad_expert_input_to_capacity=True) == 1.2       # padded up to capacity
    assert _load(moe_load_imbalance=1.4, moe_router_force_load_balancing=True) == 1.0


def test_padding_needs_a_capacity():
    with pytest.raises(ValidationError, match="moe_capacity_factor"):
        Strategy(num_gpus=8, ep=8, moe_pad_expert_input_to_capacity=True)


def test_row_text():
    notes: list[str] = []
    assert moe_routing({"notes": "token-drop (capacity factor 1.0, pad to capacity)"}, notes) == {
        "moe_capacity_factor": 1.0, "moe_pad_expert_input_to_capacity": True}
    assert moe_routing({"notes": "dropless with forced load balancing"}, notes) == {
        "moe_router_force_load_balancing": True}
    assert moe_routing({"notes": "dropless (real routing)"}, notes) == {}
    assert moe_routing({"notes": "mock data; fake balanced gate for MoE"}, notes) == {
        "moe_router_force_load_balancing": True}
