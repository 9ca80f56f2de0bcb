"""Data-parallel communication of one stage and the part of it that compute cannot hide.

- DDP / ZeRO-0: gradient all-reduce over dp·cp (experts: over their expert-DP group), bucketed
  and overlapped with the backward of the last micro-batch (PyTorch DDP, Li et al. 2020 §3.2;
  Megatron ``--overlap-grad-reduce``): exposed = max(0, reduce − hidden window), where the
  window is that backward minus its last layer (the last bucket cannot overlap).
- ZeRO-1/2 (Megatron distributed optimizer): reduce-scatter of gradients (same overlap) and an
  all-gather of updated 16-bit parameters, overlapped with the next step's first forward
  (``--overlap-param-gather``).
- Interleaved pipeline schedule (v model chunks per rank, micro-batches run in groups of
  g = min(pp, m) per chunk, Narayanan et al. 2021 §2.2): a chunk's gradients are final after
  the backward of its last micro-batch, and the schedule launches that chunk's reduction then,
  while the other chunks' backward of the last group still runs (Megatron-Core
  ``pipeline_parallel/schedules.py`` ``forward_backward_pipelining_with_interleaving``:
  ``grad_sync_func`` per model chunk at ``is_last_microbatch_for_model_chunk``; the parameter
  gather of chunk k+1 is launched, by ``param_sync_func``, when chunk k starts its first
  micro-batch). The reduction of all chunks then hides under g·(v−1) chunk backwards plus the
  last chunk's own backward (less its last layer), and the last chunk's share (1/v) only under
  that one chunk backward; the gathers likewise under the first group's forwards
  (``interleaved_windows``). v = 1 gives the single-micro-batch window above.
- Without that overlap (``Strategy.overlap_grad_reduce`` False: Megatron-LM of 2021 all-reduces
  the gradients after the pipeline schedule returns) the reduction and gather are exposed.
- ZeRO-3 / FSDP full shard (Zhao et al. 2023, PyTorch FSDP §3.3-3.4; Rajbhandari et al. 2020,
  ZeRO §7.2: parameters all-gathered in forward and again in backward, gradients
  reduce-scattered, 1.5x the DP volume): per micro-batch and layer, an all-gather of the layer's
  parameters in forward and again in backward, and a reduce-scatter of its gradients; each is
  prefetched under the neighbouring layer's compute, so per layer exposed = max(0, comm − that
  layer's compute); the first gather is exposed. Two framework behaviours
  (``Strategy.zero3_*``, from the framework profile):
  - ``zero3_max_live_params``: DeepSpeed releases a sub-module's parameters after its forward
    unless they are reused soon and the resident total stays under
    ``stage3_max_live_parameters``; a recomputed layer with more parameters than that limit is
    therefore gathered a third time for its recompute forward (3 gathers + 1 reduce-scatter
    per micro-batch), overlapped with the recompute forward of the neighbouring layer. FSDP
    unshards the wrapped block once in its pre-backward hook, and that gather serves both.
  - ``zero3_prefetch_params``: only that many parameters are fetched ahead of use (DeepSpeed
    ``stage3_prefetch_bucket_size``); the rest of a layer's gather is issued when the layer
    runs and waits in full: hideable share of a gather = min(1, prefetch / layer parameters).
  - ``zero3_per_tensor_collectives``: DeepSpeed gathers, and reduce-scatters the gradient of,
    each partitioned parameter with a collective of its own (0.3.13
    ``partition_parameters.py`` ``_all_gather`` -> ``_allgather_param`` per parameter,
    ``_reduce_scatter_gradients`` -> ``_reduce_scatter_gradient`` per parameter): a layer's
    gather is n collectives of 1/n of its bytes, n = its weight matrices
    (``graph.weight_tensors``), each paying its own latency. FSDP moves one flat parameter.
  - ``zero3_host_ops_per_rank``: DeepSpeed up to 0.5.4 passes every collective a list of one
    tensor per rank. ``_allgather_param`` builds it with one ``narrow`` per rank in Python
    before ``torch.distributed.all_gather(partitions, ...)``, and ``_reduce_scatter_gradient``
    likewise before ``torch.distributed.reduce_scatter(out, input_list)``; PyTorch's NCCL
    process group then copies the flat NCCL buffer out to each listed tensor (all-gather) or
    the listed tensors into it (reduce-scatter), one ``copy_`` per rank (PyTorch 1.8
    ``torch/lib/c10d/ProcessGroupNCCL.cpp`` ``allgather``/``reduce_scatter`` with
    ``flatten_for_scatter_gather``; DeepSpeed 0.5.5 switched the gather to
    ``_all_gather_base``). That is 2 host tensor operations per rank per collective, each
    costing the host time of one eager op (``host_launch.yaml`` ``host_s_per_op``), so a
    collective over p ranks costs the host 2·p·host_s_per_op, α·p rather than the ring's
    α·(p−1) hops on the device. Charged in series with the step: DeepSpeed calls
    ``torch.cuda.synchronize()`` before every parameter gather (``_allgather_param``) and
    after every module fetch (``_synchronize_communication``), and launches a module's
    compute only after its prefetch call returns, so no GPU work is queued while the host
    walks the rank list.

Gathered bytes: 16-bit weights (2 B per parameter); with FP8 parameters (``Strategy.fp8_param``:
Megatron ``--fp8-param-gather``, torchao ``enable_fsdp_float8_all_gather``) the linear-layer
weights travel in FP8 (``graph.fp8_casts.gathered_weight_bytes_per_param``) and only the
embedding, LM head and norms stay 16-bit (layers kept in BF16 under ``num_layers_at_start_in_bf16``
/ ``..._end_...`` are counted in FP8 too: not modelled). Gradients reduce in ``grad_reduce_dtype``
either way.

Every overlapped part still costs ``stream_overlap_exposed_fraction`` of its seconds on the
critical path (``schedule.overlap``: SM sharing, host-issued hooks, gather-before-use and
reduce-after-gradient ordering, one collective at a time per communicator).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from perfcast.arrays import Floats, all_scalars
from perfcast.calibration.comm_overlap import CommOverlapCalibration
from perfcast.calibration.host_launch import HostLaunchCalibration, load_host_launch
from perfcast.graph.fp8_casts import gathered_weight_bytes_per_param, scope_converts
from perfcast.graph.ops import Collective, CommOp, Group, Phase
from perfcast.graph.param_sharding import StageParams
from perfcast.memory.states import WEIGHT_BYTES_16BIT, grad_bytes_per_param
from perfcast.schedule.op_time import comm_op_time_s
from perfcast.schedule.overlap import exposed_comm_s, stream_overlap_slowdown
from perfcast.schedule.stage_time import StageTime
from perfcast.specs.hardware import SystemSpec
from perfcast.specs.strategy import Strategy


@dataclass(frozen=True)
class DataParallelTime:
    """Seconds of data-parallel communication per step for one stage."""

    total_s: Floats
    """All DP communication (hidden or not)."""
    exposed_step_s: Floats
    """Exposed once per step (gradient reduction, parameter gather); arrays in the bulk search."""
    exposed_per_micro_batch_s: Floats
    """Exposed on every micro-batch (FSDP/ZeRO-3 gathers and reduce-scatters)."""


def zero3_regathered_layers(strategy: Strategy, num_layers: int, layer_params):
    """Layers gathered again for their recompute forward (module docstring): the recomputed
    layers when a layer holds more parameters than ``zero3_max_live_params``; none without a
    limit. Array-friendly in ``layer_params``."""
    if strategy.zero3_max_live_params is None:
        return 0
    over = np.greater(layer_params, strategy.zero3_max_live_params)
    return np.where(over, strategy.recomputed_layers(num_layers), 0)[()]


def zero3_gathers_per_micro_batch(strategy: Strategy, num_layers: int, layer_params):
    """Layer all-gathers per micro-batch under ZeRO-3/FSDP: forward and backward for every
    layer (ZeRO §7.2), plus the recompute forward of each re-gathered layer (DeepSpeed with
    layers over its live-parameter limit: 3 per recomputed layer)."""
    return 2 * num_layers + zero3_regathered_layers(strategy, num_layers, layer_params)


def prefetch_hideable_fraction(strategy: Strategy, layer_params):
    """Share of a layer's ZeRO-3 all-gather that can run ahead of the layer: min(1, prefetch
    parameters / layer parameters) with a prefetch limit (DeepSpeed
    ``stage3_prefetch_bucket_size``), 1 without one (FSDP prefetches the whole next module).
    Array-friendly in ``layer_params``."""
    if strategy.zero3_prefetch_params is None:
        return 1.0
    return np.minimum(1.0, strategy.zero3_prefetch_params / np.maximum(layer_params, 1.0))[()]


def gathers_fp8_weights(strategy: Strategy, routed_expert: bool) -> bool:
    """Whether the DP gathers carry FP8 linear weights of routed experts (or of the rest):
    FP8 parameters in an FP8 run (a bulk search block reads ``fp8_param`` from its options
    beside bf16 candidates), for the weights the FP8 scope converts (``scope_converts``)."""
    return (bool(getattr(strategy, "fp8_param", False)) and strategy.precision == "fp8"
            and scope_converts(strategy.fp8_gemm_scope, routed_expert))


def dense_gather_bytes(dense_params, embedding_params, strategy: Strategy):
    """Bytes all-gathered for ``dense_params`` non-expert parameters, ``embedding_params`` of
    them embedding / LM head (norms counted with the linear weights: < 0.01% of a layer):
    2 B each, the linear weights at ``gathered_weight_bytes_per_param`` under FP8 parameters
    (module docstring). Array-friendly in the parameter counts."""
    full = WEIGHT_BYTES_16BIT * dense_params
    if not gathers_fp8_weights(strategy, routed_expert=False):
        return full
    saved = WEIGHT_BYTES_16BIT - gathered_weight_bytes_per_param(strategy.fp8_recipe)
    return full - saved * (dense_params - embedding_params)


def expert_gather_bytes(expert_params, strategy: Strategy):
    """Bytes all-gathered for ``expert_params`` routed-expert parameters (all linear weights):
    2 B each, ``gathered_weight_bytes_per_param`` under FP8 parameters. Array-friendly."""
    if not gathers_fp8_weights(strategy, routed_expert=True):
        return WEIGHT_BYTES_16BIT * expert_params
    return gathered_weight_bytes_per_param(strategy.fp8_recipe) * expert_params


def zero3_collectives_per_layer(strategy: Strategy, params: StageParams):
    """Collectives of one layer's gather (and of its gradient reduce-scatter): one per weight
    matrix with per-tensor collectives (DeepSpeed, ``graph.weight_tensors``), one for the
    layer's flat parameter otherwise (FSDP)."""
    return params.weight_tensors_per_layer if strategy.zero3_per_tensor_collectives else 1.0


def zero3_host_s_per_collective(strategy: Strategy, host_s_per_op: float):
    """Host seconds of one ZeRO-3 collective over a tensor list: ops per rank × dp·cp ranks ×
    host seconds per eager op (module docstring). 0 for flat-buffer collectives."""
    return strategy.zero3_host_ops_per_rank * strategy.dp * strategy.cp * host_s_per_op


def _time(name, collective, group, size_bytes, system, strategy):
    """Seconds of one collective of ``size_bytes``; 0 when there are no bytes to move (the
    expert group of a dense model). Array-friendly; a scalar size skips numpy's ``where``
    (same value, as a numpy float), and sizes that are all 0 (the expert groups of a dense
    model's blocks in the bulk search) skip the collective."""
    if not all_scalars(size_bytes) and not np.any(size_bytes):
        return np.float64(0.0)
    op = CommOp(name, Phase.BACKWARD_WGRAD, group, collective, size_bytes)
    seconds = comm_op_time_s(op, system, strategy)
    if all_scalars(size_bytes, seconds):
        return np.float64(seconds if size_bytes > 0 else 0.0)
    return np.where(np.greater(size_bytes, 0), seconds, 0.0)[()]


def data_parallel_time(params: StageParams, times: StageTime, system: SystemSpec,
                       strategy: Strategy, overlap: CommOverlapCalibration | None = None,
                       host: HostLaunchCalibration | None = None,
                       num_micro_batches=None) -> DataParallelTime:
    """DP communication seconds of one stage per step, and how much of it is exposed.

    ``overlap`` replaces the shipped overlap calibration (for fitting it), ``host`` the shipped
    host-launch priors; ``num_micro_batches`` bounds the interleaved schedule's micro-batch
    group (None: a full group of pp). Array-friendly in ``params``/``times`` fields and the strategy's group
    sizes."""
    grad_b = grad_bytes_per_param(strategy)
    stage = strategy.sharding_stage
    slow = stream_overlap_slowdown(overlap)
    if stage >= 3:
        layers = max(params.num_layers, 1)
        dense_layer = params.dense / layers
        expert_layer = params.expert / layers
        n = zero3_collectives_per_layer(strategy, params)
        gather = n * (_time("fsdp_all_gather", Collective.ALL_GATHER, Group.DP_CP,
                            dense_gather_bytes(dense_layer, params.embedding / layers, strategy)
                            / n, system, strategy)
                      + _time("fsdp_expert_all_gather", Collective.ALL_GATHER, Group.EDP,
                              expert_gather_bytes(expert_layer, strategy) / n, system, strategy))
        scatter = n * (_time("fsdp_reduce_scatter", Collective.REDUCE_SCATTER, Group.DP_CP,
                             grad_b * dense_layer / n, system, strategy)
                       + _time("fsdp_expert_reduce_scatter", Collective.REDUCE_SCATTER,
                               Group.EDP, grad_b * expert_layer / n, system, strategy))
        hide = prefetch_hideable_fraction(strategy, dense_layer + expert_layer)
        regathers = zero3_regathered_layers(strategy, layers, dense_layer + expert_layer)
        gathers = zero3_gathers_per_micro_batch(strategy, layers, dense_layer + expert_layer)
        bwd_comm = gather + scatter
        bwd_hide = (hide * gather + scatter) / np.maximum(bwd_comm, 1e-300)
        exposed_fwd = (exposed_comm_s(gather, times.layer_forward_s, slow, hide) * (layers - 1)
                       + gather)
        exposed_recompute = exposed_comm_s(gather, times.layer_forward_s, slow, hide) * regathers
        exposed_bwd = exposed_comm_s(bwd_comm, times.layer_backward_s, slow, bwd_hide) * layers
        host_s_per_op = (host or load_host_launch()).host_s_per_op.value
        host_s = ((gathers + layers) * n
                  * zero3_host_s_per_collective(strategy, host_s_per_op))
        per_mb_total = gathers * gather + layers * scatter + host_s
        return DataParallelTime(total_s=per_mb_total, exposed_step_s=0.0,
                                exposed_per_micro_batch_s=exposed_fwd + exposed_recompute
                                + exposed_bwd + host_s)
    if stage >= 1:
        reduce = (_time("grad_reduce_scatter", Collective.REDUCE_SCATTER, Group.DP_CP,
                        grad_b * params.dense, system, strategy)
                  + _time("expert_grad_reduce_scatter", Collective.REDUCE_SCATTER, Group.EDP,
                          grad_b * params.expert, system, strategy))
        gather = (_time("param_all_gather", Collective.ALL_GATHER, Group.DP_CP,
                        dense_gather_bytes(params.dense, params.embedding, strategy),
                        system, strategy)
                  + _time("expert_param_all_gather", Collective.ALL_GATHER, Group.EDP,
                          expert_gather_bytes(params.expert, strategy), system, strategy))
    else:
        reduce = (_time("grad_all_reduce", Collective.ALL_REDUCE, Group.DP_CP,
                        grad_b * params.dense, system, strategy)
                  + _time("expert_grad_all_reduce", Collective.ALL_REDUCE, Group.EDP,
                          grad_b * params.expert, system, strategy))
        gather = 0.0
    if not strategy.overlap_grad_reduce:  # reduced after the backward, gathered before use
        return DataParallelTime(total_s=reduce + gather, exposed_step_s=reduce + gather,
                                exposed_per_micro_batch_s=0.0)
    layers = max(params.num_layers, 1)
    chunks = interleaved_chunks(strategy)
    group = strategy.pp if num_micro_batches is None else np.minimum(strategy.pp,
                                                                     num_micro_batches)
    bwd_all, bwd_last = interleaved_windows(times.backward_compute_s, chunks, group, layers)
    fwd_all, fwd_last = interleaved_windows(times.layer_forward_s * layers, chunks, group, layers)
    exposed = (np.maximum(exposed_comm_s(reduce, bwd_all, slow),
                          exposed_comm_s(reduce / chunks, bwd_last, slow))
               + np.maximum(exposed_comm_s(gather, fwd_all, slow),
                            exposed_comm_s(gather / chunks, fwd_last, slow)))
    return DataParallelTime(total_s=reduce + gather, exposed_step_s=exposed,
                            exposed_per_micro_batch_s=0.0)


def interleaved_chunks(strategy: Strategy):
    """Model chunks per rank whose DP collectives are launched one chunk at a time: ``vpp``
    under the interleaved schedule (the default schedule when vpp > 1), 1 otherwise (module
    docstring). Array-friendly in ``strategy.vpp``."""
    if strategy.pipeline_schedule not in (None, "interleaved"):
        return 1
    return strategy.vpp


def interleaved_windows(pass_s, chunks, group, num_layers):
    """Compute seconds that hide a stage's DP reduction (``pass_s`` = one micro-batch's
    backward of the stage) or parameter gather (its forward) under the interleaved schedule
    (module docstring), as (window of the whole collective, window of the last chunk's 1/v
    share): a chunk pass is ``pass_s``/v; the whole collective hides under ``group``·(v−1)
    chunk passes plus the last chunk's pass less one layer (its last bucket cannot overlap),
    the last chunk's share under that last term alone. v = 1: both are ``pass_s``·(1 − 1/L),
    the non-interleaved window. Array-friendly."""
    per_chunk = np.divide(pass_s, chunks)
    last = per_chunk * (1.0 - np.divide(chunks, num_layers))
    return per_chunk * group * (np.subtract(chunks, 1)) + last, last
