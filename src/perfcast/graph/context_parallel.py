"""Context-parallel attention: how each ``--cp-comm-type`` splits the work and what it sends.

Megatron-Core runs context parallelism inside Transformer Engine's attention
(``attn_forward_func_with_cp``; Megatron-Core docs, "context_parallel" package guide) with four
communication types (Megatron-LM ``--cp-comm-type``):

- ``p2p``: each rank keeps its s/cp queries (two load-balanced causal chunks) and the K/V chunks
  pass round a ring of cp ranks, each step's send/receive overlapped with the attention of the
  chunk already received (Liu et al. 2023, Ring Attention §3). Volume per rank: the K/V of the
  other cp − 1 chunks, the same as an all-gather of the sequence's K/V, which is how it is
  timed (forward). The forward saves only the rank's own K/V chunk, so the backward passes the
  K/V round the ring again, together with the dK/dV accumulators (Transformer Engine
  ``AttnFuncWithCPAndKVP2P.backward``: each step sends a buffer of shape (2, *kv.shape), K/V
  and dK/dV): a second K/V all-gather and a dK/dV reduce-scatter in the backward.
- ``all_gather``: the same K/V all-gather, issued before the attention and waited for (Megatron
  help: "the all-gather is not async, and cannot be overlapped"); the backward gathers the K/V
  again (only the local chunk is saved, ``AttnFuncWithCPAndKVAllGather.backward``) and
  reduce-scatters dK/dV after the attention backward, also exposed.
- ``a2a`` (DeepSpeed-Ulysses, Jacobs et al. 2023, arXiv:2309.14509 §3.1): an all-to-all turns
  each of q, k, v from [s/cp tokens, all heads] into [s tokens, heads/cp], the attention runs on
  the whole sequence for its heads, and a fourth all-to-all returns the output: four
  all-to-alls per layer forward of b·(s/cp)·width bytes per rank each (width = heads·head_dim
  of q, k, v, out, per TP rank; h for each with MHA, Jacobs et al.'s s·h/cp), and four in
  backward (dout in; dq, dk, dv back). They sit between the QKV projection, the attention and
  the out-projection, so they are exposed like TP collectives. Heads and KV heads per TP rank
  must divide by cp (Transformer Engine asserts both; ``specs.compat``).
- ``a2a+p2p`` (hierarchical; Megatron ``--hierarchical-context-parallel-sizes A P``): a2a over
  the inner A ranks (heads/A, sequence gathered over A), then the ring over the outer P = cp/A
  ranks on those heads.

So with A ranks of all-to-all and P = cp/A of ring, a rank's attention has heads a/(t·A),
s/P queries per sequence against s keys, load-balanced causal chunks when P > 1. The causal
work per rank is 1/cp of the layer's for every type.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from perfcast.graph.ops import Collective, CommOp, Group, Phase
from perfcast.specs.dtypes import ACTIVATION_BYTES
from perfcast.specs.model import ModelSpec

ACT_BYTES = ACTIVATION_BYTES


@dataclass(frozen=True)
class ContextParallelSplit:
    """How one rank's attention is cut by context parallelism (array-friendly sizes)."""

    cp: int
    a2a: int = 1
    """Ranks the heads are scattered over by all-to-all (1 = ring or all-gather only)."""
    kv_all_gather: bool = False
    """The K/V exchange is a blocking all-gather (``all_gather``), not the overlapped ring."""

    @property
    def ring(self):
        """Ranks the K/V exchange spans: P = cp / A."""
        return self.cp // self.a2a


@dataclass(frozen=True)
class HeadWidths:
    """Elements per token per TP rank of q, k, v and the attention output (before any a2a)."""

    q: float
    k: float
    v: float
    out: float


def head_widths(model: ModelSpec, tp: int) -> HeadWidths:
    """q, k, v, out widths per token per TP rank: a·d_qk, kv·d_qk, kv·d_v, a·d_v over t. MLA's
    K/V are per head after the up-projection (kv heads = heads; DeepSeek-V2 §2.1)."""
    a = model.num_attention_heads
    if model.is_mla:
        d_qk = (model.qk_nope_head_dim or 0) + (model.qk_rope_head_dim or 0)
        d_v = model.v_head_dim or model.kv_channels
        kv = a
    else:
        d_qk = d_v = model.kv_channels
        kv = model.num_kv_heads
    return HeadWidths(q=a * d_qk / tp, k=kv * d_qk / tp, v=kv * d_v / tp, out=a * d_v / tp)


def ring_kv_width(model: ModelSpec, tp: int, a2a: int) -> float:
    """Elements per token of the K/V the ring (or all-gather) exchanges, per rank: 2·kv·d/t for
    GQA/MHA (K and V), MLA's compressed latent + RoPE key (kv_lora_rank + d_rope, not split by
    TP), over the a2a ranks that already split the heads."""
    if model.is_mla:
        return ((model.kv_lora_rank or 0) + (model.qk_rope_head_dim or 0)) / a2a
    return 2 * model.num_kv_heads * model.kv_channels / tp / a2a


def ulysses_a2a_bytes(model: ModelSpec, tokens, tp: int) -> HeadWidths:
    """Per-rank buffer bytes of the four DeepSpeed-Ulysses all-to-alls of one layer's forward
    (Jacobs et al. 2023 §3.1): 2 B · tokens · width of q, k, v and out; ``tokens`` = b·s/cp on
    the rank. Each all-to-all sends (A−1)/A of its buffer (``comm``)."""
    w = head_widths(model, tp)
    return HeadWidths(q=ACT_BYTES * tokens * w.q, k=ACT_BYTES * tokens * w.k,
                      v=ACT_BYTES * tokens * w.v, out=ACT_BYTES * tokens * w.out)


def context_parallel_comm_ops(model: ModelSpec, tokens, tp: int,
                              split: ContextParallelSplit) -> list[CommOp]:
    """Collectives of the context-parallel attention of one layer, one micro-batch (module
    docstring): Ulysses all-to-alls on the inner group (``Group.CP_A2A``) when A > 1, the K/V
    all-gathers (forward, and again in backward) / dK/dV reduce-scatter on the ring group
    (``Group.CP_RING``) when P > 1,
    overlapped with attention for the ring (``p2p``), exposed for ``all_gather``."""
    ops: list[CommOp] = []
    if split.cp <= 1:
        return ops
    if split.a2a > 1:
        b = ulysses_a2a_bytes(model, tokens, tp)
        a2a = Collective.ALL_TO_ALL
        fwd, bwd = Phase.FORWARD, Phase.BACKWARD_DGRAD
        ops += [CommOp("cp_a2a_q", fwd, Group.CP_A2A, a2a, b.q),
                CommOp("cp_a2a_k", fwd, Group.CP_A2A, a2a, b.k),
                CommOp("cp_a2a_v", fwd, Group.CP_A2A, a2a, b.v),
                CommOp("cp_a2a_out", fwd, Group.CP_A2A, a2a, b.out),
                CommOp("cp_a2a_dout", bwd, Group.CP_A2A, a2a, b.out),
                CommOp("cp_a2a_dq", bwd, Group.CP_A2A, a2a, b.q),
                CommOp("cp_a2a_dk", bwd, Group.CP_A2A, a2a, b.k),
                CommOp("cp_a2a_dv", bwd, Group.CP_A2A, a2a, b.v)]
    if split.ring > 1:
        kv_bytes = ACT_BYTES * tokens * split.cp * ring_kv_width(model, tp, split.a2a)
        ring = not split.kv_all_gather
        ops.append(CommOp("cp_kv_all_gather", Phase.FORWARD, Group.CP_RING,
                          Collective.ALL_GATHER, kv_bytes, overlappable=ring))
        ops.append(CommOp("cp_kv_all_gather_backward", Phase.BACKWARD_DGRAD, Group.CP_RING,
                          Collective.ALL_GATHER, kv_bytes, overlappable=ring))
        ops.append(CommOp("cp_dkv_reduce_scatter", Phase.BACKWARD_DGRAD, Group.CP_RING,
                          Collective.REDUCE_SCATTER, kv_bytes, overlappable=ring))
    return ops


def cp_comm_buffer_bytes(model: ModelSpec, tokens, tp: int, cp, a2a, kv_all_gather):
    """Transient bytes per GPU of the context-parallel exchange of one layer's attention (the
    stored activations are those of the ring: a rank keeps its own tokens' q, k, v and output
    under every type, Ulysses' gathered-sequence slices having the same size):

    - all-to-all level (A > 1): the received q, k, v copies, 2 B · tokens · (q + k + v) widths
      (Transformer Engine's a2a is out of place; the output a2a reuses the freed space);
    - ring level (P = cp/A > 1): K/V chunks of 2 B · tokens · ``ring_kv_width`` each, two of them
      for the ring (the chunk in use and the one arriving, TE's double buffer), all P for the
      all-gather (the whole sequence's K/V at once).

    ``tokens`` = b·s/cp. Array-friendly in ``cp``, ``a2a`` and ``kv_all_gather``."""
    w = head_widths(model, tp)
    ring = cp // a2a
    a2a_bytes = np.where(a2a > 1, ACT_BYTES * tokens * (w.q + w.k + w.v), 0.0)
    chunk = ACT_BYTES * tokens * ring_kv_width(model, tp, a2a)
    chunks = np.where(kv_all_gather, ring, 2)
    ring_bytes = np.where(ring > 1, chunk * chunks, 0.0)
    total = a2a_bytes + ring_bytes
    return float(total) if total.ndim == 0 else total
