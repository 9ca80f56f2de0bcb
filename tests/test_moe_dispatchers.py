"""MoE dispatchers: NCCL all-to-all, DeepEP and HybridEP (--moe-token-dispatcher-type flex
--moe-flex-dispatcher-backend), the volume each sends per tier, row text and CLI."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from perfcast.cli.main import app
from perfcast.cli.options import strategy_dispatcher
from perfcast.comm.dispatch import tier_bytes
from perfcast.validate.row_strategy import moe_token_dispatcher

runner = CliRunner()
S = 8 * 4096 * 7168 * 2.0  # k = 8 copies of 4096 tokens, hidden 7168, bf16


def test_alltoall_tiers_sum_to_the_off_rank_share():
    nvlink, network = tier_bytes("alltoall", S, 64, 8)
    assert nvlink == pytest.approx(7 / 64 * S) and network == pytest.approx(56 / 64 * S)
    assert nvlink + network == pytest.approx(63 / 64 * S)


@pytest.mark.parametrize("dispatcher", ["deepep", "hybridep"])
def test_dedup_dispatchers_send_less_over_the_network(dispatcher):
    """DeepSeek-V3 routing (8 of 256 experts in at most 4 of 8 groups) on EP 64 over 8 nodes:
    the network carries 0.45 of the plain all-to-all's bytes (comm.dispatch docstring)."""
    _, plain = tier_bytes("alltoall", S, 64, 8)
    nvlink, network = tier_bytes(dispatcher, S, 64, 8, fanout=8, groups=8, group_topk=4)
    assert network / plain == pytest.approx(0.45, abs=0.01)
    assert nvlink > 7 / 64 * S  # NVLink also forwards what arrived over the network


def test_inside_one_nvlink_domain_nothing_crosses_the_network():
    """HybridEP on an NVL72 rack: EP 32 within the 72-GPU NVLink domain."""
    nvlink, network = tier_bytes("hybridep", S, 32, 72, fanout=8)
    assert network == 0 and nvlink == pytest.approx(31 / 32 * S)


def test_tier_bytes_refuses_other_dispatchers():
    with pytest.raises(ValueError, match="deepep-low-latency"):
        tier_bytes("deepep-low-latency", S, 8, 8)


def test_flex_backend_picks_the_dispatcher():
    assert strategy_dispatcher("flex") == "deepep"
    assert strategy_dispatcher("flex", "hybridep") == "hybridep"
    assert strategy_dispatcher("alltoall", "hybridep") == "alltoall"


def test_row_text():
    notes: list[str] = []
    assert moe_token_dispatcher({"framework": "Megatron-Core; token dispatcher HybridEP"}, 8,
                                notes) == "hybridep"
    assert moe_token_dispatcher({"framework": "Megatron-Core; token dispatcher DeepEP"}, 8,
                                notes) == "deepep"
    # without EP there is nothing to dispatch: the row states nothing, the profile decides
    assert moe_token_dispatcher({"framework": "Megatron-Core; token dispatcher HybridEP"}, 1,
                                notes) is None


def test_cli_flex_backend_flag():
    base = ["train", "--model", "qwen3-30b-a3b", "--system", "dgx-h100", "--gpus", "16", "--ep",
            "16", "--gbs", "16", "--json"]
    plain = json.loads(runner.invoke(app, base).stdout)
    hybrid = runner.invoke(app, base + ["--moe-token-dispatcher-type", "flex",
                                        "--moe-flex-dispatcher-backend", "hybridep"])
    assert hybrid.exit_code == 0, hybrid.output
    data = json.loads(hybrid.stdout)
    assert data["strategy"]["moe_token_dispatcher"] == "hybridep"
    assert data["breakdown_s"]["ep_comm"] < plain["breakdown_s"]["ep_comm"]
