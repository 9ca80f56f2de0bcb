"""The architecture of a ground-truth row: its own columns, completed from the catalog.

Order of precedence (../shared/ground_truth/README.md: "architecture, when the source or a cited
config gives it"):

1. the row's exact architecture columns (``num_layers``, ``hidden_size``, ``num_heads``,
   ``num_kv_heads``, ``ffn_hidden``, ``vocab_size``, ``moe_experts``, ``moe_topk``); inexact text
   such as ``"128K (paper)"`` counts as not stated;
2. features the row's ``arch_type``/``arch_source`` text names (``ALiBi``, ``no bias``, ``GELU``,
   ``parallel layers``, ``multi-query``);
3. the catalog model of the same name (``perfcast.catalog.models.load_model``) for everything
   else: activation, norms, positions, biases, tied embeddings, head_dim, MoE and MLA details;
4. without a catalog match, the documented defaults of the model family named by the row
   (``FAMILIES``); with neither, the row is skipped.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from perfcast.errors import format_validation_error
from perfcast.specs.model import Activation, ModelSpec, NormType, PositionEmbedding
from perfcast.validate.catalog_lookup import CatalogLookup
from perfcast.validate.csv_fields import RowError, cell_text, loose_int, lower_text, shared_experts
from perfcast.validate.vocabulary import read_arch_features
from perfcast.validate.vocabulary_names import model_stem

COLUMN_FIELDS: dict[str, str] = {
    "num_layers": "num_hidden_layers",
    "hidden_size": "hidden_size",
    "num_heads": "num_attention_heads",
    "num_kv_heads": "num_key_value_heads",
    "ffn_hidden": "intermediate_size",
    "vocab_size": "vocab_size",
    "moe_experts": "num_experts",
    "moe_topk": "num_experts_per_tok",
}
"""CSV architecture column -> ModelSpec field."""


@dataclass(frozen=True)
class FamilyDefaults:
    """Architecture facts of a model family that training.csv columns do not carry."""

    family: str
    activation: Activation
    norm_type: NormType
    position_embedding: PositionEmbedding
    bias: bool
    tie_word_embeddings: bool
    dropout: float
    vocab_size: int | None
    """Vocabulary when the row leaves it empty; None = the row must state it."""
    ffn_multiplier: int | None
    """MLP width = multiplier x hidden when the row leaves it empty; None = must be stated."""
    source: str


MPT = FamilyDefaults(
    family="mpt", activation="gelu", norm_type="layernorm", position_embedding="alibi",
    bias=False, tie_word_embeddings=True, dropout=0.0, vocab_size=50368, ffn_multiplier=4,
    source="ground_truth/README.md: 'MPT runs use FSDP, FlashAttention, ALiBi, GELU, expansion "
    "ratio 4, vocab 50,368'; llm-foundry mpt-*.yaml (no_bias, tied embeddings, no dropout)",
)
MEGATRON_GPT = FamilyDefaults(
    family="megatron-gpt", activation="gelu", norm_type="layernorm",
    position_embedding="learned", bias=True, tie_word_embeddings=True, dropout=0.1,
    vocab_size=51200, ffn_multiplier=4,
    source="Megatron-LM README (2021): vocab 51,200, seq 2048; megatron/training/arguments.py "
    "defaults: GELU 4h MLP, LayerNorm, learned positions, biases, tied embeddings, dropout 0.1",
)
LLAMA = FamilyDefaults(
    family="llama", activation="swiglu", norm_type="rmsnorm", position_embedding="rope",
    bias=False, tie_word_embeddings=False, dropout=0.0, vocab_size=None, ffn_multiplier=None,
    source="transformers LlamaConfig/LlamaMLP and MixtralConfig: SwiGLU, RMSNorm, RoPE, no "
    "biases, untied LM head",
)
FAMILIES = (MPT, MEGATRON_GPT, LLAMA)

REQUIRED_COLUMNS = ("num_layers", "hidden_size", "num_heads")
"""Columns a model outside the catalog needs at least (the rest may come from its family)."""
UNSUPPORTED_LAYERS = re.compile(
    r"gated deltanet|deltanet|linear[- ]attention|mamba|state[- ]space|\bssm\b", re.IGNORECASE)
"""Layer kinds named in ``arch_type`` that the operator graph has no model for."""

_MEGATRON_SOURCES = frozenset({"megatron_sc21", "korthikanti2022"})
_GPT_NAME = re.compile(r"^(gpt[\s-]?\d|gpt3|megatron)", re.IGNORECASE)


def family_of(row: Mapping[str, str | None]) -> FamilyDefaults | None:
    """The family whose defaults complete a row with no catalog match, or None (the name is
    read without organisation, notes and release suffixes: ``model_stem``)."""
    name = model_stem(cell_text(row, "model"))
    text = lower_text(row, "arch_type", "arch_source")
    if name.startswith("mpt") or "llm-foundry" in text or "mpt:" in text:
        return MPT
    if any(key in name for key in ("llama", "mixtral", "mistral")):
        return LLAMA
    if cell_text(row, "source_id") in _MEGATRON_SOURCES or _GPT_NAME.match(name):
        return MEGATRON_GPT
    return None


def text_features(row: Mapping[str, str | None]) -> dict[str, Any]:
    """ModelSpec fields named by the row's ``arch_type`` text (e.g. 'MPT: ALiBi, no bias'),
    read by ``perfcast.validate.vocabulary.read_arch_features``."""
    return read_arch_features(cell_text(row, "arch_type"))


def row_columns(row: Mapping[str, str | None]) -> dict[str, int]:
    """Exact architecture columns of the row as ModelSpec fields (inexact text left out)."""
    values = {field: loose_int(row, column) for column, field in COLUMN_FIELDS.items()}
    return {field: value for field, value in values.items() if value is not None}


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9.]+", "-", name.lower()).strip("-") or "model"


def _build(fields: dict[str, Any], where: str) -> ModelSpec:
    try:
        return ModelSpec.model_validate(fields)
    except ValidationError as exc:
        raise RowError(f"model ({where}): {format_validation_error(exc)}") from exc


def _catalog_updates(base: ModelSpec, columns: dict[str, int]) -> dict[str, Any]:
    """Row columns that differ from the catalog model (equal values are not overrides)."""
    updates: dict[str, Any] = {}
    for field, value in columns.items():
        if field == "num_key_value_heads" and value == base.num_kv_heads:
            continue
        if field == "intermediate_size" and base.is_moe and value == base.expert_intermediate_size:
            continue
        if getattr(base, field) != value:
            updates[field] = value
    heads = updates.get("num_attention_heads")
    if heads is not None and "num_key_value_heads" not in columns:
        # A multi-head model given a new head count stays multi-head; a grouped-query model
        # keeps its group count only where the row says nothing against it.
        if base.num_kv_heads == base.num_attention_heads:
            updates["num_key_value_heads"] = heads
        elif heads % base.num_kv_heads:
            raise RowError(f"num_heads={heads} differs from catalog {base.name} and "
                           f"num_kv_heads is not stated ({base.num_kv_heads} does not divide it)")
    elif heads is not None:
        updates["num_key_value_heads"] = columns["num_key_value_heads"]
    reshaped = {"hidden_size", "num_attention_heads"} & set(updates)
    if reshaped and base.head_dim == base.hidden_size // base.num_attention_heads:
        updates["head_dim"] = None
    return updates


def model_from_catalog(
    row: Mapping[str, str | None], base: ModelSpec, notes: list[str]
) -> ModelSpec:
    """The catalog model with the row's columns and text features applied."""
    updates = _catalog_updates(base, row_columns(row))
    updates.update({k: v for k, v in text_features(row).items() if getattr(base, k) != v})
    if updates:
        changed = ", ".join(f"{k} {getattr(base, k)}->{v}" for k, v in updates.items())
        notes.append(f"row overrides catalog {base.name}: {changed}")
    return _build({**base.model_dump(), **updates}, f"catalog {base.name} + row columns")


def model_from_family(
    row: Mapping[str, str | None], family: FamilyDefaults, seq_length: int, notes: list[str]
) -> ModelSpec:
    """A model built from the row's columns and the documented defaults of its family."""
    name = cell_text(row, "model")
    columns = row_columns(row)
    missing = [c for c in REQUIRED_COLUMNS if COLUMN_FIELDS[c] not in columns]
    if "intermediate_size" not in columns and family.ffn_multiplier is None:
        missing.append("ffn_hidden")
    if "vocab_size" not in columns and family.vocab_size is None:
        missing.append("vocab_size")
    if missing:
        raise RowError(
            f"model {name!r} is not in the catalog and the row lacks {', '.join(missing)}"
        )
    hidden = columns["hidden_size"]
    fields: dict[str, Any] = {
        "name": _slug(name),
        "intermediate_size": (family.ffn_multiplier or 0) * hidden,
        "vocab_size": family.vocab_size,
        "max_position_embeddings": seq_length,
        "activation": family.activation,
        "norm_type": family.norm_type,
        "position_embedding": family.position_embedding,
        "attention_bias": family.bias,
        "mlp_bias": family.bias,
        "tie_word_embeddings": family.tie_word_embeddings,
        "hidden_dropout": family.dropout,
        "attention_dropout": family.dropout,
        "source": f"ground truth row {cell_text(row, 'row_id')}: columns + {family.family} "
                  f"defaults ({family.source})",
    }
    fields.update(columns)
    shared = shared_experts(row)
    if shared:
        fields["num_shared_experts"] = shared
    fields.update(text_features(row))
    notes.append(f"model: from row columns ({name!r} not in catalog; {family.family} family "
                 "defaults for the rest)")
    return _build(fields, f"{family.family} defaults + row columns")


def row_model(
    row: Mapping[str, str | None], catalog: CatalogLookup, seq_length: int, notes: list[str]
) -> ModelSpec:
    """The ModelSpec of a row; raises ``RowError`` when neither catalog nor columns suffice."""
    name = cell_text(row, "model")
    if not name:
        raise RowError("model is empty")
    base = catalog.model(name)
    if base is not None:
        notes.extend(catalog.notes("model", name))
        return model_from_catalog(row, base, notes)
    missing = [c for c in REQUIRED_COLUMNS if COLUMN_FIELDS[c] not in row_columns(row)]
    if missing:
        raise RowError(
            f"model {name!r} is not in the catalog and the row lacks {', '.join(missing)}"
        )
    unsupported = UNSUPPORTED_LAYERS.search(cell_text(row, "arch_type"))
    if unsupported:
        raise RowError(
            f"model {name!r}: arch_type names {unsupported.group(0)!r} layers, which have no "
            "operator model (only attention + MLP/MoE decoder layers are modelled)"
        )
    family = family_of(row)
    if family is None:
        arch = cell_text(row, "arch_type") or "(empty)"
        raise RowError(
            f"model {name!r} is not in the catalog and arch_type {arch!r} names no family "
            "with documented defaults"
        )
    return model_from_family(row, family, seq_length, notes)
