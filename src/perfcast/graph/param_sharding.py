"""Parameters held by one GPU of one pipeline stage under a parallel strategy.

Megatron-LM placement (Shoeybi et al. 2019; Narayanan et al. 2021 §2):
- attention and MLP weight matrices are split over tensor parallelism (column/row parallel);
  norms and the MoE router are replicated; MLA's down-projections are replicated;
- routed experts are split over expert parallelism (ep) and expert tensor parallelism (etp);
- the vocabulary-parallel embedding lives on the first stage, the LM head on the last (both on
  the only stage when pp = 1; a tied head on the last stage keeps its own copy);
- layers are split over pp stages as ``specs.pipeline_layout`` says: Megatron's layout string,
  first/last stage layer counts, embedding/loss accounting, or evenly (the extra layers on the
  middle stages first, keeping the embedding/head stages light).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from perfcast.graph import params as P
from perfcast.graph import weight_tensors as W
from perfcast.memo import LastPairTable
from perfcast.specs.model import ModelSpec
from perfcast.specs.pipeline_layout import (
    even_stage_counts,
    has_custom_split,
    stage_layer_indices,
)
from perfcast.specs.strategy import Strategy


def layers_per_stage(num_layers: int, pp: int) -> list[int]:
    """Layer count of each pipeline stage under the default split (sum = num_layers)."""
    return even_stage_counts(num_layers, pp)


@lru_cache(maxsize=1024)
def stage_layer_ranges(num_layers: int, pp: int) -> tuple[range, ...]:
    """Global layer indices held by each stage (memoized: immutable ranges)."""
    ranges, start = [], 0
    for count in layers_per_stage(num_layers, pp):
        ranges.append(range(start, start + count))
        start += count
    return tuple(ranges)


def moe_layers_per_stage(model: ModelSpec, pp: int) -> tuple[int, ...]:
    """MoE layers on each pipeline stage (``is_moe_layer`` counted over the stage's layers)."""
    if not model.is_moe:
        return (0,) * pp
    return _moe_layers_per_stage(model.num_hidden_layers, pp, model.first_k_dense_layers,
                                 model.moe_layer_freq)


@lru_cache(maxsize=1024)
def _moe_layers_per_stage(num_layers: int, pp: int, first_k_dense: int, freq: int):
    return tuple(sum(1 for i in layers if i >= first_k_dense and (i - first_k_dense) % freq == 0)
                 for layers in stage_layer_ranges(num_layers, pp))


def strategy_stage_layers(model: ModelSpec, strategy) -> list[Sequence[int]]:
    """Global decoder-layer indices held by each pipeline rank under ``strategy``'s split
    (``specs.pipeline_layout``); the default split keeps each rank's layers contiguous. A
    search block (``search.space.StrategyBlock``) may carry them (``stage_layers``: one tuple
    for the several vpps it holds, ``search.split_merge``)."""
    if type(strategy) is not Strategy:
        held = getattr(strategy, "stage_layers", None)
        if held is not None:
            return list(held)
    if has_custom_split(strategy):
        return list(stage_layer_indices(model.num_hidden_layers, strategy))
    return list(stage_layer_ranges(model.num_hidden_layers, strategy.pp))


def is_moe_layer(model: ModelSpec, layer: int) -> bool:
    """Whether global layer ``layer`` has an MoE MLP (after first_k_dense, every freq-th)."""
    if not model.is_moe or layer < model.first_k_dense_layers:
        return False
    return (layer - model.first_k_dense_layers) % model.moe_layer_freq == 0


def count_moe_layers(model: ModelSpec, layers: Sequence[int]) -> int:
    """How many of the global layer indices ``layers`` have an MoE MLP (``is_moe_layer``);
    0 at once for a dense model (the estimator's hot path counts every stage's layers)."""
    if not model.is_moe:
        return 0
    return sum(1 for i in layers if is_moe_layer(model, i))


def _attention_replicated(model: ModelSpec) -> int:
    """Attention parameters that TP does not split: MLA down-projections and their norms."""
    if not model.is_mla:
        return 2 * model.kv_channels if model.qk_norm else 0
    h, rope, r_kv = model.hidden_size, model.qk_rope_head_dim or 0, model.kv_lora_rank or 0
    r_q = model.q_lora_rank or 0
    return (h * r_q + r_q if r_q else 0) + h * (r_kv + rope) + r_kv


@dataclass(frozen=True)
class StageParams:
    """Parameters on one GPU of one pipeline stage, split by how they are sharded."""

    stage: int
    num_layers: int
    """Transformer layers on this stage, MTP modules' layers included."""
    num_moe_layers: int
    dense: float
    """Non-expert parameters on this GPU (attention, dense MLPs, norms, router, shared experts,
    embedding/head): data-parallel over dp·cp."""
    expert: float
    """Routed-expert parameters on this GPU: data-parallel over the expert-DP group."""
    embedding: float
    """The part of ``dense`` that is embedding or LM head."""
    num_mtp_layers: int = 0
    """Multi-token-prediction modules on this stage (the last one holds them all)."""
    weight_tensors_per_layer: float = 1.0
    """Weight matrices of an average layer on this GPU (``graph.weight_tensors``): the
    collectives of a per-tensor ZeRO-3 per layer gather."""

    @property
    def total(self) -> float:
        return self.dense + self.expert


def stage_params(model: ModelSpec, strategy: Strategy, stage: int) -> StageParams:
    """Parameters held by one GPU of pipeline stage ``stage`` (0-based).

    Memoized for a frozen ``Strategy`` (a pure function of hashable, immutable inputs; the
    estimator asks for the same stage from the memory and the time paths); the bulk search's
    array-valued strategy blocks are computed each time."""
    if type(strategy) is Strategy:
        table = _last_pair.table(model, strategy)  # same objects as the last call: no hashing
        hit = table.get(stage)
        if hit is None:
            hit = table[stage] = _stage_params_memo(model, strategy, stage)
        return hit
    return _stage_params(model, strategy, stage)


_last_pair = LastPairTable()
"""``stage_params`` of the last (model, strategy) objects asked, by stage."""


@lru_cache(maxsize=4096)
def _stage_params_memo(model: ModelSpec, strategy: Strategy, stage: int) -> StageParams:
    return _stage_params(model, strategy, stage)


def _stage_params(model: ModelSpec, strategy: Strategy, stage: int) -> StageParams:
    t = strategy.tp
    layers = strategy_stage_layers(model, strategy)[stage]
    moe_layers = count_moe_layers(model, layers)
    dense_layers = len(layers) - moe_layers

    attn_repl = _attention_replicated(model)
    attn = (P.attention_params(model) - attn_repl) / t + attn_repl
    norms = P.layer_norm_params(model)
    dense_mlp = P.mlp_params(model, model.intermediate_size) / t
    shared = P.shared_expert_params(model) / t
    router = P.router_params(model)
    experts_here = model.num_experts / strategy.ep
    routed = experts_here * P.routed_expert_params(model) / strategy.expert_tp

    last = stage == strategy.pp - 1
    mtp = strategy.mtp_num_layers if last else 0
    # MTP modules (last stage): one transformer layer each, MoE like the model's last layer,
    # plus a column-parallel projection 2h -> h and three norms.
    mtp_moe = mtp if model.is_moe else 0
    moe_layers += mtp_moe
    dense_layers += mtp - mtp_moe
    proj = 2 * model.hidden_size * model.hidden_size / t + 3 * P.norm_params(model)
    dense = (dense_layers * (attn + norms + dense_mlp) + moe_layers * (attn + norms + shared + router)
             + mtp * proj)
    # Embedding and head hold the padded vocabulary (Megatron-LM pads V to divisible_by·tp).
    padding = (P.allocated_vocab_size(model, strategy) - model.vocab_size) * model.hidden_size
    table = (P.embedding_params(model) + padding) / t
    embedding = 0.0
    if stage == 0:
        embedding += table
    if last:
        head = model.vocab_size * model.hidden_size + padding
        own_copy = (not model.tie_word_embeddings) or strategy.pp > 1
        embedding += (head / t if own_copy else 0) + P.norm_params(model)
        if mtp and strategy.pp > 1 and strategy.schedule != "dualpipe":
            # MTP looks up the next tokens' embeddings: a shared copy on the last stage. DualPipe
            # puts the first stage on the same device, so MTP shares its embedding in place
            # (DeepSeek-V3 report §3.2.3, "Shared Embedding and Output Head for MTP").
            embedding += table
    return StageParams(
        stage=stage,
        num_layers=dense_layers + moe_layers,
        num_moe_layers=moe_layers,
        dense=dense + embedding,
        expert=moe_layers * routed,
        embedding=embedding,
        num_mtp_layers=mtp,
        weight_tensors_per_layer=(
            dense_layers * W.dense_layer_weight_matrices(model)
            + moe_layers * W.moe_layer_weight_matrices(model, experts_here)
        ) / max(dense_layers + moe_layers, 1),
    )
