"""``--fix KEY=VALUE`` / ``--exclude KEY=VALUE``: pinning or excluding one search dimension.

A value is checked against the dimension's options when it has a fixed set (booleans accept
true/false, yes/no, on/off, 1/0; sizes must be positive integers; ``recompute_modules`` a set of
Megatron-Core modules, ``core_attn,mlp`` or ``core_attn+mlp``, compared whatever the order), so a
typo is a one-line error naming the value instead of an empty search. ``recompute_modules``
pins apply to selective-recompute candidates and ``fp8_gemm_scope`` pins to FP8 candidates only
(the other candidates have no module set or scope to choose), as ``cp_comm_type`` pins apply
where cp > 1.
"""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

from perfcast.catalog.frameworks import TrainingDispatcher
from perfcast.errors import InputError
from perfcast.search.recompute_sets import module_set_text, parse_module_set
from perfcast.specs.strategy import (
    CP_COMM_TYPES,
    CudaGraphScope,
    FP8GemmScope,
    FP8Recipe,
    PipelineSchedule,
)

PinKey = Literal["tp", "pp", "vpp", "cp", "ep", "etp", "micro_batch_size", "schedule", "recompute",
                 "sharding", "precision", "fp8_recipe", "sequence_parallel", "tp_comm_overlap",
                 "ep_overlap", "moe_token_dispatcher", "cp_comm_type", "cp_a2a", "tp2d_rows",
                 "cuda_graphs", "offload", "recompute_modules", "fp8_gemm_scope"]
"""Search dimensions a user can pin (``--fix``) or exclude (``--exclude``)."""
PIN_ALIASES = {"mbs": "micro_batch_size", "sp": "sequence_parallel", "vp": "vpp",
               "dispatcher": "moe_token_dispatcher", "cp_comm": "cp_comm_type",
               "cuda_graph": "cuda_graphs", "cpu_offload_activation_layers": "offload",
               "hierarchical_cp_a2a_size": "cp_a2a",
               "cpu_offloading_num_layers": "offload", "modules": "recompute_modules",
               "fp8_scope": "fp8_gemm_scope"}
SIZE_KEYS = frozenset({"tp", "pp", "vpp", "cp", "ep", "etp", "micro_batch_size", "tp2d_rows",
                       "cp_a2a"})
"""Dimensions that take a positive size (cp_a2a: the inner, all-to-all level of a2a+p2p CP,
the first of Megatron's --hierarchical-context-parallel-sizes)."""
COUNT_KEYS = frozenset({"offload"})
"""Dimensions that take a count >= 0 (offload: layers whose activations go to host memory,
0 = none)."""
BOOL_KEYS = frozenset({"sequence_parallel", "tp_comm_overlap", "ep_overlap"})
BOOL_WORDS = {"true": "true", "yes": "true", "on": "true", "1": "true",
              "false": "false", "no": "false", "off": "false", "0": "false"}
CHOICES: dict[str, tuple[str, ...]] = {
    "schedule": get_args(PipelineSchedule),
    "recompute": ("none", "selective", "full"),
    "sharding": ("none", "distributed_optimizer", "zero2", "fsdp"),
    "precision": ("bf16", "fp8"),
    "fp8_recipe": get_args(FP8Recipe),
    "moe_token_dispatcher": get_args(TrainingDispatcher),
    "cp_comm_type": CP_COMM_TYPES,
    "cuda_graphs": get_args(CudaGraphScope),
    "fp8_gemm_scope": get_args(FP8GemmScope),
}
"""Values of the dimensions with a fixed option set (the search's ``Sharding`` and recipes; the
CP exchanges it enumerates, ``search.framework_rules.SEARCHED_CP_COMM_TYPES``)."""


class Pin(BaseModel):
    """One ``KEY=VALUE`` of ``--fix`` / ``--exclude`` (value normalized, compared as text)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    key: PinKey = Field(description="Search dimension.")
    value: str = Field(min_length=1, description="Value, lower case (booleans: true/false).")

    @classmethod
    def parse(cls, text: str) -> Pin:
        """``KEY=VALUE`` (``InputError`` naming the text when malformed, the key unknown or
        the value not one the dimension takes)."""
        key, sep, value = text.partition("=")
        key = key.strip().lower().replace("-", "_")
        key = PIN_ALIASES.get(key, key)
        value = value.strip().lower()
        if not sep or not value or key not in get_args(PinKey):
            raise InputError("pin", text, f"expected KEY=VALUE with KEY one of "
                             f"{', '.join(get_args(PinKey))}")
        if key in SIZE_KEYS and not (value.isdigit() and int(value) > 0):
            raise InputError("pin", text, f"{key} takes a positive integer")
        if key in COUNT_KEYS and not value.isdigit():
            raise InputError("pin", text, f"{key} takes a layer count (0 = none)")
        if key in SIZE_KEYS | COUNT_KEYS:
            value = str(int(value))
        if key in BOOL_KEYS:
            if value not in BOOL_WORDS:
                raise InputError("pin", text, f"{key} takes true or false")
            value = BOOL_WORDS[value]
        if key == "recompute_modules":  # a set: canonical order, comma-separated
            value = module_set_text(parse_module_set(value))
        if key in CHOICES and value not in CHOICES[key]:
            raise InputError("pin", text, f"{key} takes one of {', '.join(CHOICES[key])}")
        return cls.model_validate(dict(key=key, value=value))  # key checked against PinKey


def pin_text(value) -> str:
    """A dimension value as pins compare it (``True`` -> ``true``, 8 -> ``8``)."""
    return str(value).lower()
