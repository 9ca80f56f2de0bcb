"""Operators of one transformer layer for one micro-batch on one GPU, forward and backward.

Shapes follow Megatron-LM tensor parallelism (Shoeybi et al. 2019 §3): QKV and MLP-in are
column-parallel (output split by t), out-projection and MLP-out row-parallel (input split by
t); a layer has two TP all-reduces in forward and two in backward (Korthikanti et al. 2022 §4.2,
with sequence parallelism each becomes an all-gather + reduce-scatter of the same volume).
Context parallelism splits the sequence (``graph.context_parallel``): with the ring or
all-gather each rank computes its s/cp queries against all keys (load-balanced causal chunks);
with Ulysses all-to-alls it computes heads/cp over the whole sequence.
Backward of ``Y = X·W`` is dgrad ``dX = dY·Wᵀ`` (m×k×n) and wgrad ``dW = Xᵀ·dY`` (k×n×m).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from perfcast.arrays import Floats
from perfcast.graph.context_parallel import ContextParallelSplit, context_parallel_comm_ops
from perfcast.graph.fp8_casts import (
    DEEPSEEK_TILE,
    fp8_cast_ops,
    scoped_fp8_ops,
    tp_gather_bytes_per_element,
)
from perfcast.graph.ops import (
    LOW_LATENCY_ALGORITHM,
    AttentionOp,
    Collective,
    CommOp,
    ComputeOp,
    GemmOp,
    Group,
    MemoryOp,
    Op,
    Phase,
)
from perfcast.graph.tensor_parallel_2d import tp2d_comm_ops
from perfcast.op_counts import fused_chain_bytes
from perfcast.specs.dtypes import ACTIVATION_BYTES, BYTES_PER_ELEMENT
from perfcast.specs.model import ModelSpec

ACT_BYTES = ACTIVATION_BYTES


NODE_DEDUP_DISPATCHERS = ("deepep", "hybridep")
"""Training dispatchers that send each token once per destination NVLink domain and forward it
over NVLink (PXN, ``comm.dispatch``): DeepEP and HybridEP cost the same here."""

@dataclass(frozen=True)
class LayerShape:
    """Execution facts of a layer that set operator shapes (one micro-batch, one GPU)."""

    micro_batch: int
    seq_length: Floats
    """Tokens per sequence (a float where serving splits a step's tokens over TP ranks; an
    array where serving tabulates steps of many token counts at once)."""
    tp: int = 1
    tp_rows: int = 1
    """Rows of a 2D TP grid (``graph.tensor_parallel_2d``); 1 = Megatron 1D TP."""
    cp: int = 1
    cp_a2a: int = 1
    """Context-parallel ranks the heads are scattered over by all-to-all (Ulysses; 1 = none)."""
    cp_kv_all_gather: bool = False
    """The K/V exchange is a blocking all-gather (``--cp-comm-type all_gather``)."""
    cp_torch_ring: bool = False
    """PyTorch's ring attention (``--cp-implementation torch``,
    ``graph.torch_context_parallel``): its exchanges and eager merge passes."""
    ep: int = 1
    expert_tp: int = 1
    sequence_parallel: bool = False
    moe: bool = False
    sliding_window: int | None = None
    sliding_window_share: float = 1.0
    """Share of the layers whose attention uses ``sliding_window`` (the rest attend in full):
    ``ModelSpec.sliding_window_layers`` / layers (gpt-oss, Gemma-2 alternate the two kinds)."""
    moe_load_imbalance: float = 1.0
    """Routed tokens at the busiest EP rank over the balanced mean."""
    moe_capacity_factor: float | None = None
    """Expert capacity over the balanced load (tokens beyond it dropped); None = dropless."""
    moe_pad_to_capacity: bool = False
    """Every expert's input padded to its capacity (static shapes)."""
    moe_grouped_gemm: bool = True
    """Local experts as one grouped GEMM; else one GEMM kernel per expert."""
    moe_permute_fusion: bool = True
    """Fused token permute/unpermute kernels (--moe-permute-fusion); else PyTorch ops."""
    moe_router_fusion: bool = True
    """Fused score function, top-k and aux-loss scores (--moe-router-fusion); else PyTorch ops."""
    moe_token_dispatcher: str = "alltoall"
    """'alltoall' (NCCL), 'deepep' / 'hybridep' (deduplicated per NVLink domain, PXN-style;
    ``comm.dispatch``) or 'deepep-low-latency' (pure RDMA, FP8 dispatch; forward only)."""
    moe_regroup_by_expert: bool = False
    """The dispatcher regroups the received all-to-all chunks into local-expert order with a
    copy of its own (``moe_regroup_op``): training's NCCL all-to-all dispatchers."""
    vocab_size_padded: int | None = None
    """Vocabulary rows of the LM head after padding; None = the model's vocab_size."""
    fp8_recipe: str | None = None
    """FP8 scaling recipe of the linear layers; None = 16-bit GEMMs, no casts."""
    fp8_fused_casts: bool = True
    """Input casts fused into the producing norm/activation kernel (``graph.fp8_casts``)."""
    fp8_weight_cache: bool = True
    """FP8 weights cast once per step, not per micro-batch (``graph.fp8_casts``)."""
    fp8_gemm_scope: str = "all"
    """GEMMs the FP8 recipe converts: all, linear (routed experts BF16) or grouped (only the
    routed experts; ``Strategy.fp8_gemm_scope``, ``graph.fp8_casts.scoped_fp8_ops``)."""
    fp8_tp_gather: bool = False
    """Sequence-parallel TP all-gathers carry FP8 (cast on the shard, then gathered;
    ``Strategy.fp8_tp_gather``); only with an ``fp8_recipe``."""
    flash_attention: bool = True
    """Fused attention; False = unfused (``kernels.unfused_attention``)."""
    eager_elementwise: bool = False
    """PyTorch eager element-wise ops, one kernel per op (``graph.eager_elementwise``)."""

    @property
    def routed_load(self) -> float:
        """Tokens at the busiest EP rank over the balanced mean: the imbalance, capped by the
        capacity factor when tokens beyond capacity are dropped (Fedus et al. 2021, Switch
        Transformer §2.2; Megatron-Core --moe-expert-capacity-factor); exactly the capacity
        factor when inputs are padded to capacity (--moe-pad-expert-input-to-capacity: every
        expert computes and exchanges capacity tokens, padding included)."""
        if self.moe_capacity_factor is None:
            return self.moe_load_imbalance
        if self.moe_pad_to_capacity:
            return self.moe_capacity_factor
        return min(self.moe_load_imbalance, self.moe_capacity_factor)

    @property
    def tp_cols(self) -> int:
        """Ranks that split heads and FFN width: tp / rows (tp for 1D TP)."""
        return self.tp // self.tp_rows

    @property
    def cp_split(self) -> ContextParallelSplit:
        return ContextParallelSplit(self.cp, self.cp_a2a, self.cp_kv_all_gather)

    @property
    def tokens(self):
        """Tokens of the micro-batch on this CP rank: b·s/cp."""
        return self.micro_batch * self.seq_length / self.cp


def _qkv_width(model: ModelSpec) -> float:
    if model.is_mla:
        return 0.0
    return (model.num_attention_heads + 2 * model.num_kv_heads) * model.kv_channels


def attention_forward_ops(model: ModelSpec, shape: LayerShape) -> list[Op]:
    """Projections, core attention and attention-side memory-bound ops (forward)."""
    T, t, h, a = shape.tokens, shape.tp, model.hidden_size, model.num_attention_heads
    fwd = Phase.FORWARD
    ops: list[Op] = []
    if model.is_mla:
        nope, rope = model.qk_nope_head_dim or 0, model.qk_rope_head_dim or 0
        v_dim = model.v_head_dim or model.kv_channels
        r_q, r_kv = model.q_lora_rank, model.kv_lora_rank or 0
        if r_q:
            ops.append(GemmOp("q_down_proj", fwd, T, r_q, h, cast_fusable=True))
            ops.append(GemmOp("q_up_proj", fwd, T, a * (nope + rope) / t, r_q, cast_fusable=True))
        else:
            ops.append(GemmOp("q_proj", fwd, T, a * (nope + rope) / t, h, cast_fusable=True))
        # Down-projections read the layer norm's output, up-projections the latent norm's.
        ops.append(GemmOp("kv_down_proj", fwd, T, r_kv + rope, h, cast_fusable=True))
        ops.append(GemmOp("kv_up_proj", fwd, T, a * (nope + v_dim) / t, r_kv, cast_fusable=True))
        d_qk, d_v = nope + rope, v_dim
        out_in = a * v_dim
    else:
        # 2D TP (graph.tensor_parallel_2d): [T, h/r] x [h/r, width/c]; 1D: r = 1, c = t.
        r, c = shape.tp_rows, shape.tp_cols
        ops.append(GemmOp("qkv_proj", fwd, T, _qkv_width(model) / c, h / r, cast_fusable=True,
                          tp_gathered=_gathered("input", shape)))
        d_qk = d_v = model.kv_channels
        out_in = a * model.kv_channels
    # A model that mixes sliding-window and full-attention layers costs, per average layer,
    # ``share`` of a windowed attention and 1 − share of a full one (count = share).
    share = shape.sliding_window_share if shape.sliding_window is not None else 0.0
    ring = shape.cp_split.ring  # a2a ranks split the heads, ring ranks the queries
    for window, count in ((shape.sliding_window, share), (None, 1.0 - share)):
        if count <= 0:
            continue
        ops.append(AttentionOp(
            "attention", fwd, batch=shape.micro_batch,
            heads=a / (shape.tp_cols * shape.cp_a2a),
            seq_q=shape.seq_length / (ring * shape.tp_rows), seq_kv=shape.seq_length,
            head_dim_qk=d_qk, head_dim_v=d_v, causal=True, window=window, count=count,
            balanced_causal_chunks=ring * shape.tp_rows > 1, fused=shape.flash_attention,
            dropout=model.attention_dropout > 0,
        ))
    ops.append(GemmOp("out_proj", fwd, T, h / shape.tp_rows, out_in / shape.tp_cols,
                      tp_gathered=_gathered("grad", shape)))
    if model.position_embedding == "rope":
        rotary_elems = T * (a + model.num_kv_heads) * d_qk / t
        # RoPE (Su et al. 2021) reads and rewrites Q and K in place.
        ops.append(MemoryOp("rotary", fwd, 2 * ACT_BYTES * rotary_elems))
    return ops


def _gathered(operand: str, shape: LayerShape) -> str:
    """``operand`` when sequence-parallel 1D TP all-gathers it before the GEMM
    (``GemmOp.tp_gathered``), else ''."""
    return operand if shape.sequence_parallel and shape.tp > 1 and shape.tp_rows == 1 else ""


def _mlp_ops(model: ModelSpec, tokens, width, prefix: str, batch=1, split=1,
             grouped: bool = True, input_from_norm: bool = True, rows: int = 1,
             routed: bool = False, gathered: tuple[str, str] = ("", "")) -> list[Op]:
    """One MLP of hidden ``width`` on ``tokens`` tokens per expert for ``batch`` experts: one
    grouped GEMM kernel, or (``grouped=False``) ``batch`` separate GEMM kernels.
    ``input_from_norm``: the input is the norm's output (not a permuted copy of it). ``rows``
    splits the hidden dimension (2D TP, ``graph.tensor_parallel_2d``; ``split`` = cols).
    ``routed``: the routed experts' MLP (``GemmOp.routed_expert``). ``gathered``: the
    ``GemmOp.tp_gathered`` operands of the in- and out-projection."""
    h, fwd = model.hidden_size / rows, Phase.FORWARD
    in_width = (2 if model.is_gated_mlp else 1) * width / split
    # Activation kernel: gated reads gate and up, writes the product (3 tensors); else 2.
    act_bytes = ACT_BYTES * tokens * batch * ((3 if model.is_gated_mlp else 2) * width / split)
    group, count = (batch, 1) if grouped else (1, batch)
    return [
        GemmOp(f"{prefix}_in_proj", fwd, tokens, in_width, h, batch=group, count=count,
               cast_fusable=input_from_norm, routed_expert=routed, tp_gathered=gathered[0],
               grouped_kernel=routed and grouped),
        MemoryOp(f"{prefix}_activation", fwd, act_bytes),
        GemmOp(f"{prefix}_out_proj", fwd, tokens, h, width / split, batch=group, count=count,
               cast_fusable=True, routed_expert=routed, tp_gathered=gathered[1],
               grouped_kernel=routed and grouped),
    ]


def mlp_forward_ops(model: ModelSpec, shape: LayerShape) -> list[Op]:
    """Dense MLP, or MoE router + routed experts (grouped GEMM) + shared experts (forward)."""
    T, t = shape.tokens, shape.tp
    if not shape.moe:
        return _mlp_ops(model, T, model.intermediate_size, "mlp", split=shape.tp_cols,
                        rows=shape.tp_rows,
                        gathered=(_gathered("input", shape), _gathered("grad", shape)))
    fwd, h, k = Phase.FORWARD, model.hidden_size, model.num_experts_per_tok
    local_experts = model.num_experts / shape.ep
    # Balanced routing: the expert grid (pp × etp × ep × edp, frameworks.md §1.8) splits the
    # T·k routed tokens of a TP group over its tp/etp expert-TP groups: this GPU's experts
    # receive T·k·etp/tp tokens (split over etp along the expert FFN width), T·k when etp = tp;
    # the busiest rank receives ``routed_load`` times that, and sets the layer's pace.
    routed = T * k * shape.routed_load * shape.expert_tp / t
    tokens_per_expert = routed / local_experts
    E = model.num_experts
    ops: list[Op] = [GemmOp("router", fwd, T, E, h, fp8_eligible=False)]
    # Router score function and top-k over fp32 logits (Megatron-Core TopKRouter: softmax or
    # sigmoid, then top-k): read logits, write scores, read them for top-k (3 × 4 B × T·E).
    ops.append(MemoryOp("router_topk", fwd, 3 * 4 * T * E))
    # Permute and unpermute each read and write the routed copies of every token.
    if not shape.moe_router_fusion:
        ops.append(unfused_router_op(T, E))
    ops.append(MemoryOp("moe_permute", fwd, 2 * 2 * ACT_BYTES * routed * h))
    if not shape.moe_permute_fusion:
        ops.append(unfused_permute_op(routed, h, T, E))
    if shape.moe_regroup_by_expert and shape.ep > 1 and local_experts > 1:
        ops.append(moe_regroup_op(routed, h))
    ops += _mlp_ops(model, tokens_per_expert, model.expert_intermediate_size, ROUTED_EXPERT,
                    batch=local_experts, split=shape.expert_tp, grouped=shape.moe_grouped_gemm,
                    input_from_norm=False, routed=True)
    if model.shared_intermediate_size:
        ops += _mlp_ops(model, T, model.shared_intermediate_size, "shared_expert", split=t)
    return ops


ROUTED_EXPERT = "expert"
"""Name prefix of the routed experts' MLP ops (``_mlp_ops``)."""
ROUTED_EXPERT_ACTIVATION = f"{ROUTED_EXPERT}_activation"
"""Name of the routed experts' activation kernel (its backward adds ``_backward``)."""


UNFUSED_ROUTER_PASSES = 4
"""Element-wise PyTorch kernels over the T×E fp32 scores that Megatron-Core's unfused router
runs beside the fused path's score + top-k (``moe_utils.topk_softmax_with_capacity`` and
``compute_routing_scores_for_aux_loss`` without --moe-router-fusion): the routing-map scatter,
the probability gather/normalisation, and the aux-loss score function and its sum; the fused
path does them inside TE's ``fused_topk_with_score_function`` and
``fused_compute_score_for_moe_aux_loss`` (frameworks.md §1.4 ``--moe-router-fusion``)."""
UNFUSED_PERMUTE_PASSES = 3
"""PyTorch kernels Megatron-Core's unfused permute/unpermute adds to the gather/scatter of
the routed copies (``moe_utils.permute``/``unpermute`` without --moe-permute-fusion): the
sorted-index computation from the routing map, the probability multiply of the routed copies
before the scatter-add, and the expanded-probability gather; TE's ``moe_permute`` /
``moe_unpermute`` fold them into the copy kernels (frameworks.md §1.4 ``--moe-permute-fusion``)."""


def moe_regroup_op(routed, hidden: int) -> MemoryOp:
    """The regrouping copies of an all-to-all dispatch with more than one local expert, 2·2·
    routed·h B (forward; backward mirrors it).

    An all-to-all delivers the routed copies in (source rank, expert) chunks, while the
    grouped GEMM wants them in (expert, source rank) order, and the combine needs the source
    order back: Megatron-Core's ``MoEAlltoAllTokenDispatcher`` runs ``sort_chunks_by_idxs``
    after the dispatch all-to-all and again before the combine whenever
    ``num_local_experts > 1`` (fused or not: a read and a write of every received copy each
    time), beside the permute/unpermute of ``moe_permute``; torchtitan's
    ``ExpertParallel._token_dispatch`` / ``_token_combine`` do the same with ``_permute`` /
    ``_unpermute``. The flex dispatchers (DeepEP, HybridEP) hand the received tokens to a
    single permute into expert order (``moe_permute``): no second copy."""
    return MemoryOp("moe_regroup", Phase.FORWARD, 2 * 2 * ACT_BYTES * routed * hidden)


def unfused_router_op(tokens, num_experts) -> MemoryOp:
    """Extra HBM bytes of the unfused router: ``UNFUSED_ROUTER_PASSES`` kernels that each read
    and write the T×E fp32 scores, 2·4·T·E bytes a kernel (forward; backward mirrors it)."""
    return MemoryOp("router_unfused", Phase.FORWARD, 2 * 4 * tokens * num_experts,
                    count=UNFUSED_ROUTER_PASSES)


def unfused_permute_op(routed, hidden: int, tokens, num_experts) -> MemoryOp:
    """Extra HBM bytes of the unfused permute/unpermute: the probability multiply reads and
    writes the routed copies (2·2·routed·h B) and the index sort reads the T×E routing map
    (1 B each) and writes int64 indices for the routed copies (8 B each); spread over
    ``UNFUSED_PERMUTE_PASSES`` kernels (``MemoryOp.bytes_moved`` is per kernel; forward,
    backward mirrors it)."""
    nbytes = 2 * ACT_BYTES * routed * hidden + tokens * num_experts + 8 * routed
    return MemoryOp("moe_permute_unfused", Phase.FORWARD, nbytes / UNFUSED_PERMUTE_PASSES,
                    count=UNFUSED_PERMUTE_PASSES)


def layer_memory_bound_ops(model: ModelSpec, shape: LayerShape) -> list[Op]:
    """Norms and residual adds (forward), bytes through HBM per element of the hidden state:
    a norm reads and writes it (2·2 B), a residual add reads two and writes one (3·2 B). With
    hidden dropout the dropout is fused into the residual add (Megatron-LM
    ``bias_dropout_add_fused``, on by default; torch.compile fuses it likewise): read two,
    write one and a 1-byte mask (3·2 + 1 B)."""
    T, h = shape.tokens, model.hidden_size
    norm_tokens = T / shape.tp if shape.sequence_parallel else T
    hidden_bytes = ACT_BYTES * norm_tokens * h
    ops: list[Op] = [MemoryOp("norm", Phase.FORWARD, 2 * hidden_bytes, count=model.norms_per_layer)]
    if model.hidden_dropout > 0:
        fused = fused_chain_bytes(2.0, 1.5, norm_tokens * h, ACT_BYTES)  # x, residual -> y, mask
        ops.append(MemoryOp("dropout_add", Phase.FORWARD, fused, count=2))
    else:
        ops.append(MemoryOp("residual_add", Phase.FORWARD, 3 * hidden_bytes, count=2))
    return ops


def layer_comm_ops(model: ModelSpec, shape: LayerShape) -> list[Op]:
    """Collectives of one layer per micro-batch, forward and backward."""
    ops: list[Op] = []
    T, h = shape.tokens, model.hidden_size
    hidden_bytes = ACT_BYTES * T * h
    gather_bytes = tp_gather_bytes_per_element(
        shape.fp8_tp_gather and shape.fp8_recipe is not None) * T * h
    if shape.tp_rows > 1:
        ops += tp2d_comm_ops(model, shape.micro_batch * shape.seq_length, shape.tp_rows,
                             shape.tp_cols)
    elif shape.tp > 1:
        for phase in (Phase.FORWARD, Phase.BACKWARD_DGRAD):
            if shape.sequence_parallel:
                ops.append(CommOp("tp_all_gather", phase, Group.TP, Collective.ALL_GATHER,
                                  gather_bytes, count=2))
                ops.append(CommOp("tp_reduce_scatter", phase, Group.TP,
                                  Collective.REDUCE_SCATTER, hidden_bytes, count=2))
            else:
                ops.append(CommOp("tp_all_reduce", phase, Group.TP, Collective.ALL_REDUCE,
                                  hidden_bytes, count=2))
    if shape.cp_torch_ring:  # PyTorch's ring (imported on first use, like the eager ops)
        from perfcast.graph.torch_context_parallel import torch_ring_comm_ops

        ops += torch_ring_comm_ops(model, T, shape.tp, shape.cp)
    else:
        ops += context_parallel_comm_ops(model, T, shape.tp, shape.cp_split)
    if shape.moe and shape.ep > 1:
        k = model.num_experts_per_tok
        tokens = T / shape.tp if shape.sequence_parallel else T
        # The busiest rank receives routed_load × the balanced volume (and sends it back).
        copies = tokens * k * h * shape.routed_load
        if shape.moe_token_dispatcher == "deepep-low-latency":
            return ops + low_latency_dispatch_ops(copies)
        a2a_bytes = ACT_BYTES * copies
        deepep = shape.moe_token_dispatcher in NODE_DEDUP_DISPATCHERS
        for phase in (Phase.FORWARD, Phase.BACKWARD_DGRAD):
            ops.append(CommOp("ep_all_to_all", phase, Group.EP, Collective.ALL_TO_ALL,
                              a2a_bytes, count=2, algorithm="pxn" if deepep else None,
                              fanout=k if deepep else 1,
                              route_groups=(model.moe_router_num_groups,
                                            model.moe_router_group_topk)))
    return ops


def low_latency_dispatch_ops(copies: float) -> list[CommOp]:
    """DeepEP low-latency dispatch and combine of ``copies`` token-expert elements (tokens ×
    top-k × hidden) in a forward pass: FP8 dispatch with one fp32 scale per 1×128 tile
    (1 + 4/128 B per element) and BF16 combine (2 B), the README's "FP8 dispatch / BF16
    combine" (shared/reference/collectives.md §7; DeepSeek-V3 report §3.3.2 for the tiles).
    Decode-only kernels: there is no backward."""
    dispatch_bytes = (BYTES_PER_ELEMENT["fp8"] + BYTES_PER_ELEMENT["fp32"] / DEEPSEEK_TILE) * copies
    return [CommOp(name, Phase.FORWARD, Group.EP, Collective.ALL_TO_ALL, size,
                   algorithm=LOW_LATENCY_ALGORITHM)
            for name, size in (("ep_dispatch_low_latency", dispatch_bytes),
                               ("ep_combine_low_latency", ACT_BYTES * copies))]


def backward_ops(forward: Sequence[Op]) -> list[ComputeOp]:
    """Backward of forward compute ops: dgrad + wgrad GEMMs, attention backward, and
    memory-bound ops that move about twice the forward bytes (read grad and saved input)."""
    ops: list[ComputeOp] = []
    for op in forward:
        if isinstance(op, GemmOp):
            ops.append(GemmOp(op.name + "_dgrad", Phase.BACKWARD_DGRAD, op.m, op.k, op.n,
                              op.batch, op.count, op.fp8_eligible,
                              routed_expert=op.routed_expert,
                              grouped_kernel=op.grouped_kernel))
            ops.append(GemmOp(op.name + "_wgrad", Phase.BACKWARD_WGRAD, op.k, op.n, op.m,
                              op.batch, op.count, op.fp8_eligible,
                              routed_expert=op.routed_expert,
                              grouped_kernel=op.grouped_kernel))
        elif isinstance(op, AttentionOp):
            ops.append(AttentionOp(
                op.name + "_backward", Phase.BACKWARD_DGRAD, op.batch, op.heads, op.seq_q,
                op.seq_kv, op.head_dim_qk, op.head_dim_v, op.causal, op.window, op.count,
                op.balanced_causal_chunks, op.fused, op.dropout,
            ))
        elif isinstance(op, MemoryOp):
            ops.append(MemoryOp(op.name + "_backward", Phase.BACKWARD_DGRAD,
                                2 * op.bytes_moved, op.count))
    return ops


def layer_ops(model: ModelSpec, shape: LayerShape) -> tuple[list[ComputeOp], list[CommOp]]:
    """All compute ops (forward then backward) and collectives of one layer, one micro-batch,
    with the FP8 cast/scale kernels of the strategy's recipe (``graph.fp8_casts``)."""
    forward = (attention_forward_ops(model, shape) + mlp_forward_ops(model, shape)
               + layer_memory_bound_ops(model, shape))
    if shape.eager_elementwise:  # eager PyTorch only (imported on first use)
        from perfcast.graph.eager_elementwise import eager_elementwise_ops

        norm_tokens = shape.tokens / shape.tp if shape.sequence_parallel else shape.tokens
        forward += eager_elementwise_ops(model, shape.tokens, norm_tokens, shape.tp, shape.moe)
    forward = scoped_fp8_ops(forward, shape.fp8_gemm_scope)
    casts = fp8_cast_ops(forward, shape.fp8_recipe, shape.fp8_fused_casts, shape.fp8_weight_cache,
                         tp_gather=shape.tp if shape.fp8_tp_gather else 1)
    compute = [op for op in forward + backward_ops(forward) + casts if not isinstance(op, CommOp)]
    if shape.cp_torch_ring:
        from perfcast.graph.torch_context_parallel import torch_ring_memory_ops

        compute += torch_ring_memory_ops(model, shape.tokens, shape.tp, shape.cp)
    comm = [op for op in layer_comm_ops(model, shape) if isinstance(op, CommOp)]
    return compute, comm
