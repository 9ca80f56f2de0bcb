"""Context parallelism as PyTorch runs it (``--cp-implementation torch``, torchtitan's CP).

torchtitan's context parallelism is PyTorch's ring attention,
``torch.distributed.tensor.experimental.context_parallel`` (frameworks.md §3, TT2 L446-452).
What it does per layer and micro-batch is read from ``torch/distributed/tensor/experimental/
_attention.py`` of the torch 2.6.0 release (git 2236df17, the release cut beside torchtitan's
December-2024 benchmarks); "L" numbers below are that file's lines. On a ring of P = cp ranks,
each holding b·s/cp tokens in two round-robin chunks (``_RoundRobinLoadBalancer``, L1144):

- **K/V of the query heads.** torchtitan's attention repeats the K/V heads to the query heads
  before ``F.scaled_dot_product_attention`` (``repeat_kv`` in torchtitan's Llama ``Attention``;
  SDPA's flash backend takes equal head counts), so what the ring exchanges is a·(d_qk + d_v)
  per token per TP rank, not kv·(d_qk + d_v).
- **One all-gather, waited for at the second step.** ``_ContextParallelOptions.rotate_method``
  defaults to ``ALL_GATHER`` (L53-59; torchtitan ``context_parallel_rotate_method`` default
  ``allgather``). ``_AllGatherRotater`` (L301-328) gathers every rank's K/V when step 0 starts
  and ``next_buffer`` waits for it at step 1: the gather runs under step 0's attention only,
  1/P of the rank's attention (the load balancer gives every step the same work: Note
  "Context parallelism load balance algorithm for causal masking", L371-433, L495-515).
  The backward gathers K/V again the same way (``kv_rotater``, L639).
- **dK/dV in fp32 round the ring.** The backward accumulates dK/dV in fp32 (``accum_dtype``,
  L632) and sends them to the next rank at every one of the P steps (``dkv_rotater``, an
  ``ALL_TO_ALL`` permute, L640, L747): P point-to-point sends of 4 B·tokens·a·(d_qk + d_v)/t,
  each running under the next step's attention backward.
- **Merges by eager element-wise ops** (memory-bound passes; ``merge_forward_bytes`` and
  ``merge_backward_bytes`` count them).

Array-friendly in ``tokens`` and ``ring``.
"""

from __future__ import annotations

from perfcast.graph.ops import Collective, CommOp, Group, MemoryOp, Phase
from perfcast.specs.dtypes import ACTIVATION_BYTES
from perfcast.specs.model import ModelSpec

ACT_BYTES = ACTIVATION_BYTES
FP32_BYTES = 4.0
"""``_cp_options.convert_to_f32`` is True (L57): merges and dK/dV accumulators are fp32."""

CAST_UP_BYTES = ACT_BYTES + FP32_BYTES
"""``out.to(torch.float32)``: read 2 B, write 4 B per element (``_SDPAMerger.step``, L179-187)."""
MERGE_FULL_BYTES = 3 * FP32_BYTES + 2 * FP32_BYTES + 3 * FP32_BYTES
"""``_merge_one`` (L131-177) on a full chunk, per output element: ``out - block_out`` (read 2,
write 1 fp32), ``sigmoid(Δlse) * (...)`` (read 1, write 1), ``out - (...)`` (read 2, write 1)."""
MERGE_PARTIAL_BYTES = MERGE_FULL_BYTES / 2 + 2 * FP32_BYTES
"""The partial case (i > rank: only the second half of the queries, L509-514): the three
passes over half the elements, then ``_partial_update`` rebuilds the whole tensor with
``torch.cat`` (read 1, write 1 fp32 per element, L95-117)."""
PARTIAL_SHARE = 0.5
"""Share of a rank's steps i ≥ 1 that are partial (i > rank): the mean of i/P over
i = 1..P−1 is 1/2, exactly, for every P."""
CAST_DOWN_BYTES = FP32_BYTES + ACT_BYTES
"""``.to(out_dtype)`` of an fp32 accumulator: read 4 B, write 2 B per element."""
CONCAT_BF16_BYTES = 2 * ACT_BYTES
"""``torch.cat([key.flatten(), value.flatten()])`` before every step but the last (L482,
L653): read and write 2 B per K and V element."""
ACCUMULATE_BYTES = 2 * FP32_BYTES + ACT_BYTES
"""``grad += grad_`` into an fp32 accumulator: read 4 + 2 B, write 4 B per element."""
PARTIAL_ACCUMULATE_BYTES = ACCUMULATE_BYTES / 2 + 2 * FP32_BYTES
"""``_partial_update(..., add=True)``: the add on half the elements, then ``torch.cat`` of the
whole fp32 tensor (read + write 4 B)."""
CONCAT_FP32_BYTES = 2 * FP32_BYTES
"""``torch.cat([grad_key.flatten(), grad_value.flatten()])`` every step (L745): 4 B read and
written per dK and dV element."""


def repeated_kv_width(model: ModelSpec, tp: int) -> float:
    """Elements per token per TP rank of K and V after ``repeat_kv``: a·(d_qk + d_v)/t."""
    return model.num_attention_heads * 2 * model.kv_channels / tp


def _mean_steps(ring, full_bytes: float, partial_bytes: float):
    """Bytes of the P − 1 steps after the first, half of them partial (``PARTIAL_SHARE``)."""
    return (ring - 1) * ((1 - PARTIAL_SHARE) * full_bytes + PARTIAL_SHARE * partial_bytes)


def merge_forward_bytes(q_elements, kv_elements, ring):
    """HBM bytes of the forward's eager ops besides the attention kernels (module docstring):
    every step's output cast to fp32, the P − 1 merges, the final cast back, and the K/V
    concatenation before each of the first P − 1 steps. ``q_elements`` = tokens·a·d/t (the
    output has as many), ``kv_elements`` = tokens·a·(d_qk + d_v)/t."""
    return (q_elements * (ring * CAST_UP_BYTES + CAST_DOWN_BYTES
                          + _mean_steps(ring, MERGE_FULL_BYTES, MERGE_PARTIAL_BYTES))
            + kv_elements * (ring - 1) * CONCAT_BF16_BYTES)


def merge_backward_bytes(q_elements, kv_elements, ring):
    """HBM bytes of the backward's eager ops (``_templated_ring_attention_backward``,
    L606-772): fp32 zero accumulators for dQ, dK, dV; dK/dV added at step 0, then added to
    the received buffer (partially when i ≤ rank) and concatenated for the send at every step;
    dQ added every step (partially when i > rank); K/V concatenated before each of the first
    P − 1 steps; dQ, dK, dV cast back to 16 bits at the end."""
    zeros = FP32_BYTES * (q_elements + kv_elements)
    dkv = kv_elements * (ACCUMULATE_BYTES + ring * CONCAT_FP32_BYTES + CAST_DOWN_BYTES
                         + (ring - 1) * CONCAT_BF16_BYTES
                         + _mean_steps(ring, PARTIAL_ACCUMULATE_BYTES, ACCUMULATE_BYTES))
    dq = q_elements * (ACCUMULATE_BYTES + CAST_DOWN_BYTES
                       + _mean_steps(ring, ACCUMULATE_BYTES, PARTIAL_ACCUMULATE_BYTES))
    return zeros + dkv + dq


def torch_ring_memory_ops(model: ModelSpec, tokens, tp: int, ring) -> list[MemoryOp]:
    """The merge and accumulate passes of one layer, one micro-batch (forward, backward);
    ``tokens`` = b·s/cp on the rank."""
    q_elements = tokens * model.num_attention_heads * model.kv_channels / tp
    kv_elements = tokens * repeated_kv_width(model, tp)
    return [MemoryOp("cp_softmax_merge", Phase.FORWARD,
                     merge_forward_bytes(q_elements, kv_elements, ring)),
            MemoryOp("cp_grad_accumulate", Phase.BACKWARD_DGRAD,
                     merge_backward_bytes(q_elements, kv_elements, ring))]


def torch_ring_comm_ops(model: ModelSpec, tokens, tp: int, ring) -> list[CommOp]:
    """Collectives of one layer, one micro-batch (module docstring): the K/V all-gather of
    the forward and again of the backward (buffer = P chunks of 2 B·tokens·a·(d_qk + d_v)/t,
    overlapping the first ring step only), and P sends of the fp32 dK/dV chunk."""
    chunk = tokens * repeated_kv_width(model, tp)
    gathered = ACT_BYTES * chunk * ring
    return [
        CommOp("cp_kv_all_gather", Phase.FORWARD, Group.CP_RING, Collective.ALL_GATHER,
               gathered, overlappable=True, first_ring_step_only=True),
        CommOp("cp_kv_all_gather_backward", Phase.BACKWARD_DGRAD, Group.CP_RING,
               Collective.ALL_GATHER, gathered, overlappable=True, first_ring_step_only=True),
        CommOp("cp_dkv_send", Phase.BACKWARD_DGRAD, Group.CP_RING, Collective.SEND_RECV,
               FP32_BYTES * chunk, count=ring, overlappable=True),
    ]


def torch_ring_buffer_bytes(model: ModelSpec, tokens, tp: int, ring):
    """Transient bytes per GPU of one layer's ring attention backward, its peak: the gathered
    K/V of all P ranks (2 B·tokens·P·a·(d_qk + d_v)/t, ``_AllGatherRotater``), the fp32 dQ,
    dK, dV accumulators (``torch.zeros_like(..., dtype=accum_dtype)``, L633-635) and the
    fp32 dK/dV being sent and received (``next_grad_kv``, L745-747)."""
    q_width = model.num_attention_heads * model.kv_channels / tp
    kv_width = repeated_kv_width(model, tp)
    gathered = ACT_BYTES * tokens * ring * kv_width
    return gathered + FP32_BYTES * tokens * (q_width + 3 * kv_width)
