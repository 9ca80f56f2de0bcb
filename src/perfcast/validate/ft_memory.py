"""FasterTransformer measured GPU memory rows (inference.csv, metric ``gpu_memory_usage``).

The rows name GPT models by shape ("GPT-6.7B (32 layers, 32 heads x 128)"); FasterTransformer's
GPT guide uses Megatron GPT checkpoints: vocabulary 51,200, learned positions (2,048), LayerNorm,
GELU MLP of 4·h, biases, tied embeddings (gpt_guide.md, notes column of the same rows).
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from pathlib import Path

from perfcast.specs.model import ModelSpec

_SHAPE = re.compile(r"^(?P<name>[\w.\-]+) \((?P<layers>\d+) layers, (?P<heads>\d+) heads x (?P<dim>\d+)\)")
FT_VOCAB = 51200
FT_MAX_POSITIONS = 2048


@dataclass(frozen=True)
class FTMemoryRow:
    row_id: str
    model: ModelSpec
    tp: int
    pp: int
    batch_size: int
    context_tokens: int
    measured_bytes: float


def ft_gpt_model(description: str) -> ModelSpec | None:
    """ModelSpec of an FT GPT row's model description, or None if it does not parse."""
    match = _SHAPE.match(description)
    if match is None:
        return None
    heads, dim = int(match["heads"]), int(match["dim"])
    hidden = heads * dim
    return ModelSpec(
        name=match["name"].lower(),
        hidden_size=hidden,
        num_hidden_layers=int(match["layers"]),
        num_attention_heads=heads,
        intermediate_size=4 * hidden,
        vocab_size=FT_VOCAB,
        max_position_embeddings=FT_MAX_POSITIONS,
        activation="gelu",
        norm_type="layernorm",
        position_embedding="learned",
        attention_bias=True,
        mlp_bias=True,
        tie_word_embeddings=True,
        source="FasterTransformer gpt_guide.md (Megatron GPT checkpoint conventions)",
    )


def ft_memory_rows(path: Path) -> list[FTMemoryRow]:
    """All parseable ``gpu_memory_usage`` rows of an inference.csv-schema file (GB = 1e9 B)."""
    rows = []
    with open(path, newline="") as handle:
        for raw in csv.DictReader(handle):
            if raw["metric"] != "gpu_memory_usage" or raw["unit"] != "GB":
                continue
            model = ft_gpt_model(raw["model"])
            if model is None:
                continue
            rows.append(FTMemoryRow(
                row_id=raw["row_id"],
                model=model,
                tp=int(raw["tp"] or 1),
                pp=int(raw["pp"] or 1),
                batch_size=int(raw["batch_size_or_concurrency"]),
                context_tokens=int(raw["input_len"]) + int(raw["output_len"]),
                measured_bytes=float(raw["value"]) * 1e9,
            ))
    return rows
