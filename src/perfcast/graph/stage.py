"""The operator graph of one pipeline stage for one micro-batch on one GPU.

A stage holds its layers (dense and MoE kinds, each with its per-layer ops), plus the
embedding lookup on the first stage and the LM head + cross-entropy on the last
(Narayanan et al. 2021 §2; the head GEMM is vocabulary-parallel over TP).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import lru_cache

from perfcast.calibration.moe_routing import load_moe_routing
from perfcast.errors import InputError
from perfcast.graph.fp8_casts import fp8_cast_ops
from perfcast.graph.layer import ACT_BYTES, LayerShape, backward_ops, layer_ops
from perfcast.graph.op_sac import OpShare, op_sac_gemm_shares
from perfcast.graph.ops import CommOp, ComputeOp, GemmOp, MemoryOp, Phase
from perfcast.graph.param_sharding import is_moe_layer, strategy_stage_layers
from perfcast.graph.params import allocated_vocab_size
from perfcast.memo import LastPairTable
from perfcast.specs.model import ModelSpec
from perfcast.specs.strategy import Strategy


@dataclass(frozen=True)
class LayerGroup:
    """``count`` identical layers of this stage with their per-micro-batch ops."""

    count: int
    moe: bool
    compute: tuple[ComputeOp, ...]
    comm: tuple[CommOp, ...]
    op_sac_shares: tuple[OpShare, ...] = ()
    """Recomputed share of each GEMM under torchtitan per-op SAC (``graph.op_sac``)."""


@dataclass(frozen=True)
class StageGraph:
    stage: int
    layers: tuple[LayerGroup, ...]
    extra_compute: tuple[ComputeOp, ...]
    """Embedding, LM head, loss: per micro-batch, not recomputed."""

    @property
    def num_layers(self) -> int:
        return sum(group.count for group in self.layers)


def head_ops(model: ModelSpec, shape: LayerShape) -> list[ComputeOp]:
    """Final norm, LM head GEMM (vocab-parallel, not FP8) and fp32 cross-entropy."""
    T, h, t = shape.tokens, model.hidden_size, shape.tp
    V = shape.vocab_size_padded or model.vocab_size
    forward: list[ComputeOp] = [
        MemoryOp("final_norm", Phase.FORWARD, 2 * ACT_BYTES * T * h),
        GemmOp("lm_head", Phase.FORWARD, T, V / t, h, fp8_eligible=False),
        # Cross-entropy over fp32 logits: write, read for max/sum, write gradient (4 B each).
        MemoryOp("cross_entropy", Phase.FORWARD, 3 * 4 * T * V / t),
    ]
    return forward + backward_ops(forward)


def embedding_ops(model: ModelSpec, shape: LayerShape) -> list[ComputeOp]:
    """Embedding gather (forward) and scatter-add of its gradient (backward)."""
    bytes_moved = 2 * ACT_BYTES * shape.tokens * model.hidden_size
    return [MemoryOp("embedding", Phase.FORWARD, bytes_moved),
            MemoryOp("embedding_backward", Phase.BACKWARD_WGRAD, 2 * bytes_moved)]


def mtp_extra_ops(model: ModelSpec, shape: LayerShape) -> list[ComputeOp]:
    """One MTP module besides its transformer layer (DeepSeek-V3 report §2.2, Eq. 21-23):
    embedding lookup of the shifted tokens, two RMSNorms, the projection [h; emb] -> h, and
    its own pass through the shared output head and cross-entropy."""
    T, h = shape.tokens, model.hidden_size
    norms = MemoryOp("mtp_norms", Phase.FORWARD, 2 * ACT_BYTES * T * h, count=2)
    proj = GemmOp("mtp_proj", Phase.FORWARD, T, h / shape.tp, 2 * h)
    forward: list[ComputeOp] = [norms, proj]
    casts = fp8_cast_ops(forward, shape.fp8_recipe, shape.fp8_fused_casts, shape.fp8_weight_cache)
    return (embedding_ops(model, shape) + forward + backward_ops(forward) + casts
            + head_ops(model, shape))


def sliding_window_share(model: ModelSpec) -> float:
    """Share of layers with sliding-window attention: ``sliding_window_layers`` / layers (all
    when the model sets a window without a count). Exact per stage when each stage holds the
    model's mix (alternating layers and an even layer count per stage)."""
    if model.sliding_window is None or model.sliding_window_layers is None:
        return 1.0
    return model.sliding_window_layers / model.num_hidden_layers


def learned_imbalance_applies(strategy: Strategy) -> bool:
    """True when no input states the imbalance: EP > 1, the learned router, none stated."""
    return (strategy.ep > 1 and strategy.moe_load_imbalance is None
            and not getattr(strategy, "moe_router_force_load_balancing", False))


def with_learned_imbalance(strategy: Strategy, learned: float) -> Strategy:
    """``strategy`` stating ``learned`` (a calibration's dropless imbalance,
    ``Calibration.routing``) where no input states one; else ``strategy`` itself."""
    if not learned_imbalance_applies(strategy):
        return strategy
    return strategy.model_copy(update={"moe_load_imbalance": learned})


def moe_load_imbalance(strategy: Strategy) -> float:
    """Routed tokens at the busiest EP rank over the balanced mean: 1 under forced load
    balancing (random router logits, frameworks.md §1.4 ``--moe-router-force-load-balancing``)
    or without expert parallelism (one rank holds every expert); the stated value; else the
    measured imbalance of dropless routing with a learned router (``calibration/
    moe_routing.yaml``: forced-balance vs real-routing pairs of the same runs; the shipped
    file here, a user's calibration via ``with_learned_imbalance`` in the estimator). A
    capacity factor caps it downstream (``LayerShape.routed_load``)."""
    if getattr(strategy, "moe_router_force_load_balancing", False) or strategy.ep == 1:
        return 1.0
    if strategy.moe_load_imbalance is not None:
        return strategy.moe_load_imbalance
    return load_moe_routing().dropless_load_imbalance.value


def layer_shape(model: ModelSpec, strategy: Strategy, seq_length: int, moe: bool) -> LayerShape:
    return LayerShape(
        micro_batch=strategy.micro_batch_size, seq_length=seq_length, tp=strategy.tp,
        tp_rows=getattr(strategy, "tp2d_rows", 1),
        cp=strategy.cp, cp_a2a=strategy.cp_a2a_size, cp_kv_all_gather=strategy.cp_kv_all_gather,
        cp_torch_ring=getattr(strategy, "cp_torch_ring", False),
        ep=strategy.ep, expert_tp=strategy.expert_tp,
        sequence_parallel=strategy.sequence_parallel, moe=moe,
        sliding_window=model.sliding_window, sliding_window_share=sliding_window_share(model),
        moe_load_imbalance=moe_load_imbalance(strategy),
        moe_capacity_factor=strategy.moe_capacity_factor,
        moe_pad_to_capacity=getattr(strategy, "moe_pad_expert_input_to_capacity", False),
        moe_grouped_gemm=strategy.moe_grouped_gemm,
        moe_permute_fusion=strategy.moe_permute_fusion,
        moe_router_fusion=strategy.moe_router_fusion,
        moe_token_dispatcher=strategy.moe_token_dispatcher,
        moe_regroup_by_expert=strategy.moe_token_dispatcher == "alltoall",
        vocab_size_padded=allocated_vocab_size(model, strategy),
        fp8_recipe=strategy.fp8_recipe if strategy.precision == "fp8" else None,
        fp8_fused_casts=strategy.fp8_fused_casts, fp8_weight_cache=strategy.fp8_weight_cache,
        fp8_gemm_scope=strategy.fp8_gemm_scope,
        fp8_tp_gather=getattr(strategy, "fp8_tp_gather", False) and strategy.precision == "fp8",
        flash_attention=strategy.flash_attention,
        eager_elementwise=strategy.eager_elementwise,
    )


def stage_graph(model: ModelSpec, strategy: Strategy, seq_length: int, stage: int) -> StageGraph:
    """Ops of pipeline stage ``stage`` for one micro-batch.

    Memoized for a frozen ``Strategy`` and an integer sequence length: the graph is a pure,
    immutable function of them (frozen dataclasses of tuples)."""
    if type(strategy) is Strategy and type(seq_length) is int:
        table = _last_pair.table(model, strategy)  # same objects as the last call: no hashing
        hit = table.get((seq_length, stage))
        if hit is None:
            hit = table[(seq_length, stage)] = _stage_graph_memo(model, strategy, seq_length,
                                                                 stage)
        return hit
    return _stage_graph(model, strategy, seq_length, stage)


_last_pair = LastPairTable()
"""``stage_graph`` of the last (model, strategy) objects asked, by (sequence length, stage)."""


@lru_cache(maxsize=1024)
def _stage_graph_memo(model: ModelSpec, strategy: Strategy, seq_length: int,
                      stage: int) -> StageGraph:
    return _stage_graph(model, strategy, seq_length, stage)


def bf16_layer_ops(compute: list[ComputeOp]) -> list[ComputeOp]:
    """A layer's ops with its GEMMs kept in BF16 (``fp8_eligible=False``); built from a shape
    without an FP8 recipe, so it has no quantize kernels either."""
    return [replace(op, fp8_eligible=False) if isinstance(op, GemmOp) else op for op in compute]


def _layer_classes(model: ModelSpec, strategy: Strategy, layers: Sequence[int],
                   mtp: int) -> Counter[tuple[bool, bool]]:
    """Layers of a stage per (MoE, BF16 under an FP8 recipe) class; the stage's MTP layers
    count as the model's kind and in the low-precision recipe."""
    total = model.num_hidden_layers
    kept = strategy.num_layers_at_start_in_bf16 + strategy.num_layers_at_end_in_bf16
    if kept > total:
        raise InputError("num_layers_at_start_in_bf16 + num_layers_at_end_in_bf16", kept,
                         f"exceeds the model's {total} decoder layers")
    bf16 = strategy.precision == "fp8" and (strategy.num_layers_at_start_in_bf16
                                            or strategy.num_layers_at_end_in_bf16)
    classes: Counter[tuple[bool, bool]] = Counter()
    if not model.is_moe and not bf16:
        classes[(False, False)] = len(layers)
    else:
        for i in layers:
            classes[(is_moe_layer(model, i), bool(bf16) and strategy.bf16_layer(i, total))] += 1
    classes[(model.is_moe, False)] += mtp
    return classes


def _layer_parts(model: ModelSpec, shape: LayerShape, moe: bool, bf16: bool
                 ) -> tuple[tuple[ComputeOp, ...], tuple[CommOp, ...], tuple[OpShare, ...]]:
    """A layer group's compute ops, collectives and op-SAC shares. Memoized for hashable
    shapes, so the stages of one strategy hold the same tuples for the same kind of layer
    (``schedule.stage_time`` then times it once by identity); the bulk search's array-valued
    shapes are built each time."""
    try:
        return _layer_parts_memo(model, shape, moe, bf16)
    except TypeError:  # unhashable (numpy-array) shape fields
        return _build_layer_parts(model, shape, moe, bf16)


@lru_cache(maxsize=1024)
def _layer_parts_memo(model: ModelSpec, shape: LayerShape, moe: bool, bf16: bool
                      ) -> tuple[tuple[ComputeOp, ...], tuple[CommOp, ...], tuple[OpShare, ...]]:
    return _build_layer_parts(model, shape, moe, bf16)


def _build_layer_parts(model: ModelSpec, shape: LayerShape, moe: bool, bf16: bool
                       ) -> tuple[tuple[ComputeOp, ...], tuple[CommOp, ...], tuple[OpShare, ...]]:
    if bf16:
        compute, comm = layer_ops(model, replace(shape, fp8_recipe=None))
        compute = bf16_layer_ops(compute)
    else:
        compute, comm = layer_ops(model, shape)
    return tuple(compute), tuple(comm), op_sac_gemm_shares(model, moe)


def _stage_graph(model: ModelSpec, strategy: Strategy, seq_length: int, stage: int) -> StageGraph:
    last = stage == strategy.pp - 1
    mtp = strategy.mtp_num_layers if last else 0
    classes = _layer_classes(model, strategy, strategy_stage_layers(model, strategy)[stage], mtp)
    groups = []
    for (moe, bf16), count in sorted(classes.items()):
        if count == 0:
            continue
        shape = layer_shape(model, strategy, seq_length, moe)
        groups.append(LayerGroup(count, moe, *_layer_parts(model, shape, moe, bf16)))
    shape = layer_shape(model, strategy, seq_length, False)
    extra: list[ComputeOp] = []
    if stage == 0:
        extra += embedding_ops(model, shape)
    if last:
        extra += head_ops(model, shape)
    for _ in range(mtp):
        extra += mtp_extra_ops(model, shape)
    return StageGraph(stage=stage, layers=tuple(groups), extra_compute=tuple(extra))
