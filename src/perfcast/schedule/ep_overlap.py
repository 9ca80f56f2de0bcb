"""Exposed EP all-to-all of one MoE layer when another micro-batch's compute hides it.

Megatron-Core's ``--overlap-moe-expert-parallel-comm`` (the ``combined_1f1b`` schedule) and
DeepSeek-V3's DualPipe (§3.2.1, Figure 4) pair the forward of one micro-batch's layer with the
backward of another's and split each layer into attention (with router and permute), dispatch,
experts (MLP) and combine. The communication of one micro-batch runs beside one named compute
node of the other (Megatron-Core ``TransformerLayerSchedulePlan.run``, per layer pair):

==========================  ========================================================
collective (c = EP / 4)     compute node of the paired micro-batch beside it
==========================  ========================================================
backward of the combine     forward attention side (attention, router, permute)
forward dispatch            backward of the experts (dgrad; their wgrad too unless deferred)
backward of the dispatch    forward experts (plus the experts' deferred wgrad)
forward combine             backward attention side (dgrad and wgrad)
==========================  ========================================================

The next node waits for both streams, so each pair exposes ``max(c − w, s·min(c, w))``
(``schedule.overlap.exposed_comm_s``) on its own: compute of one node cannot hide the
communication beside another (a pooled window, Σc against Σw, would). With
``--delay-wgrad-compute`` (or DualPipe's separate W pass) the experts' weight gradients leave
the expert backward node and run beside the dispatch backward instead (Megatron-Core
``backward_dw``), which is what deferring them is for.

DualPipe is not bound to that order: DeepSeek-V3 "rearrange[s] these components and manually
adjust[s] the ratio of GPU SMs devoted to communication versus computation" with the weight
gradients in a pass of their own (§3.2.1, Figure 4), and reports both all-to-alls fully hidden;
its window is the pair's whole layer compute, forward + backward (``pooled``).

Array-friendly in every seconds argument.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from perfcast.arrays import Floats
from perfcast.graph.layer import ROUTED_EXPERT_ACTIVATION
from perfcast.graph.ops import MemoryOp
from perfcast.schedule.overlap import exposed_comm_s


def defers_wgrad(strategy) -> bool:
    """Weight gradients leave the backward node (``--delay-wgrad-compute``, DualPipe's W pass)."""
    return bool(getattr(strategy, "delay_wgrad_compute", False)
                or getattr(strategy, "schedule", None) == "dualpipe")


def routed_expert_op(op) -> bool:
    """An op of the routed experts' MLP (between dispatch and combine): their GEMMs
    (``GemmOp.routed_expert``) and the activation kernel ``graph.layer._mlp_ops`` names
    ``expert_activation`` (and its backward)."""
    return bool(getattr(op, "routed_expert", False)) or (
        isinstance(op, MemoryOp) and op.name.startswith(ROUTED_EXPERT_ACTIVATION))


@dataclass(frozen=True)
class ExpertSeconds:
    """GPU seconds of the routed experts' ops of one layer for one micro-batch (the compute
    between dispatch and combine), by pass."""

    forward_s: Floats
    dgrad_s: Floats
    """Backward ops of the experts but their weight-gradient GEMMs."""
    wgrad_s: Floats


def ep_overlap_exposed_s(ep_forward_s: Floats, ep_backward_s: Floats, forward_s: Floats,
                         backward_s: Floats, experts: ExpertSeconds, slowdown: float,
                         deferred_wgrad: bool, pooled: bool) -> Floats:
    """Exposed EP seconds of one layer under EP overlap: node by node (combined 1F1B,
    ``paired_ep_exposed_s``) or, ``pooled`` (DualPipe), all of the layer's all-to-all against
    all of the paired layer's compute (module docstring)."""
    if pooled:
        return exposed_comm_s(np.add(ep_forward_s, ep_backward_s), np.add(forward_s, backward_s),
                              slowdown)
    return paired_ep_exposed_s(ep_forward_s, ep_backward_s, forward_s, backward_s, experts,
                               slowdown, deferred_wgrad)


def paired_ep_exposed_s(ep_forward_s: Floats, ep_backward_s: Floats, forward_s: Floats,
                        backward_s: Floats, experts: ExpertSeconds, slowdown: float,
                        deferred_wgrad: bool) -> Floats:
    """Exposed EP seconds of one layer whose all-to-alls run beside the paired micro-batch's
    compute nodes (module docstring). ``ep_forward_s`` / ``ep_backward_s`` hold dispatch and
    combine in equal halves (the same bytes each way); ``forward_s`` / ``backward_s`` are the
    layer's whole forward / backward compute (wgrad included), ``experts`` their expert part."""
    attention_forward = np.subtract(forward_s, experts.forward_s)
    expert_backward = np.add(experts.dgrad_s, 0.0 if deferred_wgrad else experts.wgrad_s)
    attention_backward = np.subtract(np.subtract(backward_s, experts.dgrad_s), experts.wgrad_s)
    expert_forward = np.add(experts.forward_s, experts.wgrad_s if deferred_wgrad else 0.0)
    half_forward, half_backward = np.multiply(ep_forward_s, 0.5), np.multiply(ep_backward_s, 0.5)
    return (exposed_comm_s(half_backward, attention_forward, slowdown)
            + exposed_comm_s(half_forward, expert_backward, slowdown)
            + exposed_comm_s(half_backward, expert_forward, slowdown)
            + exposed_comm_s(half_forward, attention_backward, slowdown))


def unpaired_pass_share(schedule: str, pp, vpp, num_micro_batches):
    """Share of a pipeline rank's forward (and backward) chunk passes that no pass of another
    micro-batch pairs with under EP overlap: their all-to-alls are exposed in full.

    Megatron-Core's combined 1F1B pairs forwards and backwards only in the steady state. Its
    interleaved schedule runs W_r = 2·(p − r − 1) + (v − 1)·p warm-up forwards on rank r
    (``get_pipeline_parallel_order`` / ``forward_backward_pipelining_with_interleaving``;
    Narayanan et al. 2021 §2.2.2), plain 1F1B W_r = p − r − 1, and a forward can pair only
    with the backward of an earlier micro-batch, which costs one warm-up forward more
    (``overlap_moe_expert_parallel_comm``: the last rank's first backward needs its own first
    forward); the cool-down runs as many lone backwards. Over the m·v forward passes of a
    rank, averaged over the p ranks: (v·p)/(m·v) = p/m interleaved, ((p + 1)/2)/m for 1F1B
    (m = 1 micro-batch: every pass alone). DualPipe (its own pairing, DeepSeek-V3 §3.2.1): 0.
    Strategies without EP overlap have no unpaired seconds to scale
    (``LayerTime.ep_unpaired_forward_s`` = 0). Array-friendly."""
    if schedule not in ("1f1b", "interleaved"):
        return 0.0
    chunks = vpp if schedule == "interleaved" else 1
    warmup = pp * chunks if schedule == "interleaved" else (pp + 1) / 2
    return np.minimum(np.divide(warmup, np.multiply(num_micro_batches, chunks)), 1.0)
