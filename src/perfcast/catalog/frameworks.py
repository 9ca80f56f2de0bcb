"""Training framework profiles: the defaults a framework applies when a user does not say.

One YAML file per framework in ``catalog/data/frameworks/training/`` (megatron-lm,
megatron-core, torchtitan, llm-foundry, deepspeed, pytorch-fsdp). Every value carries the
``source`` it was read from (``/work/shared/reference/frameworks.md`` source keys: file, line,
revision), and may be limited to a version range (``versions``) or to GPU generations
(``generations``). ``load_framework_profile("megatron-core@0.13")`` resolves a name or alias
(``NeMo 25.07``, ``Megatron-Bridge``, ``NeMo AutoModel``) and a version; an unknown name is an
``InputError``. ``perfcast.catalog.framework_defaults`` turns a profile into ``Strategy`` fields.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, model_validator

from perfcast.catalog.files import DATA_DIR, build_spec, read_mapping
from perfcast.catalog.framework_versions import (
    FrameworkVersion,
    VersionBounds,
    VersionScheme,
    find_versions,
    parse_cli_version,
)
from perfcast.errors import InputError
from perfcast.specs.hardware import Generation
from perfcast.specs.strategy import (
    AttentionKernel,
    CpCommType,
    CpImplementation,
    CudaGraphScope,
    FP8GemmScope,
    FP8Recipe,
    GradReduceDtype,
    PipelineSchedule,
    RecomputeModule,
)

TRAINING_FRAMEWORKS_DIR = DATA_DIR / "frameworks" / "training"

T = TypeVar("T")

DataParallelSharding = Literal["none", "distributed_optimizer", "zero2", "fsdp"]
"""What the data-parallel group shards: nothing (all-reduce DDP), optimizer states (Megatron
distributed optimizer, ZeRO-1), gradients too (ZeRO-2 / FSDP SHARD_GRAD_OP), or everything
(FSDP full shard / ZeRO-3)."""
RecomputeDefault = Literal["none", "selective", "full", "every_second_layer", "per_op"]
"""Activation recomputation: ``every_second_layer`` = full recompute of every 2nd layer
(torchtitan's layer-level selective AC, ``selective_ac_option="2"``); ``per_op`` = torchtitan's
per-op SAC (``selective_ac_option="op"``: selective recompute with module ``op_sac``,
``graph.op_sac``)."""
ExpertTensorParallel = Literal["one", "tp"]
"""Expert tensor-parallel size: 1, or equal to the dense TP size (Megatron-Core's own default)."""
PipelineSplit = Literal["even", "first_last_one_layer_fewer"]
PipelineMicrobatches = Literal["total_stages", "one_sequence"]
"""Micro-batches of a pipelined step that states no micro-batch size: ``total_stages`` = the
local batch split into as many micro-batches as pipeline stages in all (pp x stages per rank),
``one_sequence`` = one sequence per micro-batch (micro-batches = local batch)."""
ExpertParallelUnstated = Literal["data_parallel"]
"""EP size of a run that names an EP-only token dispatcher (DeepEP / HybridEP) but no EP size:
``data_parallel`` = the experts spread over the whole data-parallel (FSDP) group, i.e. the
largest divisor of the routed-expert count that divides dp·cp."""
MoeDispatcher = Literal["alltoall", "deepep"]
TrainingDispatcher = Literal["alltoall", "deepep", "hybridep"]
"""MoE token dispatchers a training framework may run (``Strategy.moe_token_dispatcher``)."""
PipelineSplitAccepted = Literal["even", "embedding_as_layer", "embedding_and_loss_as_layers",
                                "layout", "uneven"]
"""A split of the layers over pp x vpp model chunks a framework runs: ``even`` (layers a
multiple of the chunks), ``embedding_as_layer`` / ``embedding_and_loss_as_layers`` (the
embedding, and the loss, count as one layer each, so the first / last chunk holds one layer
fewer: Megatron-Core ``--account-for-embedding-in-pipeline-split`` /
``--account-for-loss-in-pipeline-split``), ``layout`` (an explicit
``--pipeline-model-parallel-layout`` string, any split), or ``uneven`` (any split; the framework spreads the
remainder itself)."""


class SourcedValue(BaseModel, Generic[T]):
    """One default value, where it comes from, and when it applies."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    value: T = Field(description="The default.")
    source: str = Field(min_length=8, description="Where the value was read (file, line, tag).")
    versions: dict[VersionScheme, VersionBounds] | None = Field(
        default=None,
        description="Releases it applies to (any listed scheme); None = every release, "
                    "including an unversioned request (latest).",
    )
    generations: tuple[Generation, ...] | None = Field(
        default=None, description="GPU generations it applies to; None = all.")
    says: str = Field(default="", description="Optional words for the assumption sentence.")


class FrameworkAlias(BaseModel):
    """A name that selects the profile, and how versions written after it count."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=2, description="Lower-case name, matched as a text prefix.")
    scheme: VersionScheme = Field(description="Version scheme of a number written after it.")


class TrainingFrameworkProfile(BaseModel):
    """Performance-relevant defaults of one training framework (each a list of sourced values;
    the first value whose version range and GPU generations match applies; an empty list means
    the framework has no default that perfcast models)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(description="Canonical name (the file stem).")
    description: str = Field(description="What the profile describes (era, recipes covered).")
    aliases: tuple[FrameworkAlias, ...] = Field(min_length=1, description="Names that select it.")
    data_parallel_sharding: tuple[SourcedValue[DataParallelSharding], ...] = Field(
        description="What the data-parallel group shards when the user names no sharding.")
    grad_reduce_dtype: tuple[SourcedValue[GradReduceDtype], ...] = Field(
        default=(), description="Dtype of gradient reduction over data parallel.")
    sequence_parallel: tuple[SourcedValue[bool], ...] = Field(
        default=(), description="Sequence parallelism whenever TP > 1.")
    tp_comm_overlap: tuple[SourcedValue[bool], ...] = Field(
        default=(), description="TP communication overlapped with GEMMs (TP > 1 with SP).")
    expert_tensor_parallel: tuple[SourcedValue[ExpertTensorParallel], ...] = Field(
        default=(), description="Expert tensor-parallel size when EP > 1.")
    moe_token_dispatcher: tuple[SourcedValue[MoeDispatcher], ...] = Field(
        default=(), description="MoE token dispatcher when EP > 1.")
    expert_parallel_unstated: tuple[SourcedValue[ExpertParallelUnstated], ...] = Field(
        default=(), description="EP size of a run that names DeepEP / HybridEP (which need "
                                "EP > 1) but states no EP size; empty = EP 1 (the Strategy "
                                "default).")
    moe_router_force_load_balancing: tuple[SourcedValue[bool], ...] = Field(
        default=(), description="Benchmark routing: every expert gets the same tokens (forced "
                                "load balancing, or token dropping at capacity factor 1) when "
                                "the run states no routing; empty = the learned router.")
    recompute: tuple[SourcedValue[RecomputeDefault], ...] = Field(
        description="Activation recomputation.")
    overlap_grad_reduce: tuple[SourcedValue[bool], ...] = Field(
        default=(), description="DDP / ZeRO-1/2 gradient reduction overlapped with the backward; "
                                "empty = overlapped (the Strategy default).")
    zero3_prefetch_params: tuple[SourcedValue[float], ...] = Field(
        default=(), description="ZeRO-3: parameters gathered ahead of use (prefetch bucket); "
                                "empty = the whole next module (FSDP).")
    zero3_max_live_params: tuple[SourcedValue[float], ...] = Field(
        default=(), description="ZeRO-3: most gathered parameters kept resident; a larger "
                                "recomputed layer is gathered again for its recompute forward; "
                                "empty = no limit (FSDP).")
    zero3_per_tensor_collectives: tuple[SourcedValue[bool], ...] = Field(
        default=(), description="ZeRO-3: one collective per partitioned weight tensor; "
                                "empty = one per layer (FSDP flat parameter).")
    zero3_host_ops_per_rank: tuple[SourcedValue[float], ...] = Field(
        default=(), description="ZeRO-3: host tensor operations per data-parallel rank in each "
                                "collective (tensor-list collective APIs); empty = none.")
    recompute_modules: tuple[SourcedValue[tuple[str, ...]], ...] = Field(
        default=(), description="Modules recomputed by selective recompute (informational).")
    fp8_recipe: tuple[SourcedValue[FP8Recipe], ...] = Field(
        default=(), description="Scaling recipe of a bare 'FP8' (no recipe named).")
    fp8_weight_cache: tuple[SourcedValue[bool], ...] = Field(
        default=(), description="FP8 weights cast once per step (True) or every forward.")
    fp8_tp_gather: tuple[SourcedValue[tuple[FP8Recipe, ...]], ...] = Field(
        default=(), description="FP8 recipes under which the sequence-parallel TP all-gathers "
                                "carry FP8 (Strategy.fp8_tp_gather); empty = 16-bit gathers.")
    attention_kernel: tuple[SourcedValue[AttentionKernel], ...] = Field(
        default=(), description="Fused-attention kernel class, per GPU generation.")
    flash_attention: tuple[SourcedValue[bool], ...] = Field(
        description="Whether a fused (flash) attention kernel exists at all.")
    eager_elementwise: tuple[SourcedValue[bool], ...] = Field(
        default=(), description="Element-wise ops run in PyTorch eager mode, one kernel per op "
                                "(True: no torch.compile and no fused kernels); empty = fused.")
    cuda_graphs: tuple[SourcedValue[str], ...] = Field(
        default=(), description="CUDA-graph scope (informational; not modelled).")
    pipeline_microbatches: tuple[SourcedValue[PipelineMicrobatches], ...] = Field(
        default=(), description="Micro-batches of a pipeline-parallel step when the run states "
                                "no micro-batch size: 'total_stages' (the local batch split "
                                "into pp x vpp micro-batches) or 'one_sequence'; empty = one "
                                "sequence per micro-batch.")
    pipeline_split: tuple[SourcedValue[PipelineSplit], ...] = Field(
        default=(), description="Default split of layers over pipeline stages (informational).")
    fp8_recipes_accepted: tuple[SourcedValue[tuple[FP8Recipe, ...]], ...] = Field(
        default=(), description="FP8/FP4 scaling recipes the framework runs, per GPU generation "
                                "(the search tries these); empty = only its fp8_recipe default.")
    data_parallel_shardings_accepted: tuple[
        SourcedValue[tuple[DataParallelSharding, ...]], ...] = Field(
        default=(), description="Data-parallel sharding options the framework offers (the "
                                "search tries only these); empty = no restriction known.")
    pipeline_splits_accepted: tuple[SourcedValue[tuple[PipelineSplitAccepted, ...]], ...] = Field(
        default=(), description="Layer splits over pp x vpp chunks the framework runs (the "
                                "search proposes only these); empty = no pipeline parallelism.")
    moe_token_dispatchers_accepted: tuple[SourcedValue[tuple[TrainingDispatcher, ...]], ...] = Field(
        default=(), description="MoE token dispatchers the framework runs, per GPU generation "
                                "(the search tries these where EP > 1); empty = its default.")
    ep_overlap_accepted: tuple[SourcedValue[bool], ...] = Field(
        default=(), description="Whether the framework overlaps the EP all-to-all with another "
                                "micro-batch's compute (the search tries it where EP > 1); "
                                "empty = no.")
    cp_comm_types_accepted: tuple[SourcedValue[tuple[CpCommType, ...]], ...] = Field(
        default=(), description="Context-parallel exchanges the framework runs (the search "
                                "tries these where cp > 1, a2a+p2p excepted: it needs the level "
                                "sizes); empty = the ring (p2p) only.")
    cp_implementation: tuple[SourcedValue[CpImplementation], ...] = Field(
        default=(), description="Who runs the context-parallel ring attention where cp > 1 "
                                "(transformer-engine or torch); empty = transformer-engine.")
    tensor_parallel_2d_accepted: tuple[SourcedValue[bool], ...] = Field(
        default=(), description="Whether the framework runs 2D tensor parallelism (the search "
                                "tries rows x cols grids); empty = no (no listed framework "
                                "does; the 'analytical' profile offers it).")
    pipeline_schedules_accepted: tuple[SourcedValue[tuple[PipelineSchedule, ...]], ...] = Field(
        default=(), description="Pipeline schedules the framework runs (the search tries only "
                                "these where pp > 1); empty = 1F1B and interleaved 1F1B.")
    cuda_graph_scopes_accepted: tuple[SourcedValue[tuple[CudaGraphScope, ...]], ...] = Field(
        default=(), description="CUDA-graph scopes the framework can capture in training (the "
                                "search tries only these); empty = its cuda_graphs default only.")
    recompute_modules_accepted: tuple[SourcedValue[tuple[RecomputeModule, ...]], ...] = Field(
        default=(), description="Modules its selective recompute can re-run (the search tries "
                                "the useful sets of them on the Pareto front of recompute "
                                "seconds and bytes freed, search.recompute_prune); empty = its "
                                "recompute_modules default only.")
    fp8_gemm_scopes_accepted: tuple[SourcedValue[tuple[FP8GemmScope, ...]], ...] = Field(
        default=(), description="Which GEMMs its FP8/FP4 recipes can convert (the search tries "
                                "these on models with routed experts); empty = all only.")
    activation_offload_accepted: tuple[SourcedValue[bool], ...] = Field(
        default=(), description="Whether the framework offloads whole layers' activations to "
                                "host memory (Megatron cpu_offloading_num_layers; the search "
                                "tries it where pp = 1 and no recompute); empty = no.")

    @model_validator(mode="after")
    def _check(self) -> TrainingFrameworkProfile:
        for alias in self.aliases:
            if alias.name != alias.name.lower():
                raise ValueError(f"alias {alias.name!r} must be lower case")
        return self


def pick(values: tuple[SourcedValue[T], ...], version: FrameworkVersion,
         generation: str | None = None) -> SourcedValue[T] | None:
    """The first value whose version range and generations match (None if none does)."""
    for candidate in values:
        if candidate.versions is not None and not version.within(candidate.versions):
            continue
        if candidate.generations is not None and (
                generation is None or generation not in candidate.generations):
            continue
        return candidate
    return None


@dataclass(frozen=True)
class ResolvedFramework:
    """A profile and the release asked for."""

    profile: TrainingFrameworkProfile
    version: FrameworkVersion
    alias: str
    """The alias that matched (as written in the profile)."""

    @property
    def label(self) -> str:
        """``torchtitan@0.2.2``, or ``megatron-core (nemo 25.07)`` when reached by an alias."""
        if self.alias == self.profile.name:
            return f"{self.alias}@{self.version.text}" if self.version.text else self.alias
        release = f" {self.version.text}" if self.version.text else ""
        return f"{self.profile.name} ({self.alias}{release})"


@cache
def training_profiles() -> tuple[TrainingFrameworkProfile, ...]:
    """Every shipped training framework profile, sorted by name."""
    profiles = []
    for path in sorted(TRAINING_FRAMEWORKS_DIR.glob("*.yaml")):
        data = read_mapping(path)
        if data.get("name") != path.stem:
            raise InputError("name", data.get("name"), f"must equal the file stem {path.stem!r}")
        profiles.append(build_spec(TrainingFrameworkProfile, data, str(path.name)))
    return tuple(profiles)


def framework_names() -> list[str]:
    """Canonical profile names."""
    return [profile.name for profile in training_profiles()]


def _normalized(text: str) -> str:
    return " ".join(text.lower().replace("_", "-").split())


def _match_alias(text: str) -> tuple[TrainingFrameworkProfile, FrameworkAlias] | None:
    """The profile whose alias is the longest prefix of ``text`` (at a word boundary)."""
    best: tuple[TrainingFrameworkProfile, FrameworkAlias] | None = None
    for profile in training_profiles():
        for alias in profile.aliases:
            if not text.startswith(alias.name):
                continue
            rest = text[len(alias.name):]
            if rest and (rest[0].isalpha() or (rest[0].isdigit() and alias.name[-1].isdigit())):
                continue
            if best is None or len(alias.name) > len(best[1].name):
                best = (profile, alias)
    return best


def load_framework_profile(spec: str) -> ResolvedFramework:
    """``NAME[@VERSION]`` or ``NAME VERSION`` (e.g. ``megatron-core@0.13``, ``NeMo 25.07``,
    ``torchtitan@2024-08``); ``InputError`` naming the value when no profile matches."""
    text = _normalized(spec)
    name, _, at_version = text.partition("@")
    found = _match_alias(name.strip())
    if found is None:
        raise InputError("framework", spec, f"unknown framework; known: {', '.join(framework_names())}")
    profile, alias = found
    version_text = (at_version or name[len(alias.name):]).strip(" -/v")
    if not version_text:
        return ResolvedFramework(profile, FrameworkVersion(), alias.name)
    return ResolvedFramework(profile, parse_cli_version(version_text, alias.scheme), alias.name)


def framework_of_text(text: str, dated: str = "") -> ResolvedFramework | None:
    """The profile a free-text framework description names (a ground-truth ``framework``
    column), with any version it or ``dated`` (``version_or_date``) states; None if none."""
    normalized = _normalized(text)
    found = _match_alias(normalized)
    if found is None:
        return None
    profile, alias = found
    version = find_versions(f"{normalized} {dated.lower()}", alias.name, alias.scheme, dated)
    return ResolvedFramework(profile, version, alias.name)
