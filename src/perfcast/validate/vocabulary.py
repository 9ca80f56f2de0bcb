"""Free text of published training tables -> typed values (booleans, counts, precision, sharding,
recompute). GPU/system and model names are in ``perfcast.validate.vocabulary_names``.

Published tables spell the same setting many ways ("yes (TP>1)", "true", "on"; "FP8-CS",
"FP8 current scaling (tensorwise)"; "DDP (FSDP=0)", "none (DDP)"). Every reader here:

- takes the cell text and the column it came from;
- returns ``None`` for an empty cell (not stated: the caller applies a documented default);
- returns a typed value for a spelling it knows;
- raises ``VocabularyError`` naming the column and the value for anything else, never guessing.

Rules are tables of regular expressions tried in order; the first match wins. Negations are
removed before keywords are looked for, so "DDP (FSDP=0)" or "no FSDP" never reads as FSDP.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from perfcast.validate.csv_fields import RowError

FP8Recipe = Literal["tensorwise", "delayed", "rowwise", "rowwise-hp-wgrad", "blockwise", "mxfp8",
                    "nvfp4"]
"""The ``Strategy.fp8_recipe`` values (``perfcast.specs.strategy.FP8Recipe``)."""
ShardingKind = Literal["none", "distributed_optimizer", "zero2", "fsdp"]
RecomputeKind = Literal["none", "selective", "full", "every_other_layer"]


class VocabularyError(RowError):
    """A cell whose text no rule understands; the message names the column and the value."""

    def __init__(self, column: str, value: str, reason: str = "not understood") -> None:
        super().__init__(f"{column}={value!r}: {reason}")
        self.column = column
        self.value = value


def _clean(text: str | None) -> str:
    return " ".join((text or "").split())


# ----- booleans --------------------------------------------------------------------------------

TRUE_WORDS = frozenset({"yes", "y", "true", "t", "on", "enabled", "enable", "1"})
FALSE_WORDS = frozenset({"no", "n", "false", "f", "off", "disabled", "disable", "0", "none"})
_FIRST_WORD = re.compile(r"^\s*([a-z0-9]+)")


def parse_bool_word(word: str) -> bool | None:
    """True/False for one boolean word (case-insensitive), else None."""
    key = word.strip().lower()
    if key in TRUE_WORDS:
        return True
    if key in FALSE_WORDS:
        return False
    return None


def read_bool(text: str | None, column: str) -> bool | None:
    """A yes/no cell: the first word decides, remarks after it are ignored ("yes (TP>1)").

    Known words: yes/no, y/n, true/false, on/off, enabled/disabled, 1/0 (any case); empty ->
    None.
    """
    value = _clean(text)
    if not value:
        return None
    match = _FIRST_WORD.match(value.lower())
    result = parse_bool_word(match.group(1)) if match else None
    if result is None:
        raise VocabularyError(column, value, "not a yes/no value")
    return result


# ----- counts ----------------------------------------------------------------------------------

_COUNT = re.compile(r"^\s*(\d[\d,_]*(?:\.\d+)?)\s*([kmbt])?\s*(?:\(.*\))?\s*$", re.IGNORECASE)
_BINARY = {"k": 2**10, "m": 2**20, "b": 2**30, "t": 2**40}
_DECIMAL = {"k": 10**3, "m": 10**6, "b": 10**9, "t": 10**12}


def read_count(text: str | None, column: str, *, binary: bool) -> int | None:
    """A whole count with an optional thousands separator or k/M/B/T suffix.

    ``binary=True`` for token and sequence counts, where ML tables use powers of two
    ("4k" context = 4,096; OPT's "2M"-token batch = 1,024 x 2,048 = 2,097,152 tokens, OPT
    paper Table 1 and metaseq's 175B config); ``binary=False`` for SI counts (parameters).
    "1,024" -> 1024. Empty -> None; anything else (ranges, "up to") -> ``VocabularyError``.
    """
    value = _clean(text)
    if not value:
        return None
    match = _COUNT.match(value)
    if match is None:
        raise VocabularyError(column, value, "not a count")
    number = float(match.group(1).replace(",", "").replace("_", ""))
    suffix = (match.group(2) or "").lower()
    scale = (_BINARY if binary else _DECIMAL).get(suffix, 1)
    result = number * scale
    if result != int(result):
        raise VocabularyError(column, value, "not a whole count")
    return int(result)


# ----- precision and FP8/FP4 recipes -----------------------------------------------------------

@dataclass(frozen=True)
class PrecisionText:
    """What a ``precision`` cell states."""

    precision: Literal["bf16", "fp16", "fp8"]
    """GEMM precision (NVFP4 runs through the fp8 path with ``fp8_recipe='nvfp4'``)."""
    fp8_recipe: FP8Recipe | None = None
    """Scaling recipe; None when the cell names no recipe (a bare "fp8" of a framework
    whose default recipe the caller knows)."""
    pure_bf16_reduce: bool = False
    """Composer "MP mode PURE": gradients are reduced in bf16."""


FP8_RECIPE_RULES: tuple[tuple[str, FP8Recipe], ...] = (
    (r"nvfp4|\bfp4\b", "nvfp4"),
    (r"mxfp8|fp8[-_ ]?mx\b|\bmx[-_ ]?fp8|fp8 \(?mx", "mxfp8"),
    (r"rowwise[-_ ]?with[-_ ]?gw[-_ ]?hp|gw[-_ ]?hp|high[- ]precision (?:wgrad|weight[- ]grad)"
     r"|rowwise[-_ ]hp[-_ ]wgrad", "rowwise-hp-wgrad"),
    (r"row[-_ ]?wise", "rowwise"),
    (r"block[-_ ]?(?:wise|scaled|scaling|quantization)|\bblock\b|fp8[-_ ]?bs\b|deepseek.{0,6}recipe",
     "blockwise"),
    (r"delayed", "delayed"),
    (r"tensor[-_ ]?wise|per[-_ ]tensor|current[-_ ]?scaling|fp8[-_ ]?cs\b", "tensorwise"),
)
"""FP8/FP4 recipe names, most specific first: Transformer Engine recipes (DelayedScaling,
Float8CurrentScaling = "FP8-CS", MXFP8BlockScaling = "FP8-MX"/"MXFP8", Float8BlockScaling =
"block-scaled"/"blockwise" 1x128/128x128, NVFP4BlockScaling) and torchao Float8LinearConfig
recipes (tensorwise, rowwise, rowwise_with_gw_hp)."""

_FP8_WORD = re.compile(r"fp8|float8|e4m3|nvfp4|fp4|mxfp8")
_UNMODELLED_FORMATS = re.compile(r"mxfp4|mxfp6|\bfp6\b|\bint4\b|\bint8\b")
_FP16_WORD = re.compile(r"fp16|float16|half")
_BF16_WORD = re.compile(r"bf16|bfloat16")


def fp8_recipe_of(text: str) -> FP8Recipe | None:
    """The recipe named in lower-case text, or None."""
    for pattern, recipe in FP8_RECIPE_RULES:
        if re.search(pattern, text):
            return recipe
    return None


def read_precision(text: str | None, column: str = "precision") -> PrecisionText | None:
    """Precision and FP8 recipe of a cell ("bf16", "amp_fp8", "FP8-CS", "NVFP4 (...)", ...)."""
    value = _clean(text)
    if not value:
        return None
    lower = value.lower()
    pure = "mp mode pure" in lower
    unmodelled = _UNMODELLED_FORMATS.search(lower)
    if unmodelled:
        raise VocabularyError(column, value, f"no {unmodelled.group(0).upper()} training recipe "
                              "is modelled (fp8 recipes and NVFP4 are)")
    if _FP8_WORD.search(lower):
        return PrecisionText("fp8", fp8_recipe_of(lower), pure)
    if _FP16_WORD.search(lower.replace("bfloat16", "").replace("bf16", "")):
        return PrecisionText("fp16", None, pure)
    if _BF16_WORD.search(lower):
        return PrecisionText("bf16", None, pure)
    raise VocabularyError(column, value, "precision not understood")


# ----- data-parallel sharding ------------------------------------------------------------------

@dataclass(frozen=True)
class ShardingText:
    """What a ``dp_sharding`` cell states."""

    kind: ShardingKind
    """none (plain DDP), distributed_optimizer (ZeRO-1), zero2 (SHARD_GRAD_OP), fsdp (ZeRO-3)."""
    shard_size: int | None = None
    """FSDP/HSDP shard-group size when stated ("FSDP2 (FSDP size 64)", "HSDP (shard 8)")."""
    plain_ddp: bool = False
    """The cell says DDP/none without naming the optimizer (frameworks differ on its meaning)."""


_NEGATIONS = (
    re.compile(r"\b(?:fsdp|zero[-_ ]?3?|sharding)\s*[=:]\s*(?:0|no|off|false|disabled|none)\b"),
    re.compile(r"\b(?:no|without|w/o|disabled?)\s+(?:fsdp|zero|sharding)\w*"),
)
_FSDP_FLAG = re.compile(r"\bfsdp\s*[=:]\s*(1|yes|on|true|enabled)\b")
_SIZE_RULES = (
    re.compile(r"\bfsdp\d?(?:\s+|\s*[=:]\s*|\s*(?:size|degree)\s*[=:]?\s*)(\d+)\b(?![-‐ ]?way)"),
    re.compile(r"\((\d+)[-‐ ]?way\)"),
    re.compile(r"shard(?:_degree|ing)?\s*[=:]?\s*(\d+)"),
)
SHARDING_RULES: tuple[tuple[str, ShardingKind], ...] = (
    (r"shard_grad_op|zero[-_ ]?(?:stage[-_ ]?)?2\b|\bgrad[-_ ]op\b", "zero2"),
    (r"full_shard|\bh?fsdp\d?\b|megatron[-_ ]fsdp|zero[-_ ]?(?:stage[-_ ]?)?3\b|"
     r"fully sharded|\bhsdp\b", "fsdp"),
    (r"zero[-_ ]?(?:stage[-_ ]?)?1\b|distributed[-_ ]optimi[sz]er|dist[-_ ]opt\b",
     "distributed_optimizer"),
    (r"^(?:none|no|ddp|plain ddp|data parallel|dp)\b|\(ddp\)|\bddp\b|^$", "none"),
)
"""Sharding names, strongest first (PyTorch FSDP ShardingStrategy names, DeepSpeed ZeRO stages,
Megatron-Core ``--use-distributed-optimizer`` / Megatron FSDP, torchtitan FSDP2/HSDP)."""


def _without_negations(text: str) -> str:
    for pattern in _NEGATIONS:
        text = pattern.sub(" ", text)
    return " ".join(text.split())


def read_sharding(text: str | None, column: str = "dp_sharding") -> ShardingText | None:
    """Sharding of a cell: "PyTorch FSDP FULL_SHARD", "FSDP2 (FSDP size 64)", "DDP (FSDP=0)",
    "FSDP (FSDP=1)", "ZeRO-1 DP", "distributed optimizer", "none (DDP)", ..."""
    value = _clean(text)
    if not value:
        return None
    lower = value.lower()
    flag = _FSDP_FLAG.search(lower)
    stripped = _without_negations(lower)
    head = stripped.split(";", 1)[0].strip()
    for pattern, kind in SHARDING_RULES:
        if re.search(pattern, head) or (kind == "fsdp" and flag):
            if kind == "fsdp":
                return ShardingText("fsdp", _shard_size(head))
            plain = kind == "none"
            return ShardingText(kind, None, plain)
    raise VocabularyError(column, value, "sharding not understood")


def _shard_size(text: str) -> int | None:
    for pattern in _SIZE_RULES:
        match = pattern.search(text)
        if match and int(match.group(1)) > 1:
            return int(match.group(1))
    return None


# ----- activation recompute --------------------------------------------------------------------

@dataclass(frozen=True)
class RecomputeText:
    """What a ``recompute`` cell states."""

    kind: RecomputeKind
    """none, selective (part of each layer), full (every layer), every_other_layer
    (torchtitan "selective layer" AC: ``selective_ac_option='2'``)."""
    modules: tuple[str, ...] = ()
    """Megatron-Core ``--recompute-modules`` named in the cell (core_attn, mlp, moe_act, ...)."""


MEGATRON_RECOMPUTE_MODULES = ("core_attn", "moe_act", "layernorm", "mla_up_proj", "mlp", "moe",
                              "shared_experts")
"""``--recompute-modules`` choices of Megatron-Core (``TransformerConfig.recompute_modules``);
the default is ``core_attn``."""
_MODULE_SPELLINGS = (
    (r"attention core|core[_ ]attn|core attention", "core_attn"),
    (r"moe[_ ]act", "moe_act"),
    (r"layer[_ ]?norm", "layernorm"),
    (r"mla[_ ]up[_ ]proj|up[_ ]proj", "mla_up_proj"),
    (r"\bmlp\b", "mlp"),
    (r"\bmoe\b(?![_ ]act)", "moe"),
    (r"shared[_ ]experts?", "shared_experts"),
    # torchtitan per-op SAC (selective_ac_option = "op"): "per-op selective", "selective op",
    # "selective (op)", "SAC" (graph.op_sac)
    (r"per[-_ ]op\b|\bsac\b|\bop[_ ]sac\b|selective[-_ ]op\b|selective \(op\)", "op_sac"),
)
_UNSTATED = re.compile(r"^(?:none stated|not stated|unknown|n/?a|-)$")
RECOMPUTE_RULES: tuple[tuple[str, RecomputeKind], ...] = (
    (r"^(?:none|no|off|false|disabled|0)\b|\bno (?:activation )?(?:checkpointing|recompute)"
     r"|[:=]\s*(?:none|no|off|false|disabled|0)\b"
     r"|\b(?:ac|recompute|checkpointing|remat)\s+(?:off|none|disabled)\b", "none"),
    (r"selective[-_ ]layer\b|layer[-_ ]?(?:wise )?selective|every (?:2nd|other|second) layer",
     "every_other_layer"),
    (r"selective|per[-_ ]op|\bsac\b|--recompute-modules|core[_ ]attn", "selective"),
    (r"\bfull\b|uniform|block|\bremat|rematerial|"
     r"activation checkpointing|checkpoint[-_ ]activations|^(?:yes|on|true|enabled|1)\b", "full"),
)


def read_recompute(text: str | None, column: str = "recompute") -> RecomputeText | None:
    """Recompute of a cell ("none", "full activation checkpointing", "selective
    (--recompute-modules mlp moe_act)", "selective layer activation checkpointing", ...).
    "none stated" / "not stated" -> None (unstated)."""
    value = _clean(text)
    lower = value.lower()
    if not value or _UNSTATED.match(lower):
        return None
    for pattern, kind in RECOMPUTE_RULES:
        if re.search(pattern, lower):
            found = [(match.start(), m) for p, m in _MODULE_SPELLINGS
                     if (match := re.search(p, lower)) is not None]
            modules = tuple(m for _, m in sorted(found))  # in order of first mention
            return RecomputeText(kind, modules if kind == "selective" else ())
    raise VocabularyError(column, value, "recompute granularity not understood")


# ----- architecture features named in text -----------------------------------------------------

ARCH_FEATURE_RULES: tuple[tuple[str, dict[str, object]], ...] = (
    (r"\balibi\b", {"position_embedding": "alibi"}),
    (r"\bno[- ]bias(?:es)?\b|\bbias[- ]free\b|\bwithout bias", {"attention_bias": False,
                                                                "mlp_bias": False}),
    (r"\bgelu\b", {"activation": "gelu"}),
    (r"\bparallel (?:layers|attention|blocks)\b", {"parallel_attention_mlp": True}),
    (r"\bmulti[- ]query\b|\bmqa\b", {"num_key_value_heads": 1}),
)
"""``ModelSpec`` fields that an ``arch_type`` text names ("MPT: ALiBi, no bias, GELU",
"dense (parallel layers, multi-query attention)")."""


def read_arch_features(text: str | None) -> dict[str, object]:
    """ModelSpec fields named by architecture text; {} when it names none (never raises:
    the architecture columns, catalog and family carry the rest)."""
    lower = _clean(text).lower()
    features: dict[str, object] = {}
    for pattern, fields in ARCH_FEATURE_RULES:
        if re.search(pattern, lower):
            features.update(fields)
    return features
