"""tools/moe_dispatch_screen.py: the distinct-destination counts it screens with, the rows it
treats as fake-gate runs, and that a variant leaves the package as it found it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import perfcast.estimate.training as training
import perfcast.schedule.op_time as op_time
import perfcast.validate.fit_moe_routing as fit_moe_routing

from conftest import shared_path

TOOLS = Path(__file__).resolve().parents[1] / "tools"


@pytest.fixture(scope="module")
def screen():
    sys.path.insert(0, str(TOOLS))
    try:
        import moe_dispatch_screen
    finally:
        sys.path.remove(str(TOOLS))
    return moe_dispatch_screen


@pytest.mark.parametrize("experts, per_rank, top_k, ranks", [
    (128, 16, 8, 1.0),      # Qwen3-30B-A3B on EP 8: a block of 8 sits on one rank
    (256, 4, 8, 2.0),       # DeepSeek-V3 on EP 64: two ranks of four experts
    (384, 12, 8, 4 / 3),    # Kimi K2 on EP 32: blocks 0-7, 8-15 (straddles), 16-23 repeat
    (12, 4, 3, 1.5),        # starts 0, 3, 6, 9 (gcd 3): spans 1, 2, 2, 1
])
def test_consecutive_span(screen, experts, per_rank, top_k, ranks):
    assert screen.consecutive_span(experts, per_rank, top_k) == pytest.approx(ranks)


def test_rank_hit_probability(screen):
    # Mixtral on EP 8 (one expert per rank, top-2): a rank is hit by k/E of the tokens
    assert screen.rank_hit_probability(8, 1, 2) == pytest.approx(2 / 8)
    # two experts per rank of 8, top-2: 1 - (6/8)(5/7)
    assert screen.rank_hit_probability(8, 2, 2) == pytest.approx(1 - 30 / 56)
    # Qwen3-235B on EP 8 (16 experts per rank, top-8): 8 ranks hit 5.34 of 8 copies
    assert 8 * screen.rank_hit_probability(128, 16, 8) == pytest.approx(5.339, abs=1e-3)
    assert screen.rank_hit_probability(16, 16, 4) == 1.0


def test_fake_gate_runs_are_the_automodel_moe_rows(screen):
    keys = screen.fake_gate_runs(Path(shared_path("ground_truth", "training.csv")))
    assert {k[0] for k in keys} == {"deepseek-v3", "kimi-k2", "qwen3-30b-a3b", "gpt-oss-20b",
                                    "gpt-oss-120b"}
    assert ("qwen3-30b-a3b", 8, 1, 8, 4) in keys


@pytest.mark.parametrize("name", ["routing prior", "rank dedup + fake gate"])
def test_variant_restores_the_package(screen, name):
    before = (training.stage_graph, op_time._dispatch_bytes, fit_moe_routing.NO_PAIR_PRIOR)
    with screen.variant(name, frozenset()):
        during = (training.stage_graph, op_time._dispatch_bytes, fit_moe_routing.NO_PAIR_PRIOR)
        assert during != before
    assert (training.stage_graph, op_time._dispatch_bytes,
            fit_moe_routing.NO_PAIR_PRIOR) == before
