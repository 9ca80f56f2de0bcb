"""Which layouts a named training framework runs: the search's validity rules beyond ``Strategy``.

``Strategy`` and ``specs.compat`` reject what cannot exist for any framework (TP not dividing
the heads, EP not dividing the experts, the expert group not dividing the ranks). A framework
adds its own rules, read from its profile (``catalog/data/frameworks/training/*.yaml``):

* how the layers may split over the pp x vpp model chunks (``pipeline_splits_accepted``:
  Megatron-Core needs an even split, or one that is even once the embedding and the loss count
  as a layer; torchtitan and DeepSpeed split any count; a framework with no entry has no
  pipeline parallelism, so the search keeps pp = 1);
* which data-parallel sharding modes it has (``data_parallel_shardings_accepted``:
  Megatron-Core has the distributed optimizer and Megatron-FSDP but no ZeRO-2; torchtitan and
  FSDP loops have FSDP full / grad-op sharding but no distributed optimizer);
* which FP8/FP4 recipes it runs on the GPU's generation (``fp8_recipes_accepted``; else only
  its default recipe), kept to the formats the GPU's tensor cores have;
* which MoE token dispatchers it runs where EP > 1 (``moe_token_dispatchers_accepted``:
  Megatron-Core's all-to-all, and the flex dispatcher's DeepEP / HybridEP backends on the GPUs
  Megatron-Bridge enables them on) and whether it overlaps the EP all-to-all with another
  micro-batch (``ep_overlap_accepted``: ``--overlap-moe-expert-parallel-comm`` with
  ``--delay-wgrad-compute``, core_v0.14.0 on; not with full recompute, MLM:TC L3002-3046);
* which pipeline schedules it runs (``pipeline_schedules_accepted``: Megatron-Core 1F1B and
  interleaved 1F1B; torchtitan also GPipe and ZB-V through torch.distributed.pipelining;
  DeepSpeed 1F1B only); a profile with no entry runs 1F1B and interleaved 1F1B. ZB-V and
  DualPipe place two chunks per rank themselves (vpp = 1) and DualPipe needs an even pp
  (``schedule.orders.schedule_plan``);
* which context-parallel exchanges it runs where cp > 1 (``cp_comm_types_accepted``:
  Megatron-Core's ``--cp-comm-type`` p2p, all_gather, a2a, a2a+p2p; torchtitan's ring only;
  DeepSpeed's Ulysses all-to-all); a profile with no entry runs the ring. The search leaves
  a2a+p2p out (its level sizes are a further choice; ``perfcast train`` takes it);
* whether it runs 2D tensor parallelism (``tensor_parallel_2d_accepted``: no listed framework
  does; the ``analytical`` profile offers rows x cols grids of every tp > 1 with sequence
  parallelism, no CP and no TP comm overlap, ``graph.tensor_parallel_2d``);
* which CUDA-graph scopes it captures in training (``cuda_graph_scopes_accepted``: Megatron-Core
  whole layers up to core_v0.11, attention from core_v0.12, MoE from core_v0.16; torchtitan
  none); a scope that captures the MoE block (``moe``, ``full``) needs static shapes, so MoE
  models get it only with drop-and-pad routing (frameworks.md 1.5), and ``moe`` only on MoE
  models (it captures nothing else);
* whether it offloads whole layers' activations to host memory (``activation_offload_accepted``:
  Megatron-Core ``cpu_offloading``; needs pp = 1 and no recompute, MLM:TC L1884-1899);
* which modules its selective recompute re-runs (``recompute_modules_accepted``: Megatron-Core
  ``--recompute-modules`` from core_v0.12.0, core attention only before; torchtitan's per-op
  SAC alone) and which GEMMs its FP8 recipes convert (``fp8_gemm_scopes_accepted``: torchtitan
  linear and grouped separately, Transformer Engine all); ``search.recompute_sets``;
* the interleaved 1F1B schedule runs micro-batches in groups of pp (Megatron-Core
  ``microbatch_group_size_per_vp_stage`` defaults to the pipeline size, MLM:MPC L431,
  L567-568; ``schedule.orders.schedule_plan`` refuses any other count), so the micro-batches
  per step must be a multiple of pp.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from perfcast.catalog.framework_defaults import RunFacts, apply_framework_profile
from perfcast.catalog.frameworks import (
    DataParallelSharding,
    PipelineSplitAccepted,
    ResolvedFramework,
    pick,
)
from perfcast.schedule.activation_offload import STAGING_LAYERS
from perfcast.specs.strategy import Strategy

DEFAULT_SEARCH_FRAMEWORK = "megatron-core"
"""The framework whose rules the search follows unless told otherwise."""

DEFAULT_SCHEDULES: tuple[str, ...] = ("1f1b", "interleaved")
"""Pipeline schedules of a profile that names none (Megatron-style 1F1B and interleaved)."""

DEFAULT_CP_COMM_TYPES: tuple[str, ...] = ("p2p",)
"""Context-parallel exchange of a profile that names none (the ring)."""
SEARCHED_CP_COMM_TYPES = ("p2p", "all_gather", "a2a", "a2a+p2p")
"""Exchanges the search enumerates (a2a+p2p once per inner level size, ``search.enumerate``)."""

SPLIT_FLAGS: dict[PipelineSplitAccepted, tuple[str, ...]] = {
    "even": (),
    "embedding_as_layer": ("--account-for-embedding-in-pipeline-split",),
    "embedding_and_loss_as_layers": ("--account-for-embedding-in-pipeline-split",
                                     "--account-for-loss-in-pipeline-split"),
    "layout": (),
    "uneven": (),
}
"""Megatron-LM flags that configure each split (MLM:args L826-836); a ``layout`` split adds
``--pipeline-model-parallel-layout`` with its string (``split_flags``)."""

_EXTRA_LAYERS: dict[PipelineSplitAccepted, int] = {
    "even": 0, "embedding_as_layer": 1, "embedding_and_loss_as_layers": 2}
"""Pseudo-layers added to the decoder layers before dividing by the chunks."""


@dataclass(frozen=True)
class LayoutRules:
    """A framework's layout rules, as the search applies them."""

    framework: str
    """Label of the framework (``megatron-core``, ``torchtitan@0.2.2``, ...)."""
    pipeline_splits: tuple[PipelineSplitAccepted, ...]
    """Accepted splits of the layers over pp x vpp chunks; empty = no pipeline parallelism."""
    shardings: tuple[DataParallelSharding, ...] | None = None
    """Data-parallel sharding modes the framework has; None = no restriction known."""
    fp8_recipes: tuple[str, ...] = ()
    """FP8/FP4 recipes it runs on the search's GPU generation; empty = its default only."""
    dispatchers: tuple[str, ...] = ()
    """MoE token dispatchers it runs on the GPU generation where EP > 1; empty = its default."""
    ep_overlap: bool = False
    """Whether it overlaps the EP all-to-all with another micro-batch (where EP > 1)."""
    schedules: tuple[str, ...] = DEFAULT_SCHEDULES
    """Pipeline schedules it runs (where pp > 1)."""
    cp_comm_types: tuple[str, ...] = DEFAULT_CP_COMM_TYPES
    """Context-parallel exchanges it runs (where cp > 1)."""
    tensor_parallel_2d: bool = False
    """Whether it runs 2D TP grids (only the 'analytical' profile)."""
    cuda_graph_scopes: tuple[str, ...] = ()
    """CUDA-graph scopes it captures in training; empty = its default only."""
    activation_offload: bool = False
    """Whether it offloads whole layers' activations to host memory (pp = 1, no recompute)."""
    recompute_modules: tuple[str, ...] = ()
    """Modules its selective recompute can re-run; empty = its default set only."""
    fp8_gemm_scopes: tuple[str, ...] = ()
    """FP8 GEMM scopes it runs on models with routed experts; empty = ``all`` only."""

    @classmethod
    def of(cls, framework: ResolvedFramework, generation: str | None = None) -> LayoutRules:
        profile, version = framework.profile, framework.version
        splits = pick(profile.pipeline_splits_accepted, version)
        shardings = pick(profile.data_parallel_shardings_accepted, version)
        recipes = pick(profile.fp8_recipes_accepted, version, generation)
        dispatchers = pick(profile.moe_token_dispatchers_accepted, version, generation)
        ep_overlap = pick(profile.ep_overlap_accepted, version, generation)
        schedules = pick(profile.pipeline_schedules_accepted, version, generation)
        cp_comm = pick(profile.cp_comm_types_accepted, version, generation)
        tp2d = pick(profile.tensor_parallel_2d_accepted, version, generation)
        scopes = pick(profile.cuda_graph_scopes_accepted, version, generation)
        offload = pick(profile.activation_offload_accepted, version, generation)
        modules = pick(profile.recompute_modules_accepted, version, generation)
        fp8_scopes = pick(profile.fp8_gemm_scopes_accepted, version, generation)
        return cls(framework=framework.label, pipeline_splits=splits.value if splits else (),
                   shardings=shardings.value if shardings else None,
                   fp8_recipes=recipes.value if recipes else (),
                   dispatchers=dispatchers.value if dispatchers else (),
                   ep_overlap=bool(ep_overlap and ep_overlap.value),
                   schedules=schedules.value if schedules else DEFAULT_SCHEDULES,
                   cp_comm_types=cp_comm.value if cp_comm else DEFAULT_CP_COMM_TYPES,
                   tensor_parallel_2d=bool(tp2d and tp2d.value),
                   cuda_graph_scopes=scopes.value if scopes else (),
                   activation_offload=bool(offload and offload.value),
                   recompute_modules=modules.value if modules else (),
                   fp8_gemm_scopes=fp8_scopes.value if fp8_scopes else ())

    def pipeline_schedules(self, pp: int, vpps: list[int]) -> list[tuple[str, list[int]]]:
        """(schedule, the ``vpps`` it runs with) for each schedule the framework runs on ``pp``
        stages: pp = 1 is plain 1F1B; interleaved needs vpp > 1; GPipe, 1F1B, ZB-H1, ZB-V and
        DualPipe run vpp = 1 (ZB-V and DualPipe place their two chunks per rank themselves);
        DualPipe pairs stage i with p - 1 - i, so pp must be even (DeepSeek-V3 Sec. 3.2.1,
        ``schedule.orders.schedule_plan``)."""
        if pp == 1:
            return [("1f1b", [1] if 1 in vpps else [])]
        out = []
        for name in self.schedules:
            if name == "interleaved":
                out.append((name, [v for v in vpps if v > 1]))
            elif name != "dualpipe" or pp % 2 == 0:
                out.append((name, [1] if 1 in vpps else []))
        return out

    def context_parallel_exchanges(self) -> tuple[str, ...]:
        """``cp_comm_type`` values to try where cp > 1 (``SEARCHED_CP_COMM_TYPES`` the framework
        runs)."""
        return tuple(t for t in self.cp_comm_types if t in SEARCHED_CP_COMM_TYPES)
    def graph_scopes(self, default: str, is_moe: bool, static_moe_shapes: bool
                     ) -> tuple[str, ...]:
        """CUDA-graph scopes to try: the framework's (else its ``default``), without ``moe`` on
        a dense model (nothing to capture: the same strategy as ``none``) and, on a MoE model
        with dropless routing, without the scopes that capture the MoE block (``moe``,
        ``full``: a graph replays static shapes, frameworks.md 1.5 "moe scope only for
        drop-and-pad MoE")."""
        scopes = self.cuda_graph_scopes or (default,)
        if not is_moe:
            return tuple(s for s in scopes if s != "moe")
        if not static_moe_shapes:
            return tuple(s for s in scopes if s not in ("moe", "full"))
        return scopes

    def offload_layers(self, num_layers: int, pp: int, recompute: str) -> list[int]:
        """``cpu_offload_activation_layers`` values to try (0 = none): where the framework
        offloads, pp = 1 and no recompute (MLM:TC L1884-1899), every count 2..L that moves a
        different number of layers (one layer stays staged on the GPU,
        ``schedule.activation_offload.STAGING_LAYERS``, so 1 equals 0)."""
        if not self.activation_offload or pp != 1 or recompute != "none":
            return [0]
        return [0] + list(range(STAGING_LAYERS + 1, num_layers + 1))

    def moe_dispatchers(self, default: str) -> tuple[str, ...]:
        """Dispatchers to try where EP > 1: the framework's for the generation, else its
        default."""
        return self.dispatchers or (default,)

    def ep_overlaps(self, mtp_num_layers: int) -> tuple[bool, ...]:
        """EP overlap settings to try where EP > 1: on as well where the framework has it and
        the run has at most one MTP layer (MLM:TC L3002-3046)."""
        return (False, True) if self.ep_overlap and mtp_num_layers <= 1 else (False,)

    def low_precision_recipes(self, gpu, default_recipe: str) -> list[str]:
        """Recipes to try on ``gpu`` (a ``GPUSpec``): the framework's for its generation, or
        its default, kept to those whose GEMM format (``graph.fp8_casts.gemm_format``) the GPU
        has."""
        from perfcast.graph.fp8_casts import gemm_format

        return [r for r in (self.fp8_recipes or (default_recipe,)) if gpu.supports(gemm_format(r))]

    def allows_sharding(self, sharding: str) -> bool:
        return self.shardings is None or sharding in self.shardings

    @property
    def has_pipeline(self) -> bool:
        return bool(self.pipeline_splits)

    def pipeline_split(self, num_layers: int, pp: int, vpp: int) -> PipelineSplitAccepted | None:
        """The first accepted split of ``num_layers`` over ``pp * vpp`` chunks (None if none).

        ``embedding_as_layer``: (L + 1) chunks-divisible, the first chunk one layer short;
        ``embedding_and_loss_as_layers``: (L + 2) divisible, first and last chunk one short
        (MLM:TC L137-143); a chunk may then hold only the embedding or the loss, as in the
        published Qwen3-235B PP32 x VPP3 layout (ground truth row 562). ``graph.param_sharding.
        layers_per_stage`` gives the same stage sizes (remainder to the middle stages first).
        """
        chunks = pp * vpp
        if pp == 1:
            return "even" if vpp == 1 else None
        if not self.has_pipeline or chunks > num_layers + max(_EXTRA_LAYERS.values()):
            return None
        for split in self.pipeline_splits:
            if split == "uneven":
                if chunks <= num_layers:  # an uneven split still keeps a layer per chunk
                    return split
                continue
            if split == "layout":
                if chunks <= num_layers + 2:  # every chunk holds a layer, the embedding or loss
                    return split
                continue
            if (num_layers + _EXTRA_LAYERS[split]) % chunks == 0:
                return split
        return None

    def split_fields(self, num_layers: int, pp: int, vpp: int) -> dict[str, bool | str | None]:
        """``Strategy`` fields of the accepted split (the embedding/loss accounting flags, or
        the explicit layout string)."""
        flags = self.split_flags(num_layers, pp, vpp)
        layout = self.layout(num_layers, pp, vpp)
        return {"account_for_embedding_in_pipeline_split":
                "--account-for-embedding-in-pipeline-split" in flags,
                "account_for_loss_in_pipeline_split": "--account-for-loss-in-pipeline-split" in flags,
                "pipeline_layout": layout}

    def split_groups(self, num_layers: int, pp: int, vpps: list[int]
                     ) -> list[tuple[dict[str, bool | str | None], list[int]]]:
        """``vpps`` grouped by the ``Strategy`` fields of their split (``split_fields``), in
        ``vpps`` order: the vpps of the default split share one group; a vpp whose split is
        stated (embedding/loss as layers, a layout string) is a group of its own, since its
        chunks' layer counts (``specs.pipeline_layout.chunk_layer_counts``) depend on vpp.
        The search builds one block per group, so the bulk score evaluates the split the
        full forecast runs."""
        groups: list[tuple[dict[str, bool | str | None], list[int]]] = []
        default: list[int] = []
        for vpp in vpps:
            fields = self.split_fields(num_layers, pp, vpp)
            if any(fields.values()):
                groups.append((fields, [vpp]))
            elif not default:
                default.append(vpp)
                groups.append((fields, default))
            else:
                default.append(vpp)
        return groups

    def split_flags(self, num_layers: int, pp: int, vpp: int) -> tuple[str, ...]:
        """Framework flags the layout needs for its split (empty for an even split)."""
        split = self.pipeline_split(num_layers, pp, vpp)
        if split == "layout":
            return ("--pipeline-model-parallel-layout", pipeline_layout(num_layers, pp * vpp))
        return SPLIT_FLAGS[split] if split is not None else ()

    def layout(self, num_layers: int, pp: int, vpp: int) -> str | None:
        """The explicit layout string when the accepted split is ``layout``, else None."""
        if self.pipeline_split(num_layers, pp, vpp) != "layout":
            return None
        return pipeline_layout(num_layers, pp * vpp)


def pipeline_layout(num_layers: int, chunks: int) -> str:
    """A Megatron ``--pipeline-model-parallel-layout`` placing ``num_layers`` over ``chunks``
    virtual stages (``specs.pipeline_layout``) with the embedding and the loss counted as one
    layer each, as evenly as can be: ``divmod(L + 2, chunks)`` units per chunk, the larger
    ones first, so a last chunk may hold the loss alone. For DeepSeek-V3 (61 layers) over
    PP 8 x VPP 4 it is the published ``Et|(tt|)*30L`` (frameworks.md 1.2, 2.5). Runs of equal
    segments are written ``(seg|)*N``."""
    base, extra = divmod(num_layers + 2, chunks)
    units = [base + (i < extra) for i in range(chunks)]
    segments = ["t" * n for n in units]
    segments[0] = "E" + "t" * (units[0] - 1)
    segments[-1] = "t" * (units[-1] - 1) + "L" if chunks > 1 else "E" + "t" * num_layers + "L"
    text, i = "", 0
    while i < len(segments) - 1:
        run = 1
        while i + run < len(segments) - 1 and segments[i + run] == segments[i]:
            run += 1
        text += f"({segments[i]}|)*{run}" if run > 1 else f"{segments[i]}|"
        i += run
    return text + segments[-1]


SHARED_OPTION_FIELDS = ("grad_reduce_dtype", "moe_token_dispatcher", "fp8_recipe",
                        "fp8_weight_cache", "flash_attention", "eager_elementwise",
                        "attention_kernel", "cp_implementation", "overlap_grad_reduce",
                        "zero3_prefetch_params", "zero3_max_live_params",
                        "zero3_per_tensor_collectives", "zero3_host_ops_per_rank")
"""Framework defaults the search does not enumerate: the same for every candidate."""


def framework_options(framework: ResolvedFramework, generation: str | None) -> Strategy:
    """The framework's defaults for the options the search shares across candidates (its
    sharding, sequence parallelism, TP overlap, expert TP and recompute are enumerated), and
    the recompute modules its selective recompute means when the profile names them."""
    facts = RunFacts(tp=2, ep=2, precision="fp8", generation=generation, layers_per_stage=1,
                     cp=2)
    fields = apply_framework_profile(framework, {}, facts).fields
    shared = {k: v for k, v in fields.items() if k in SHARED_OPTION_FIELDS}
    if fields.get("recompute") == "selective" and "recompute_modules" in fields:
        # What "selective" means in this framework (torchtitan: per-op SAC, ``op_sac``); the
        # search's selective candidates run it (``enumerate.block_options``).
        shared |= {"recompute": "selective", "recompute_modules": fields["recompute_modules"]}
    return Strategy(num_gpus=1, **shared)


def interleaved_micro_batches_ok(num_micro_batches, pp):
    """Whether interleaved 1F1B runs ``num_micro_batches`` per step on ``pp`` stages: a whole
    number of groups of pp (MLM:MPC L431, L567-568; ``schedule.orders.schedule_plan``).
    Array-friendly."""
    return np.remainder(num_micro_batches, pp) == 0
