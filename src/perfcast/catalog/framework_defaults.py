"""A framework profile's defaults as ``Strategy`` fields, with one assumption sentence each.

``apply_framework_profile`` is pure: given a resolved profile, the fields the user (or a
ground-truth row) stated explicitly, and the layout facts the defaults depend on (TP, EP,
precision, GPU generation, layers per stage), it returns the fields the profile fills in and
the assumptions it made. An explicit field is never overridden. The CLI (``perfcast train
--framework``) and ``perfcast validate`` (a row's ``framework`` column) both go through it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from perfcast.catalog.frameworks import ResolvedFramework, SourcedValue, pick

SHARDING_FIELDS = ("fsdp", "zero_stage", "distributed_optimizer")
"""Strategy fields that say how data parallelism shards; any one explicit keeps the profile's
sharding out."""
RECOMPUTE_FIELDS = ("recompute", "recompute_num_layers")
ROUTING_FIELDS = ("moe_router_force_load_balancing", "moe_load_imbalance", "moe_capacity_factor")
"""Strategy fields that state how tokens are routed; any one explicit keeps the profile's
benchmark routing out."""

_SHARDING: dict[str, dict[str, Any]] = {
    "none": {},
    "distributed_optimizer": {"distributed_optimizer": True},
    "zero2": {"zero_stage": 2},
    "fsdp": {"fsdp": True},
}


@dataclass(frozen=True)
class Assumption:
    """One default taken from a framework profile."""

    setting: str
    """Profile setting (``tp_comm_overlap``, ``fp8_recipe``, ...)."""
    value: Any
    """The value applied."""
    sentence: str
    """One human sentence, naming the framework and the value."""
    source: str
    """Where the profile read the value."""

    def to_dict(self) -> dict[str, Any]:
        return {"setting": self.setting, "value": self.value, "sentence": self.sentence,
                "source": self.source}

    def __str__(self) -> str:
        return f"{self.sentence} [source: {self.source}]"


@dataclass(frozen=True)
class RunFacts:
    """Layout facts the defaults depend on."""

    tp: int
    ep: int
    precision: str
    generation: str | None
    """GPU generation (``hopper``, ``blackwell``, ...); None when unknown."""
    layers_per_stage: int
    cp: int = 1


@dataclass(frozen=True)
class AppliedDefaults:
    """Fields a profile fills in, and why."""

    fields: dict[str, Any]
    assumptions: tuple[Assumption, ...]


def _recompute_fields(value: str, layers_per_stage: int) -> dict[str, Any]:
    if value == "every_second_layer":
        return {"recompute": "full", "recompute_num_layers": max(1, layers_per_stage // 2)}
    if value == "per_op":
        return {"recompute": "selective", "recompute_modules": ("op_sac",)}
    return {"recompute": value}


def _gathers_fp8(values: tuple[SourcedValue[Any], ...], version, generation: str | None,
                 recipe: str | None) -> bool:
    """Whether the profile's ``fp8_tp_gather`` recipes include the run's FP8 recipe."""
    chosen = pick(values, version, generation)
    return chosen is not None and recipe in chosen.value


def apply_framework_profile(
    framework: ResolvedFramework, explicit: Mapping[str, Any], facts: RunFacts
) -> AppliedDefaults:
    """Strategy fields the profile sets for the settings absent from ``explicit`` (a mapping of
    Strategy field -> value the user stated), and one ``Assumption`` per setting applied."""
    profile, version = framework.profile, framework.version
    fields: dict[str, Any] = {}
    assumptions: list[Assumption] = []

    def take(setting: str, values: tuple[SourcedValue[Any], ...], update) -> None:
        chosen = pick(values, version, facts.generation)
        if chosen is None:
            return
        fields.update(update(chosen.value))
        words = chosen.says or f"{setting} = {chosen.value}"
        assumptions.append(Assumption(setting=setting, value=chosen.value,
                                      sentence=f"{framework.label}: {words}",
                                      source=chosen.source))

    if not any(name in explicit for name in SHARDING_FIELDS):
        take("data_parallel_sharding", profile.data_parallel_sharding, _SHARDING.__getitem__)
    if "grad_reduce_dtype" not in explicit:
        take("grad_reduce_dtype", profile.grad_reduce_dtype,
             lambda v: {"grad_reduce_dtype": v})
    if facts.tp > 1 and "sequence_parallel" not in explicit:
        take("sequence_parallel", profile.sequence_parallel, lambda v: {"sequence_parallel": v})
    sequence_parallel = explicit.get("sequence_parallel", fields.get("sequence_parallel", False))
    if facts.tp > 1 and sequence_parallel and "tp_comm_overlap" not in explicit:
        take("tp_comm_overlap", profile.tp_comm_overlap, lambda v: {"tp_comm_overlap": v})
    if facts.ep > 1 and "etp" not in explicit:
        take("expert_tensor_parallel", profile.expert_tensor_parallel,
             lambda v: {"etp": 1 if v == "one" else None})
    if facts.ep > 1 and "moe_token_dispatcher" not in explicit:
        take("moe_token_dispatcher", profile.moe_token_dispatcher,
             lambda v: {"moe_token_dispatcher": v})
    if facts.ep > 1 and not any(name in explicit for name in ROUTING_FIELDS):
        take("moe_router_force_load_balancing", profile.moe_router_force_load_balancing,
             lambda v: {"moe_router_force_load_balancing": v})
    if facts.cp > 1 and "cp_comm_type" not in explicit:
        exchanges = pick(profile.cp_comm_types_accepted, version, facts.generation)
        if exchanges is not None and "p2p" not in exchanges.value:  # no ring: its own exchange
            take("cp_comm_type", profile.cp_comm_types_accepted,
                 lambda v: {"cp_comm_type": v[0]})
    if facts.cp > 1 and "cp_implementation" not in explicit:
        take("cp_implementation", profile.cp_implementation,
             lambda v: {"cp_implementation": v})
    if not any(name in explicit for name in RECOMPUTE_FIELDS):
        take("recompute", profile.recompute,
             lambda v: _recompute_fields(v, facts.layers_per_stage))
    for name in ("overlap_grad_reduce", "zero3_prefetch_params", "zero3_max_live_params",
                 "zero3_per_tensor_collectives", "zero3_host_ops_per_rank"):
        if name not in explicit:
            take(name, getattr(profile, name), lambda v, name=name: {name: v})
    if facts.precision == "fp8":
        if "fp8_recipe" not in explicit:
            take("fp8_recipe", profile.fp8_recipe, lambda v: {"fp8_recipe": v})
        if "fp8_weight_cache" not in explicit:
            take("fp8_weight_cache", profile.fp8_weight_cache, lambda v: {"fp8_weight_cache": v})
        recipe = explicit.get("fp8_recipe", fields.get("fp8_recipe"))
        if facts.tp > 1 and "fp8_tp_gather" not in explicit and _gathers_fp8(
                profile.fp8_tp_gather, version, facts.generation, recipe):
            take("fp8_tp_gather", profile.fp8_tp_gather, lambda v: {"fp8_tp_gather": True})
    if "eager_elementwise" not in explicit:
        take("eager_elementwise", profile.eager_elementwise,
             lambda v: {"eager_elementwise": v})
    if "flash_attention" not in explicit:
        take("flash_attention", profile.flash_attention, lambda v: {"flash_attention": v})
    flash = explicit.get("flash_attention", fields.get("flash_attention", True))
    if flash and "attention_kernel" not in explicit:
        take("attention_kernel", profile.attention_kernel, lambda v: {"attention_kernel": v})
    return AppliedDefaults(fields=fields, assumptions=tuple(assumptions))
