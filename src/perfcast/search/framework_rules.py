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
from perfcast.specs.strategy import Strategy

DEFAULT_SEARCH_FRAMEWORK = "megatron-core"
"""The framework whose rules the search follows unless told otherwise."""

SPLIT_FLAGS: dict[PipelineSplitAccepted, tuple[str, ...]] = {
    "even": (),
    "embedding_as_layer": ("--account-for-embedding-in-pipeline-split",),
    "embedding_and_loss_as_layers": ("--account-for-embedding-in-pipeline-split",
                                     "--account-for-loss-in-pipeline-split"),
    "uneven": (),
}
"""Megatron-LM flags that configure each split (MLM:args L826-836)."""

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

    @classmethod
    def of(cls, framework: ResolvedFramework, generation: str | None = None) -> LayoutRules:
        profile, version = framework.profile, framework.version
        splits = pick(profile.pipeline_splits_accepted, version)
        shardings = pick(profile.data_parallel_shardings_accepted, version)
        recipes = pick(profile.fp8_recipes_accepted, version, generation)
        return cls(framework=framework.label, pipeline_splits=splits.value if splits else (),
                   shardings=shardings.value if shardings else None,
                   fp8_recipes=recipes.value if recipes else ())

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
            if (num_layers + _EXTRA_LAYERS[split]) % chunks == 0:
                return split
        return None

    def split_fields(self, num_layers: int, pp: int, vpp: int) -> dict[str, bool]:
        """``Strategy`` fields of the accepted split (the embedding/loss accounting flags)."""
        flags = self.split_flags(num_layers, pp, vpp)
        return {"account_for_embedding_in_pipeline_split":
                "--account-for-embedding-in-pipeline-split" in flags,
                "account_for_loss_in_pipeline_split": "--account-for-loss-in-pipeline-split" in flags}

    def split_flags(self, num_layers: int, pp: int, vpp: int) -> tuple[str, ...]:
        """Framework flags the layout needs for its split (empty for an even split)."""
        split = self.pipeline_split(num_layers, pp, vpp)
        return SPLIT_FLAGS[split] if split is not None else ()


SHARED_OPTION_FIELDS = ("grad_reduce_dtype", "moe_token_dispatcher", "fp8_recipe",
                        "fp8_weight_cache", "flash_attention", "attention_kernel",
                        "zero3_prefetch_params", "zero3_max_live_params")
"""Framework defaults the search does not enumerate: the same for every candidate."""


def framework_options(framework: ResolvedFramework, generation: str | None) -> Strategy:
    """The framework's defaults for the options the search shares across candidates (its
    sharding, sequence parallelism, TP overlap, expert TP and recompute are enumerated)."""
    facts = RunFacts(tp=2, ep=2, precision="fp8", generation=generation, layers_per_stage=1)
    fields = apply_framework_profile(framework, {}, facts).fields
    return Strategy(num_gpus=1, **{k: v for k, v in fields.items() if k in SHARED_OPTION_FIELDS})


def interleaved_micro_batches_ok(num_micro_batches, pp):
    """Whether interleaved 1F1B runs ``num_micro_batches`` per step on ``pp`` stages: a whole
    number of groups of pp (MLM:MPC L431, L567-568; ``schedule.orders.schedule_plan``).
    Array-friendly."""
    return np.remainder(num_micro_batches, pp) == 0
