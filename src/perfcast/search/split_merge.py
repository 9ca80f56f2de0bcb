"""Vpps of one pipeline size whose splits give every rank the same kinds of layers: one block.

A framework that states its layer split (Megatron's ``--account-for-embedding/loss-in-pipeline-
split``, a ``--pipeline-model-parallel-layout`` string) moves layers between ranks by vpp
(``specs.pipeline_layout.chunk_layer_counts``), so ``LayoutRules.split_groups`` gives each such
vpp its own group. The bulk evaluation reads a split only through what each rank holds: its
layer count, MoE layer count and BF16-kept layer count (``graph.param_sharding.stage_params``,
``estimate.training.stage_kinds``; vpp itself enters the schedule, memory and DP formulas as an
array). Vpps whose ranks agree in those three counts are therefore scored as one block with a
vpp axis, as the vpps of the default split always were; each vpp keeps its own split for the
strategies the block reports (``StrategyBlock.vpp_options``).

With the embedding and the loss counted as layers every rank holds (L + 2) / pp units for any
vpp that divides them, so the vpps of a pipeline size mostly merge: Llama-3.1-405B on 16,384
H100 scores 2,808 blocks as 1,008 (``benchmarks/search_speed.py``). ``tests/
test_search_split_merge.py`` checks merged blocks against ``estimate_training``.
"""

from __future__ import annotations

from dataclasses import dataclass

from perfcast.graph.param_sharding import count_moe_layers, stage_layer_ranges
from perfcast.search.framework_rules import LayoutRules
from perfcast.specs.model import ModelSpec
from perfcast.specs.pipeline_layout import stage_layer_indices
from perfcast.specs.strategy import Strategy

SplitFields = dict[str, bool | str | None]
"""``LayoutRules.split_fields``: the ``Strategy`` fields of one vpp's split."""


@dataclass(frozen=True)
class SplitGroup:
    """Vpps scored as one block, with each vpp's split and the ranks' layers."""

    vpps: tuple[int, ...]
    splits: tuple[SplitFields, ...]
    """Split fields of each of ``vpps`` (same order)."""
    stage_layers: tuple[tuple[int, ...], ...]
    """Global layer indices per rank under the first vpp's split: every vpp of the group has,
    per rank, as many layers, MoE layers and BF16 layers (``rank_kinds``)."""


def ranks_layers(model: ModelSpec, options: Strategy, pp: int, vpp: int,
                 split: SplitFields) -> tuple[tuple[int, ...], ...]:
    """Global layer indices per rank of ``pp`` stages with ``vpp`` chunks under ``split``
    (``graph.param_sharding.strategy_stage_layers`` of such a strategy)."""
    if not any(split.values()):
        return tuple(tuple(r) for r in stage_layer_ranges(model.num_hidden_layers, pp))
    layout = options.model_copy(update={"pp": pp, "vpp": vpp, **split})
    return tuple(stage_layer_indices(model.num_hidden_layers, layout))


def rank_kinds(model: ModelSpec, options: Strategy,
               layers: tuple[tuple[int, ...], ...]) -> tuple[tuple[int, int, int], ...]:
    """(layers, MoE layers, BF16-kept layers) per rank: all the bulk evaluation reads of a
    split (module docstring)."""
    n = model.num_hidden_layers
    return tuple((len(held), count_moe_layers(model, held),
                  sum(options.bf16_layer(i, n) for i in held)) for held in layers)


def split_groups(model: ModelSpec, options: Strategy, rules: LayoutRules, pp: int,
                 vpps: list[int]) -> list[SplitGroup]:
    """``vpps`` grouped by what their splits put on each rank (``rank_kinds``), groups in
    order of their first vpp, vpps in ``vpps`` order within a group."""
    fields_of = {vpp: fields for fields, members in
                 rules.split_groups(model.num_hidden_layers, pp, vpps) for vpp in members}
    groups: dict[tuple, list[tuple[int, SplitFields, tuple[tuple[int, ...], ...]]]] = {}
    for vpp in vpps:
        layers = ranks_layers(model, options, pp, vpp, fields_of[vpp])
        groups.setdefault(rank_kinds(model, options, layers), []).append(
            (vpp, fields_of[vpp], layers))
    return [SplitGroup(tuple(m[0] for m in members), tuple(m[1] for m in members),
                       members[0][2]) for members in groups.values()]
