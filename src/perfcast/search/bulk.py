"""Bulk evaluation: step time and peak memory of every strategy of a space, on numpy arrays.

No second implementation of the physics. Two steps:

1. Per distinct ``LayerKey`` (a few hundred per search), the scalar code path times one dense
   and one MoE layer (``schedule.stage_time.layer_time``) and the embedding / head ops
   (``extra_time``) — exactly what ``estimate_training`` does per strategy.
2. Per ``StrategyBlock``, the same array-friendly functions ``estimate_training`` and
   ``estimate_memory`` call — ``assemble_stage_time``, ``data_parallel_time``,
   ``stage_memory``, ``assemble_step`` — run once with numpy arrays in place of numbers, for
   each distinct kind of pipeline stage (``distinct_stages``).

``tests/test_search_bulk.py`` checks the result equals ``estimate_training`` to 1e-9.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from operator import attrgetter
from typing import cast

import numpy as np

from perfcast.calibration.bundle import Calibration, load_calibration
from perfcast.calibration.host_launch import load_host_launch
from perfcast.calibration.memory_overheads import load_memory_overheads
from perfcast.estimate.training import assemble_step, distinct_stages
from perfcast.graph.layer import LayerShape, layer_ops
from perfcast.graph.op_sac import op_sac_gemm_shares
from perfcast.graph.param_sharding import stage_params
from perfcast.graph.stage import (
    LayerGroup,
    embedding_ops,
    head_ops,
    layer_shape,
    with_learned_imbalance,
)
from perfcast.kernels.backend import (
    DEFAULT_KERNEL_BACKEND,
    KernelBackend,
    KernelBackendName,
    get_backend,
)
from perfcast.memory.activations import layer_activation_bytes, recompute_working_bytes
from perfcast.memory.estimate import (
    LayerCommBuffers,
    activation_options,
    offloaded_activation_bytes,
    stage_memory,
)
from perfcast.schedule.activation_offload import offload_exposed_s
from perfcast.schedule.data_parallel import data_parallel_time
from perfcast.schedule.ep_overlap import unpaired_pass_share
from perfcast.schedule.op_time import comm_op_time_s, compute_op_time_s, group_size_and_stride
from perfcast.schedule.stage_time import (
    ExtraTime,
    LayerOpSeconds,
    LayerTime,
    assemble_stage_time,
    extra_time,
    layer_op_seconds,
    layer_time,
    recompute_comm_s,
    selective_forward_s,
)
from perfcast.search.space import LayerKey, StrategyBlock, StrategySpace
from perfcast.specs.hardware import SystemSpec
from perfcast.specs.model import ModelSpec
from perfcast.specs.strategy import Strategy
from perfcast.specs.workload import Workload


@dataclass(frozen=True)
class BlockMetrics:
    """Per-strategy results of one block, flattened in the block's row order."""

    step_time_s: np.ndarray
    memory_bytes: np.ndarray
    """Peak bytes per GPU over the pipeline stages."""


@dataclass(frozen=True)
class LayerTables:
    """Layer and extra-op times per ``LayerKey`` index, as arrays (gather by index)."""

    dense: LayerTime
    moe: LayerTime
    extra: dict[tuple[bool, bool], ExtraTime]
    """(first stage, last stage) -> embedding / head op times."""
    module_s: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    """Selective recompute module -> (dense, MoE) layer seconds it re-runs per key, for the
    blocks whose module set is not the space's (``StrategySpace.recompute_module_columns``)."""


def _stack(cls, rows: list):
    """One ``cls`` of arrays from ``rows`` (instances of dataclass ``cls`` with numeric fields):
    a table of rows x fields read by ``operator.attrgetter`` (C speed; a million layer keys
    per search), then its columns."""
    names = [f.name for f in fields(cls)]
    get = attrgetter(*names)
    table = np.array([get(r) for r in rows], dtype=np.float64).reshape(len(rows), len(names))
    return cls(**{name: table[:, i].copy() for i, name in enumerate(names)})


def _gather(table, index: np.ndarray):
    return type(table)(**{f.name: getattr(table, f.name)[index] for f in fields(table)})


@dataclass(frozen=True)
class LayerRows:
    """Scalar layer and extra-op times of a run of ``LayerKey`` indices (one row per key), the
    unit of work a parallel search hands to one process; ``stack_layer_rows`` joins them."""

    dense: tuple[LayerTime, ...]
    moe: tuple[LayerTime, ...]
    extras: tuple[tuple[ExtraTime, ...], ...]
    """Per key: embedding / head times for the (first, last) roles of ``EXTRA_ROLES``."""
    modules: tuple[tuple[tuple[float, float], ...], ...] = ()
    """Per key: (dense, MoE) seconds each of ``module_names`` re-runs (``module_seconds``)."""
    module_names: tuple[str, ...] = ()
    """``StrategySpace.recompute_module_columns``."""


EXTRA_ROLES = ((True, False), (False, True), (True, True))
"""(first stage, last stage) roles whose embedding / head ops are timed per layer key."""


def layer_rows(model: ModelSpec, system: SystemSpec, space: StrategySpace, seq_length: int,
               backend, calibration: Calibration | None = None,
               keys: range | None = None) -> LayerRows:
    """Scalar layer and extra-op times for the ``LayerKey`` indices ``keys`` of ``space`` (all
    when None), with overlap shares from ``calibration`` (the shipped one when None)."""
    cal = calibration or load_calibration()
    overlap, host = cal.comm_overlap, cal.host_launch or load_host_launch()
    learned = cal.routing.dropless_load_imbalance.value  # MoE layers, as estimate_training
    keys = range(len(space.layer_keys)) if keys is None else keys

    op_times: dict[tuple, float] = {}

    def op_time(op, system, strategy, backend):
        """``compute_op_time_s`` once per op and the strategy fields it reads (precision,
        FP8 recipe, attention kernel): keys differing in sizes share most op shapes."""
        key = (op, strategy.precision, strategy.fp8_recipe, strategy.attention_kernel)
        if key not in op_times:
            op_times[key] = compute_op_time_s(op, system, strategy, backend)
        return op_times[key]

    comm_times: dict[tuple, float] = {}

    def comm_time(op, system, strategy):
        """``comm_op_time_s`` once per collective and group layout: the strategy enters it
        only through the op's group size and stride (``group_size_and_stride``), which keys
        of different micro-batch, precision or overlap share."""
        key = (op, *group_size_and_stride(op.group, strategy))
        if key not in comm_times:
            comm_times[key] = comm_op_time_s(op, system, strategy)
        return comm_times[key]

    @functools.cache
    def group_of(shape: LayerShape) -> LayerGroup:
        """The layer's ops (keys differing only in EP overlap share them)."""
        return layer_group(model, shape)

    op_seconds: dict[tuple[LayerShape, str, str], LayerOpSeconds] = {}
    columns = space.recompute_module_columns
    module_ops: dict[tuple[LayerShape, str, str], tuple[float, ...]] = {}

    def module_seconds(key: tuple[LayerShape, str, str], layer: LayerTime) -> tuple[float, ...]:
        """Seconds each module of ``columns`` re-runs in the layer of ``key`` (its shape,
        precision and recipe, from ``timed_layer``): its forward ops (``selective_forward_s``,
        once per key) and the collectives it re-runs (``recompute_comm_s``), as
        ``layer_time`` charges a set of them."""
        if not columns:
            return ()
        if key not in module_ops:
            times = op_seconds[key].compute_s
            module_ops[key] = tuple(selective_forward_s(group_of(key[0]), (m,), times)
                                    for m in columns)
        return tuple(ops_s + recompute_comm_s((m,), layer.ep_forward_s, layer.cp_forward_s)
                     for m, ops_s in zip(columns, module_ops[key], strict=True))

    def timed_layer(strategy: Strategy, is_moe: bool
                    ) -> tuple[LayerTime, tuple[LayerShape, str, str]]:
        """The layer's time and its (shape, precision, recipe); its op seconds once per
        such key (keys differing only in TP/EP overlap or CUDA-graph scope share them: the
        collectives' group sizes follow from the shape's tp, cp, ep and expert tp, and the
        host segments of each scope are memoized in ``LayerOpSeconds``)."""
        shape = layer_shape(model, strategy, seq_length, is_moe)
        key = (shape, strategy.precision, strategy.fp8_recipe)
        if key not in op_seconds:
            op_seconds[key] = layer_op_seconds(group_of(shape), system, strategy, backend,
                                               op_time, comm_time)
        return layer_time(group_of(shape), system, strategy, backend, overlap, host, op_time,
                          op_seconds[key]), key

    @functools.cache
    def without_experts(tp, cp, mbs, sp, precision, overlap, recipe, cp_comm_type, cp_a2a,
                        tp2d_rows, scope, graphs):
        """Dense layer time and its modules' seconds: experts (ep, etp) play no part."""
        strategy = _key_strategy(LayerKey(
            tp, cp, 1, tp, mbs, sp, precision, overlap, recipe, cp_comm_type=cp_comm_type,
            hierarchical_cp_a2a_size=cp_a2a, tp2d_rows=tp2d_rows, cuda_graphs=graphs,
            fp8_gemm_scope=scope), space)
        layer, key = timed_layer(strategy, False)
        return layer, module_seconds(key, layer)

    @functools.cache
    def extras_of(tp, cp, mbs, sp, precision, overlap, recipe, cp_comm_type, cp_a2a, tp2d_rows,
                  scope):
        """Embedding/head times: neither experts nor CUDA graphs (layers only) play a part."""
        strategy = _key_strategy(LayerKey(tp, cp, 1, tp, mbs, sp, precision, overlap, recipe,
                                          cp_comm_type=cp_comm_type,
                                          hierarchical_cp_a2a_size=cp_a2a, tp2d_rows=tp2d_rows,
                                          fp8_gemm_scope=scope),
                                 space)
        shape = layer_shape(model, strategy, seq_length, False)
        emb, head = embedding_ops(model, shape), head_ops(model, shape)
        return tuple(extra_time((emb if first else []) + (head if last else []), system,
                                strategy, backend) for first, last in EXTRA_ROLES)

    dense, moe, extras, modules = [], [], [], []
    for index in keys:
        key = space.layer_keys[index]
        sizes = (key.tp, key.cp, key.micro_batch_size, key.sequence_parallel, key.precision,
                 key.tp_comm_overlap, key.fp8_recipe, key.cp_comm_type,
                 key.hierarchical_cp_a2a_size, key.tp2d_rows, key.fp8_gemm_scope)
        layer, layer_modules = without_experts(*sizes, key.cuda_graphs)
        dense.append(layer)
        extras.append(extras_of(*sizes))
        moe_layer, moe_modules = layer, layer_modules
        if model.is_moe:
            strategy = with_learned_imbalance(_key_strategy(key, space), learned)
            moe_layer, shape_key = timed_layer(strategy, True)
            moe_modules = module_seconds(shape_key, moe_layer)
        moe.append(moe_layer)
        modules.append(tuple(zip(layer_modules, moe_modules, strict=True)))
    return LayerRows(tuple(dense), tuple(moe), tuple(extras), tuple(modules), columns)


LAYER_GROUP_CACHE_SIZE = 8192
"""Layer op graphs kept per process (~8 KiB each: ~64 MiB at most). A MoE search on 16 GPUs
builds ~7,000; sweeps and repeated searches of the same model reuse them."""


@functools.lru_cache(maxsize=LAYER_GROUP_CACHE_SIZE)
def layer_group(model: ModelSpec, shape: LayerShape) -> LayerGroup:
    """One layer's ops for ``shape``: a pure function of the (frozen) model and shape, built
    once per process for every search that asks (the tasks of a sweep share most shapes: a
    varied hardware parameter leaves them all alike, more GPUs add to them)."""
    compute, comm = layer_ops(model, shape)
    return LayerGroup(1, shape.moe, tuple(compute), tuple(comm),
                      op_sac_gemm_shares(model, shape.moe))


def stack_layer_rows(parts: list[LayerRows]) -> LayerTables:
    """The ``LayerTables`` of consecutive ``LayerRows`` (in key order)."""
    dense = [r for part in parts for r in part.dense]
    moe = [r for part in parts for r in part.moe]
    extras = [e for part in parts for e in part.extras]
    extra = {role: _stack(ExtraTime, [e[i] for e in extras])
             for i, role in enumerate(EXTRA_ROLES)}
    extra[(False, False)] = ExtraTime(0.0, 0.0, 0.0)
    names = parts[0].module_names if parts else ()
    per_key = np.array([m for part in parts for m in part.modules], dtype=float)
    module_s = {name: (per_key[:, i, 0], per_key[:, i, 1]) for i, name in enumerate(names)}
    return LayerTables(dense=_stack(LayerTime, dense), moe=_stack(LayerTime, moe), extra=extra,
                       module_s=module_s)


def concat_layer_tables(parts: list[LayerTables]) -> LayerTables:
    """The ``LayerTables`` of consecutive runs of layer keys (``stack_layer_rows`` of each, in
    key order): what worker processes return, as arrays (``search.parallel``)."""
    def joined(tables: list):
        return type(tables[0])(**{f.name: np.concatenate([getattr(t, f.name) for t in tables])
                                  for f in fields(tables[0])})

    first = parts[0]
    extra = {role: joined([p.extra[role] for p in parts]) for role in EXTRA_ROLES}
    extra[(False, False)] = first.extra[(False, False)]
    module_s = {name: tuple(np.concatenate([p.module_s[name][kind] for p in parts])
                            for kind in (0, 1))
                for name in first.module_s}
    return LayerTables(dense=joined([p.dense for p in parts]), moe=joined([p.moe for p in parts]),
                       extra=extra, module_s=cast(dict[str, tuple[np.ndarray, np.ndarray]],
                                                  module_s))


def layer_tables(model: ModelSpec, system: SystemSpec, space: StrategySpace, seq_length: int,
                 backend, calibration: Calibration | None = None) -> LayerTables:
    """Scalar layer and extra-op times for every ``LayerKey`` of ``space`` (overlap shares
    from ``calibration``, the shipped one when None)."""
    return stack_layer_rows([layer_rows(model, system, space, seq_length, backend,
                                        calibration)])


def _key_strategy(key: LayerKey, space: StrategySpace) -> Strategy:
    """A valid strategy with the layer key's choices and the space's shared options (pp = 1,
    no sharding or recompute: layer times ignore dp, pp and sharding).

    A copy of the space's validated options with the key's values, not validated again: the
    key comes from a strategy of the space that passed ``Strategy``'s checks, and dropping
    pp, sharding and recompute keeps them passing (tp·cp and ep·etp still divide the GPUs).
    This runs once per layer key (tens of thousands in a MoE search)."""
    chosen = dict(num_gpus=space.num_gpus, tp=key.tp, pp=1, vpp=1, cp=key.cp, ep=key.ep,
                  cp_comm_type=key.cp_comm_type,
                  hierarchical_cp_a2a_size=key.hierarchical_cp_a2a_size, tp2d_rows=key.tp2d_rows,
                  etp=key.etp, micro_batch_size=key.micro_batch_size,
                  sequence_parallel=key.sequence_parallel, precision=key.precision,
                  tp_comm_overlap=key.tp_comm_overlap, fp8_recipe=key.fp8_recipe,
                  moe_token_dispatcher=key.moe_token_dispatcher, ep_overlap=key.ep_overlap,
                  delay_wgrad_compute=key.ep_overlap, cuda_graphs=key.cuda_graphs,
                  fp8_gemm_scope=key.fp8_gemm_scope,
                  recompute="none",
                  recompute_num_layers=None, pipeline_schedule=None, zero_stage=0, fsdp=False,
                  distributed_optimizer=False)
    return space.options.model_copy(update=chosen)


GATHER_CACHE_BYTES = 256 * 2**20
"""Bytes of gathered layer tables ``BulkEvaluator`` keeps per process (issue 18): the tables
of whole row selections, which blocks share (a DeepSeek-V3 x 1,024 H100 search has 320
selections of up to 174,000 rows, ~300 bytes a row for the dense and MoE tables). Kept by
count (512) before, the slices of large blocks (``search.block_stream``) filled the cache
with tables used once: 2.3 GiB of a 5.4 GiB peak RSS."""


@dataclass(frozen=True)
class BulkEvaluator:
    """Evaluates the blocks of one space (model, system, workload fixed)."""

    model: ModelSpec
    system: SystemSpec
    workload: Workload
    tables: LayerTables
    backend: KernelBackend
    calibration: Calibration
    _gathers: dict[tuple, tuple[np.ndarray, LayerTime]] = field(
        default_factory=dict, compare=False, repr=False)
    """``_gathered``'s tables by (table, id of the ``layer_key`` array)."""
    _gathered_bytes: list[int] = field(default_factory=lambda: [0], compare=False, repr=False)
    """Bytes of the tables in ``_gathers`` (one mutable count: the evaluator is frozen)."""

    @classmethod
    def for_space(cls, model: ModelSpec, system: SystemSpec, workload: Workload,
                  space: StrategySpace,
                  kernel_backend: KernelBackendName | str = DEFAULT_KERNEL_BACKEND,
                  calibration: Calibration | None = None,
                  tables: Callable[..., LayerTables] = layer_tables):
        """Layer tables of ``space`` timed with ``kernel_backend`` and ``calibration`` (the
        shipped calibration when None); ``tables`` builds them (``layer_tables``'s signature:
        ``search.parallel`` passes one that spreads the keys over processes)."""
        calibration = calibration or load_calibration()
        backend = calibration.with_kernels(get_backend(kernel_backend))
        built = tables(model, system, space, workload.seq_length, backend, calibration)
        return cls(model, system, workload, built, backend, calibration)

    def evaluate(self, block: StrategyBlock) -> BlockMetrics:
        """Step time and peak memory per GPU of every strategy in ``block``."""
        step_time_s, memory_bytes = self._evaluate(block, with_time=True)
        return BlockMetrics(step_time_s=step_time_s, memory_bytes=memory_bytes)

    def peak_memory(self, block: StrategyBlock) -> np.ndarray:
        """Peak memory per GPU of every strategy in ``block`` (row order), without timing
        it: what ``search.recompute_fit`` probes to find the fewest recomputed layers that
        fit."""
        return self._evaluate(block, with_time=False)[1]

    def _evaluate(self, block: StrategyBlock, with_time: bool
                  ) -> tuple[np.ndarray, np.ndarray]:
        """(step seconds or an empty array without ``with_time``, peak bytes), flattened."""
        model, system, s = self.model, self.system, self.workload.seq_length
        m = self.workload.global_batch_size // (block.micro_batch_size * block.dp)
        strategy = block.as_strategy()  # sizes as arrays: one evaluation for the block
        kinds = distinct_stages(model, strategy)
        set_bytes = self._set_layer_bytes(block)
        if with_time:
            dense = self._with_modules(self._gathered("dense", block.layer_key), block, 0)
            # a dense model's MoE table is its dense one, and no stage reads it
            moe = (self._with_modules(self._gathered("moe", block.layer_key), block, 1)
                   if model.is_moe else dense)
        # the same on every stage, as ``memory.estimate.estimate_memory`` passes them
        opts = activation_options(model, strategy)
        buffers = LayerCommBuffers.of(model, strategy, s / strategy.cp,
                                      strategy.micro_batch_size)
        stages, memory = [], []
        for stage, _ in kinds:
            params = stage_params(model, strategy, stage)
            memory.append(stage_memory(
                model, strategy, params, s, m, load_memory_overheads(),
                layer_activations=self._layer_activations(set_bytes, params.num_layers,
                                                          params.num_moe_layers),
                opts=opts, buffers=buffers).total_bytes)
            if not with_time:
                continue
            num_moe = params.num_moe_layers
            layers = [(n, lt) for n, lt in ((params.num_layers - num_moe, dense), (num_moe, moe))
                      if n]
            extra = self.tables.extra[(stage == 0, stage == block.pp - 1)]
            if stage == 0 or stage == block.pp - 1:  # a fresh copy: the stage time adds to it
                extra = _gather(extra, block.layer_key)
            times = assemble_stage_time(layers, extra, strategy).with_unpaired_ep(
                unpaired_pass_share(block.schedule, block.pp, block.vpp, m))
            if np.any(block.cpu_offload_activation_layers):  # as estimate_training does
                offloaded = offloaded_activation_bytes(model, strategy, params.num_layers,
                                                       params.num_moe_layers, s)
                # rows as arrays, as the block's strategy seam (``StrategyBlock.as_strategy``)
                times = replace(times, offload_s=cast(float, offload_exposed_s(
                    offloaded, system, times.forward_s, times.backward_compute_s)))
            stages.append((times, data_parallel_time(params, times, system, strategy,
                                                     self.calibration.comm_overlap,
                                                     self.calibration.host_launch,
                                                     num_micro_batches=m), params))
        shape = block.shape
        memory_bytes = np.broadcast_to(functools.reduce(np.maximum, memory), shape).ravel()
        if not with_time:
            return np.empty(0), memory_bytes
        calib = self.calibration.training_overheads.for_generation(system.gpu.generation)
        parts = assemble_step(model, system, strategy, s, m, stages, [n for _, n in kinds],
                              self.backend, calib)
        return np.broadcast_to(parts.step_time_s, shape).ravel(), memory_bytes

    def _gathered(self, table: str, layer_key: np.ndarray) -> LayerTime:
        """``tables.dense`` or ``tables.moe`` at the rows' ``layer_key`` indices, read-only.
        Blocks that select the same rows share their ``layer_key`` array (``search.row_table.
        SelectedRows``), so the gathered tables are kept by that array's identity
        (up to ``GATHER_CACHE_BYTES``). A ``layer_key`` that is a view of another array (a
        slice of a block's rows, ``search.block_stream``; a selection of layouts,
        ``search.recompute_fit``) is a fresh object each time: its table is gathered and not
        kept."""
        if not layer_key.flags.owndata:
            return _gather(getattr(self.tables, table), layer_key)
        key = (table, id(layer_key))
        found = self._gathers.get(key)
        if found is not None and found[0] is layer_key:
            return found[1]
        gathered = _gather(getattr(self.tables, table), layer_key)
        size = sum(getattr(gathered, f.name).nbytes for f in fields(gathered))
        for f in fields(gathered):
            getattr(gathered, f.name).flags.writeable = False  # shared by later blocks
        if self._gathered_bytes[0] + size > GATHER_CACHE_BYTES:
            self._gathers.clear()
            self._gathered_bytes[0] = 0
        self._gathers[key] = (layer_key, gathered)  # the array kept alive: its id stays its own
        self._gathered_bytes[0] += size
        return gathered

    def _with_modules(self, layers: LayerTime, block: StrategyBlock, kind: int) -> LayerTime:
        """``layers`` with the selective recompute seconds of each of the block's module sets
        (its last axis) where they are not the space's own (``StrategySpace.
        recompute_module_columns``): per set the sum of its modules' seconds (disjoint
        operators, ``schedule.stage_time.selective_forward_s``); ``kind`` 0 for dense layers,
        1 for MoE layers."""
        table = self.tables.module_s
        if not block.module_sets or any(m not in table for ms in block.module_sets for m in ms):
            return layers
        per_set = [functools.reduce(np.add, (table[m][kind][block.layer_key] for m in ms))
                   for ms in block.module_sets]
        # rows x sets as an array, as the block's strategy seam (``StrategyBlock.as_strategy``)
        return replace(layers, selective_recompute_s=cast(float, np.concatenate(per_set, axis=-1)))

    def _set_layer_bytes(self, block: StrategyBlock):
        """Per module set of ``block`` on the last axis: activation bytes of one dense and one
        MoE layer per micro-batch and the recompute working set (``memory.activations``, whose
        terms are functions of one set); None for a block of one set."""
        if len(block.module_sets) < 2:
            return None
        s, b = self.workload.seq_length / block.cp, block.micro_batch_size
        shape = np.broadcast_shapes(np.shape(b), np.shape(s))
        opts = activation_options(self.model, block.as_strategy())
        per_set = [replace(opts, recompute_modules=modules) for modules in block.module_sets]

        def stacked(part, moe: bool) -> np.ndarray:
            return np.concatenate([np.broadcast_to(part(self.model, s, b, o, moe), shape)
                                   for o in per_set], axis=-1)

        return (stacked(layer_activation_bytes, False), stacked(layer_activation_bytes, True),
                {moe: stacked(recompute_working_bytes, moe) for moe in (False, True)})

    @staticmethod
    def _layer_activations(set_bytes, num_layers: int, num_moe: int):
        """(per micro-batch, working set) activation bytes of a stage of ``num_layers`` layers,
        ``num_moe`` of them MoE, from ``_set_layer_bytes``: selective recompute applies to
        every layer, so the stage holds each layer's bytes (as ``memory.estimate.
        stage_layer_activations`` sums them)."""
        if set_bytes is None:
            return None
        dense, moe, working = set_bytes
        return (num_layers - num_moe) * dense + num_moe * moe, working[num_moe > 0]

    def evaluate_all(self, space: StrategySpace,
                     progress: Callable[[int], None] | None = None) -> list[BlockMetrics]:
        """``evaluate`` every block; ``progress(n)`` after each block of n strategies."""
        out = []
        for block in space.blocks:
            out.append(self.evaluate(block))
            if progress is not None:
                progress(len(block))
        return out
