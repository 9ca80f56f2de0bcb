"""GPU memory a training run's CUDA graphs hold beyond the eager run: their static buffers.

A captured graph replays its kernels on the same device addresses every time, so its inputs and
outputs live in *static* tensors that the graph owns for its lifetime, allocated from the
graph's private memory pool (PyTorch CUDA semantics, "CUDA Graphs": static inputs are copied
in before ``replay()``, static outputs are overwritten by it; ``torch.cuda.make_graphed_callables``
builds one forward and one backward graph per callable, each with its own static input and
gradient buffers). Megatron-Core captures per layer (``--cuda-graph-impl local`` /
``transformer_engine``) the scope that ``--cuda-graph-scope`` names: the whole layer, its
attention block or its MoE block (frameworks.md 1.5). A replay overwrites its outputs, so a
pipelined run keeps one graph per layer and in-flight micro-batch whose saved activations are
still waiting for their backward (Transformer Engine ``make_graphed_callables`` captures per
micro-batch of the pipeline order).

Per captured region and in-flight micro-batch: the forward's static input and output and the
backward's static output-gradient and input-gradient, each one hidden-state tensor of the
micro-batch, b·(s/cp)·h·2 bytes (/tp with sequence parallelism). The four-tensor count and
the one-graph-per-in-flight-micro-batch count are *assumed* from the PyTorch semantics above:
shared/ has no measured graph-pool size for training. The tensors saved for backward inside a
captured region are the layer's stored activations, already counted (Korthikanti et al. 2022),
and the region's transient working memory is reused across graphs captured into one pool in
replay order (PyTorch docs, "Sharing memory across captures"), as eager runs reuse it.
"""

from __future__ import annotations

from typing import get_args

import numpy as np

from perfcast.arrays import Floats
from perfcast.specs.dtypes import ACTIVATION_BYTES
from perfcast.specs.model import ModelSpec
from perfcast.specs.strategy import CudaGraphScope

STATIC_TENSORS_PER_REGION = 4
"""Static hidden-state tensors per captured region and micro-batch (assumed, module docstring):
forward input and output, backward output-gradient and input-gradient."""
SCOPES: tuple[str, ...] = get_args(CudaGraphScope)
_REGIONS = {"none": (0, 0), "attention": (1, 0), "moe": (0, 1), "full": (1, 0)}
"""Captured regions of a scope per layer and per MoE layer: the whole layer for ``full``, the
attention block of every layer for ``attention``, the MoE block of a MoE layer for ``moe``."""
_PER_LAYER = np.array([_REGIONS[s][0] for s in SCOPES])
_PER_MOE_LAYER = np.array([_REGIONS[s][1] for s in SCOPES])


def captured_regions(cuda_graphs, num_layers, num_moe_layers):
    """Graph-captured regions of a stage per micro-batch (``_REGIONS``). ``cuda_graphs`` is a
    scope name, or an array of indices into ``SCOPES`` (the bulk search's rows);
    array-friendly in the layer counts."""
    if isinstance(cuda_graphs, str):  # one strategy: plain numbers in its report
        per_layer, per_moe_layer = _REGIONS[cuda_graphs]
    else:
        per_layer, per_moe_layer = _PER_LAYER[cuda_graphs], _PER_MOE_LAYER[cuda_graphs]
    return per_layer * num_layers + per_moe_layer * num_moe_layers


def cuda_graph_static_bytes(model: ModelSpec, strategy, num_layers, num_moe_layers,
                            seq_length_per_rank: Floats, inflight_micro_batches: Floats
                            ) -> Floats:
    """Bytes of the static graph buffers of one GPU's stage: regions × in-flight micro-batches ×
    ``STATIC_TENSORS_PER_REGION`` × b·(s/cp)·h·2 (/tp with SP). Array-friendly (the scope too,
    as ``captured_regions`` takes it)."""
    regions = captured_regions(strategy.cuda_graphs, num_layers, num_moe_layers)
    tokens = strategy.micro_batch_size * seq_length_per_rank
    if strategy.sequence_parallel:
        tokens = tokens / strategy.tp
    hidden_bytes = ACTIVATION_BYTES * tokens * model.hidden_size
    return regions * inflight_micro_batches * STATIC_TENSORS_PER_REGION * hidden_bytes
