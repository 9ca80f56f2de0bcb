"""Weight matrices per transformer layer: the parameter tensors a per-tensor ZeRO-3 moves with
one collective each.

DeepSpeed ZeRO-3 all-gathers (and reduce-scatters the gradient of) every partitioned parameter
with a collective of its own, and leaves parameters under ``stage3_param_persistence_threshold``
(1e5 elements) unpartitioned (DeepSpeed 0.3.13 ``runtime/zero/partition_parameters.py``:
``_all_gather`` calls ``_allgather_param`` once per parameter, ``_reduce_scatter_gradients``
calls ``_reduce_scatter_gradient`` once per parameter; ``constants.py``
``ZERO_OPTIMIZATION_PARAM_PERSISTENCE_THRESHOLD_DEFAULT = 100000``). Biases and norm weights of
a layer are smaller than that, so the layer's collectives are one per weight matrix.

Matrices are counted in the layout of perfcast's layer graph (``graph.layer``), which is
Megatron-LM's: fused QKV and fused gate/up projections.

=============== ===================================================================
block           weight matrices
=============== ===================================================================
attention       QKV and output projection: 2; MLA: q (or q_down and q_up), kv_down,
                kv_up, output projection
dense MLP       input (gate/up fused) and output projection: 2
MoE MLP         router, 2 per routed expert on this GPU, 2 for the shared experts
=============== ===================================================================
"""

from __future__ import annotations

from perfcast.specs.model import ModelSpec

MLP_MATRICES = 2
"""Input (gate and up fused, Megatron-LM ``dense_h_to_4h``) and output projection."""


def attention_weight_matrices(model: ModelSpec) -> int:
    """Weight matrices of one attention block (table in the module docstring)."""
    if model.is_mla:
        q_matrices = 2 if model.q_lora_rank else 1
        return q_matrices + 3  # kv_down, kv_up, output projection
    return 2


def dense_layer_weight_matrices(model: ModelSpec) -> int:
    """Weight matrices of one layer with a dense MLP."""
    return attention_weight_matrices(model) + MLP_MATRICES


def moe_layer_weight_matrices(model: ModelSpec, local_experts: float) -> float:
    """Weight matrices of one MoE layer holding ``local_experts`` routed experts on this GPU."""
    shared = MLP_MATRICES if model.shared_intermediate_size else 0
    return attention_weight_matrices(model) + 1 + MLP_MATRICES * local_experts + shared
