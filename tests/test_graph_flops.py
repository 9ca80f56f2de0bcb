"""Exact FLOP identities of the operator graph (no hardware involved)."""

from __future__ import annotations

import pytest

from perfcast.catalog.models import load_model
from perfcast.graph import params as P
from perfcast.graph.flops import model_flops_per_token
from perfcast.graph.ops import AttentionOp, GemmOp, Phase
from perfcast.graph.stage import stage_graph
from perfcast.specs import Strategy

SEQ = 4096


def _gemm_flops(graph):
    return sum(group.count * op.flops for group in graph.layers for op in group.compute
               if isinstance(op, GemmOp))


@pytest.mark.parametrize("tp", [1, 2, 8])
def test_layer_gemms_are_six_flops_per_weight_per_token(tp):
    """Forward + dgrad + wgrad GEMMs of every layer = 6 · layer weights · tokens, split by TP."""
    model = load_model("llama-3-8b")
    graph = stage_graph(model, Strategy(num_gpus=tp, tp=tp, micro_batch_size=2), SEQ, 0)
    weights = model.num_hidden_layers * (
        P.attention_params(model) + P.mlp_params(model, model.intermediate_size))
    assert _gemm_flops(graph) * tp == pytest.approx(6 * weights * 2 * SEQ, rel=1e-12)


def test_whole_model_matches_six_n_plus_attention():
    """GEMMs (incl. LM head) + flash attention (fwd + bwd as 3 passes) per token equal
    ``model_flops_per_token``: flash attention's backward recompute of QKᵀ is the 0.5 extra."""
    model = load_model("llama-3-8b")
    graph = stage_graph(model, Strategy(num_gpus=1), SEQ, 0)
    gemm = _gemm_flops(graph) + sum(op.flops for op in graph.extra_compute
                                    if isinstance(op, GemmOp))
    attn_fwd = sum(group.count * op.flops for group in graph.layers for op in group.compute
                   if isinstance(op, AttentionOp) and op.phase == Phase.FORWARD)
    assert gemm + 3 * attn_fwd == pytest.approx(model_flops_per_token(model, SEQ) * SEQ,
                                                rel=1e-3)


def test_balanced_cp_chunks_do_one_cp_th_of_causal_work():
    model = load_model("llama-3-8b")
    full = stage_graph(model, Strategy(num_gpus=1), SEQ, 0)
    split = stage_graph(model, Strategy(num_gpus=4, cp=4), SEQ, 0)

    def attention(graph):
        return sum(op.flops for g in graph.layers for op in g.compute
                   if isinstance(op, AttentionOp))
    assert attention(split) * 4 == pytest.approx(attention(full), rel=1e-3)
