"""Typed inputs of a strategy search and the columnar block of strategies it evaluates.

A ``StrategyBlock`` holds many strategies that share every categorical choice (pipeline size
and schedule, recompute granularity, ZeRO/FSDP sharding, precision, sequence parallelism) as
scalars and vary in their sizes (tp, cp, ep, etp, micro-batch, vpp, recompute_num_layers,
cpu_offload_activation_layers) and row options (TP/EP overlap, dispatcher, CUDA-graph scope)
as numpy arrays. It reads like a
``Strategy`` (same attribute names), so the array-friendly cost functions of ``schedule``,
``memory`` and ``estimate`` evaluate a whole block in one call.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal, cast, get_args

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from perfcast.catalog.frameworks import TrainingDispatcher
from perfcast.search.pins import Pin, pin_text
from perfcast.specs.limits import MAX_SEARCH_MICRO_BATCH_SIZE
from perfcast.specs.strategy import CP_COMM_TYPES, CudaGraphScope, Strategy

Sharding = Literal["none", "distributed_optimizer", "zero2", "fsdp"]
SHARDING_STAGE: dict[str, int] = {"none": 0, "distributed_optimizer": 1, "zero2": 2, "fsdp": 3}
"""Effective ZeRO stage of each sharding option (``Strategy.sharding_stage``)."""
MAX_SEARCH_VPP = 64
"""Most model chunks per pipeline rank searched: beyond the layers per stage of any catalog
model at pp >= 2 (the largest have ~128 layers), so a larger bound only adds invalid layouts."""
DISPATCHERS: tuple[str, ...] = get_args(TrainingDispatcher)
"""MoE token dispatchers by code (``StrategyBlock.dispatcher`` holds indices into it)."""
CUDA_GRAPH_SCOPES: tuple[str, ...] = get_args(CudaGraphScope)
"""CUDA-graph scopes by code (``StrategyBlock.cuda_graphs`` holds indices into it)."""
MAX_SEARCH_MICRO_BATCH = MAX_SEARCH_MICRO_BATCH_SIZE.value
"""Largest micro-batch searched: each one is a candidate row; published runs use 1-16."""


class SearchConstraints(BaseModel):
    """Bounds on the searched space (None = no bound beyond validity)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tp: int | None = Field(default=None, gt=0, description="Fix the tensor-parallel size.")
    pp: int | None = Field(default=None, gt=0, description="Fix the pipeline-parallel size.")
    cp: int | None = Field(default=None, gt=0, description="Fix the context-parallel size.")
    ep: int | None = Field(default=None, gt=0, description="Fix the expert-parallel size.")
    vpp: int | None = Field(default=None, gt=0, description="Fix the model chunks per rank.")
    micro_batch_size: int | None = Field(default=None, gt=0, description="Fix the micro-batch.")
    min_tp: int = Field(default=1, gt=0)
    max_tp: int | None = Field(default=None, gt=0)
    min_pp: int = Field(default=1, gt=0)
    max_pp: int | None = Field(default=None, gt=0)
    max_cp: int | None = Field(default=16, gt=0, description="Largest context-parallel size.")
    max_ep: int | None = Field(default=None, gt=0)
    max_vpp: int = Field(default=8, gt=0, le=MAX_SEARCH_VPP,
                         description="Most model chunks per pipeline rank.")
    max_micro_batch_size: int = Field(default=8, gt=0, le=MAX_SEARCH_MICRO_BATCH,
                                      description="Largest micro-batch.")
    recompute: tuple[str, ...] = Field(
        default=("none", "selective", "full"), description="Recompute granularities to try.")
    sharding: tuple[Sharding, ...] = Field(
        default=("none", "distributed_optimizer", "zero2", "fsdp"),
        description="Optimizer/gradient/weight sharding options to try.")
    fp8: bool = Field(default=True, description="Also try FP8/FP4 recipes the framework runs "
                                                "and the GPU supports.")
    tp_comm_overlap: tuple[bool, ...] = Field(
        default=(False, True),
        description="TP comm overlap settings to try where sequence parallelism is on (Megatron "
                    "--tp-comm-overlap asserts --sequence-parallel, frameworks.md 1.2).")
    fixed: tuple[Pin, ...] = Field(default=(), description="Dimensions pinned to one value.")
    excluded: tuple[Pin, ...] = Field(default=(), description="Dimension values never tried.")

    def allows(self, key: str, value) -> bool:
        """Whether dimension ``key`` may take ``value`` under the pins."""
        text = pin_text(value)
        if any(p.key == key and p.value == text for p in self.excluded):
            return False
        pinned = [p.value for p in self.fixed if p.key == key]
        return not pinned or text in pinned

    def allowed(self, key: str, values) -> list:
        """The ``values`` of dimension ``key`` the pins allow, in order."""
        return [v for v in values if self.allows(key, v)]


_DEFAULT_OPTIONS = Strategy(num_gpus=1)


@dataclass(frozen=True, eq=False)
class StrategyBlock:
    """Strategies sharing their categorical choices; sizes as broadcastable int arrays.

    ``recompute_num_layers`` 0 means all layers of the stage (``None`` in ``Strategy``).
    """

    num_gpus: int
    pp: int
    schedule: str
    recompute: str
    sharding: Sharding
    precision: str
    sequence_parallel: bool
    tp_comm_overlap: np.ndarray
    """TP comm overlap per row (bool; only layer times depend on it, through ``layer_key``)."""
    ep_overlap: np.ndarray
    """EP all-to-all overlap (with deferred weight gradients) per row (bool; layer times only)."""
    dispatcher: np.ndarray
    """MoE token dispatcher per row, an index into ``DISPATCHERS`` (layer times only)."""
    tp: np.ndarray
    cp: np.ndarray
    ep: np.ndarray
    etp: np.ndarray
    micro_batch_size: np.ndarray
    layer_key: np.ndarray
    """Index of (tp, cp, ep, etp, micro-batch, sp, precision, TP overlap, recipe, dispatcher,
    EP overlap, CP exchange, 2D TP rows, CUDA-graph scope) into ``StrategySpace.layer_keys``."""
    vpp: np.ndarray
    recompute_num_layers: np.ndarray
    tp2d_rows: np.ndarray | int = 1
    """Rows of the 2D TP grid per row (1 = 1D TP; ``graph.tensor_parallel_2d``)."""
    cp_comm: np.ndarray | int = 0
    """Context-parallel exchange per row, an index into ``CP_COMM_TYPES`` (layer times and the
    exchange's buffers)."""
    cp_a2a: np.ndarray | int = 1
    """Ranks each row's all-to-all scatters heads over (``Strategy.cp_a2a_size``): cp for a2a,
    the inner level of --hierarchical-context-parallel-sizes for a2a+p2p, 1 otherwise."""
    grad_reduce_dtype: str = "fp32"
    flash_attention: bool = True
    fp8_recipe: str = "tensorwise"
    cuda_graphs: np.ndarray = field(default_factory=lambda: np.zeros((1, 1, 1), dtype=np.int64))
    """CUDA-graph scope per row, an index into ``CUDA_GRAPH_SCOPES`` (host time through
    ``layer_key``; static buffers, ``memory.cuda_graphs``)."""
    cpu_offload_activation_layers: np.ndarray = field(
        default_factory=lambda: np.zeros((1, 1, 1), dtype=np.int64))
    """Layers whose activations go to host memory, 0 = none (shares the last axis with
    ``recompute_num_layers``: offload needs recompute 'none', so one of them is a single 0)."""
    options: Strategy = _DEFAULT_OPTIONS
    """Execution options the search does not enumerate (MoE, MTP, vocabulary padding,
    placement, overlap): read from here, so every ``Strategy`` field has a value."""
    module_sets: tuple[tuple[str, ...], ...] = ()
    """Selective recompute module sets of the block (``search.recompute_sets``), indexed by
    ``module_set``; empty = ``options.recompute_modules`` alone (other granularities)."""
    module_set: np.ndarray = field(default_factory=lambda: np.zeros((1, 1, 1), dtype=np.int64))
    """Index into ``module_sets`` per strategy, on the last axis (selective blocks have one
    recompute layer count and no offload, so the axis is theirs)."""
    vpp_options: tuple[Strategy, ...] = ()
    """``options`` of each vpp of the vpp axis (same order) where the block merges vpps whose
    stated splits differ (``search.split_merge``): each carries its vpp's split flags or
    layout for ``strategy``; empty: ``options`` for every vpp."""
    stage_layers: tuple[tuple[int, ...], ...] | None = None
    """Global layer indices per pipeline rank (``graph.param_sharding.strategy_stage_layers``
    reads them): those of the first vpp, whose ranks hold as many layers, MoE layers and BF16
    layers as under every other vpp of the block (``search.split_merge``); None: from the split
    of ``options``."""
    dp: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "dp", self.num_gpus // (self.tp * self.pp * self.cp))

    def __getattr__(self, name: str):
        """Non-enumerated ``Strategy`` fields come from ``options``."""
        if name in Strategy.model_fields:
            return getattr(self.__dict__.get("options", _DEFAULT_OPTIONS), name)
        raise AttributeError(name)


    @property
    def shape(self) -> tuple[int, ...]:
        return np.broadcast_shapes(self.tp.shape, self.vpp.shape, self.recompute_num_layers.shape,
                                   self.cpu_offload_activation_layers.shape,
                                   self.module_set.shape)

    def __len__(self) -> int:
        return int(np.prod(self.shape))

    @property
    def expert_tp(self) -> np.ndarray:
        return self.etp

    @property
    def cp_a2a_size(self) -> np.ndarray | int:
        """``Strategy.cp_a2a_size`` per row."""
        return self.cp_a2a

    @property
    def cp_kv_all_gather(self) -> np.ndarray:
        return np.asarray(self.cp_comm) == CP_COMM_TYPES.index("all_gather")

    @property
    def cp_torch_ring(self) -> np.ndarray:
        """``Strategy.cp_torch_ring`` per row."""
        return (np.asarray(self.cp) > 1) & (self.cp_implementation == "torch")

    @property
    def expert_dp(self) -> np.ndarray:
        return (self.tp * self.cp * self.dp) // (self.ep * self.etp)

    @property
    def sharding_stage(self) -> int:
        return SHARDING_STAGE[self.sharding]

    def recomputed_layers(self, num_layers):
        """``Strategy.recomputed_layers`` over the block (0 in ``recompute_num_layers`` = all)."""
        if self.recompute != "full":
            return 0
        rnl = self.recompute_num_layers
        return np.where(rnl == 0, num_layers, np.minimum(rnl, num_layers))

    def with_module_set(self, index: int) -> StrategyBlock:
        """This block with module set ``index`` of ``module_sets`` alone, as its options'
        ``recompute_modules`` (what the scalar-set memory functions read)."""
        return replace(self, options=self.options.model_copy(
            update={"recompute_modules": self.module_sets[index]}), module_sets=(),
            module_set=np.zeros((1, 1, 1), dtype=np.int64))

    def as_strategy(self) -> Strategy:
        """This block where the array-friendly estimator functions (``distinct_stages``,
        ``stage_params``, ``assemble_stage_time``, ``data_parallel_time``, ``stage_memory``,
        ``assemble_step``) take a ``Strategy``: the block has every ``Strategy`` attribute,
        its sizes as broadcastable arrays (``__getattr__`` supplies the rest from ``options``),
        so the same functions evaluate the whole block at once (DESIGN.md, array-friendly
        formulas). The type is a view for the checker; nothing is copied or converted."""
        return cast(Strategy, self)

    def column(self, name: str) -> np.ndarray:
        """Attribute ``name`` broadcast to the block's shape and flattened (row order)."""
        return np.broadcast_to(getattr(self, name), self.shape).ravel()

    def strategy(self, flat_index: int) -> Strategy:
        """The ``Strategy`` of row ``flat_index`` (row order of ``column``)."""
        idx = np.unravel_index(flat_index, self.shape)

        def at(name: str) -> int:
            return int(np.broadcast_to(getattr(self, name), self.shape)[idx])

        tp, etp, rnl = at("tp"), at("etp"), at("recompute_num_layers")
        offload = at("cpu_offload_activation_layers")
        cp_comm_type = CP_COMM_TYPES[at("cp_comm")]
        enumerated = dict(
            num_gpus=self.num_gpus, tp=tp, pp=self.pp, vpp=at("vpp"), cp=at("cp"), ep=at("ep"),
            cp_comm_type=cp_comm_type, tp2d_rows=at("tp2d_rows"),
            hierarchical_cp_a2a_size=(at("cp_a2a") if cp_comm_type == "a2a+p2p" and at("cp") > 1
                                      else None),
            etp=None if etp == tp else etp, sequence_parallel=self.sequence_parallel,
            tp_comm_overlap=bool(at("tp_comm_overlap")),
            ep_overlap=bool(at("ep_overlap")), delay_wgrad_compute=bool(at("ep_overlap")),
            moe_token_dispatcher=DISPATCHERS[at("dispatcher")],
            zero_stage=2 if self.sharding == "zero2" else 0, fsdp=self.sharding == "fsdp",
            distributed_optimizer=self.sharding == "distributed_optimizer",
            recompute=self.recompute, recompute_num_layers=rnl or None,
            pipeline_schedule=None if self.schedule in ("1f1b", "interleaved") else self.schedule,
            micro_batch_size=at("micro_batch_size"), precision=self.precision,
            fp8_recipe=self.fp8_recipe, grad_reduce_dtype=self.grad_reduce_dtype,
            flash_attention=self.flash_attention, cuda_graphs=CUDA_GRAPH_SCOPES[at("cuda_graphs")],
            cpu_offload_activation_layers=offload,
        )
        if self.module_sets:
            enumerated["recompute_modules"] = self.module_sets[at("module_set")]
        options = self.options
        if self.vpp_options:
            options = self.vpp_options[self.vpp.ravel().tolist().index(enumerated["vpp"])]
        return Strategy(**(options.model_dump() | enumerated))


@dataclass(frozen=True)
class LayerKey:
    """The strategy choices that set one layer's per-micro-batch op times."""

    tp: int
    cp: int
    ep: int
    etp: int
    micro_batch_size: int
    sequence_parallel: bool
    precision: str
    tp_comm_overlap: bool = False
    fp8_recipe: str = "tensorwise"
    """Scaling recipe of FP8 GEMMs (the space's default recipe when ``precision`` is bf16)."""
    moe_token_dispatcher: str = "alltoall"
    ep_overlap: bool = False
    """EP all-to-all overlap with deferred weight gradients (``--delay-wgrad-compute``)."""
    cp_comm_type: str = "p2p"
    """Context-parallel exchange (``Strategy.cp_comm_type``)."""
    hierarchical_cp_a2a_size: int | None = None
    """Inner (all-to-all) CP level of a2a+p2p (``Strategy.hierarchical_cp_a2a_size``)."""
    tp2d_rows: int = 1
    """Rows of the 2D TP grid (``Strategy.tp2d_rows``)."""
    cuda_graphs: str = "none"
    """CUDA-graph scope (host issue time of the layer, ``schedule.host_time``)."""
    fp8_gemm_scope: str = "all"
    """GEMMs the FP8 recipe converts (``Strategy.fp8_gemm_scope``; op times and shapes)."""


@dataclass(frozen=True)
class StrategySpace:
    """Every valid strategy of a search, in blocks, and how many candidates were invalid."""

    num_gpus: int
    blocks: tuple[StrategyBlock, ...]
    layer_keys: tuple[LayerKey, ...]
    invalid: int
    """Candidate layouts (tp, pp, vpp, cp, ep, etp, micro-batch) rejected by divisibility or
    by the framework's rules."""
    options: Strategy = _DEFAULT_OPTIONS
    """Non-enumerated options shared by every block (the framework's defaults)."""

    def __len__(self) -> int:
        return sum(len(block) for block in self.blocks)

    @property
    def distinct_without_recompute_layers(self) -> int:
        """Strategies counted once per recompute layer count and once per offloaded layer
        count: how many differ in anything else."""
        return sum(len(block) // (block.recompute_num_layers.size
                                  * block.cpu_offload_activation_layers.size)
                   for block in self.blocks)

    @property
    def recompute_layer_variants(self) -> int:
        """Strategies that differ from another only in the number of recomputed layers."""
        return sum(len(block) - len(block) // block.recompute_num_layers.size
                   for block in self.blocks)

    @property
    def recompute_module_columns(self) -> tuple[str, ...]:
        """Modules of the selective blocks' sets: ``search.bulk`` times each once per layer key
        and sums them per set (``op_sac``, used alone and carried by the layer times of a
        torchtitan space, is never among them)."""
        found = {m for b in self.blocks for ms in b.module_sets for m in ms} - {"op_sac"}
        return tuple(sorted(found))

    @property
    def recompute_module_variants(self) -> int:
        """Strategies that differ from another only in the selective recompute module set
        (``search.recompute_sets``): per group of blocks alike but for their sets, all rows
        but one per layout (the block without 'moe' sets has every layout of its group; the
        one with them drops the EP-overlap rows)."""
        return _variants(self.blocks, lambda b: (b.fp8_gemm_scope,),
                         lambda b: len(b) // b.module_set.size)

    @property
    def fp8_scope_variants(self) -> int:
        """Strategies that differ from another only in the FP8 GEMM scope."""
        return _variants(self.blocks, lambda b: (b.module_sets,), len)

    @property
    def offload_layer_variants(self) -> int:
        """Strategies that differ from another only in the number of offloaded layers."""
        return sum(len(block) - len(block) // block.cpu_offload_activation_layers.size
                   for block in self.blocks)


def _variants(blocks, kept, layouts) -> int:
    """Rows of ``blocks`` beyond one per layout, over groups of blocks that agree in every
    scalar choice, in their vpps (a stated split's vpp has a block of its own) and in
    ``kept(block)`` (the choices other than the one counted); ``layouts(block)`` is the number
    of layouts of a block (the group's largest counts)."""
    groups: dict[tuple, list[tuple[int, int]]] = {}
    for b in blocks:
        key = (b.pp, b.schedule, tuple(b.vpp.ravel().tolist()), b.recompute, b.sharding,
               b.precision, b.fp8_recipe, b.sequence_parallel, *kept(b))
        groups.setdefault(key, []).append((len(b), layouts(b)))
    return sum(sum(n for n, _ in sizes) - max(k for _, k in sizes) for sizes in groups.values())
