"""Ground-truth inference rows (../shared/ground_truth/inference.csv schema) as typed cases.

One row is one configuration × one metric (``metric``, ``value``, ``unit``). ``parse_inference_row``
turns it into an ``InferenceCase`` (model, system, strategy, estimate_inference keywords, the
metric and its measured value) or a ``SkippedRow`` naming the reason; it never raises.

Rules (each a documented default, recorded in ``notes``):

* model: the catalog model of the row's name; else a FasterTransformer GPT shape
  ("GPT-20B (44 layers, 48 heads x 128)", ``validate.ft_memory.ft_gpt_model``) or a shape
  written as "40 layers, d=5120, 40 heads, ffn 20480, vocab 50272";
* precision text: FP16 / BF16 / FP8 (W+A; "FP8 KV" also quantizes the cache) / INT8 or INT4
  weight-only; empty = FP16 (the FasterTransformer-era default);
* output length: empty = 1 for TTFT rows (a single output token) and 200 for gpt-fast
  per-user decode rows (generate.py ``max_new_tokens`` default, stated in the rows' notes);
* CUDA graphs, the TP all-reduce and the GQA decode-attention kernel: from the static-engine
  profile the ``framework`` column names (``catalog.inference_engines``: FasterTransformer,
  gpt-fast, TensorRT-LLM v0.5-v0.6 and v0.7), CUDA graphs also when the row's notes say the
  decode ran under them; other rows: the engines' one-shot all-reduce;
* metrics timed per layer or per operator, and speculative rows without an acceptance rate,
  are not forecast.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from perfcast.catalog.inference_engines import inference_engine_from_text
from perfcast.specs.hardware import SystemSpec
from perfcast.specs.model import ModelSpec
from perfcast.specs.strategy import Strategy
from perfcast.validate.catalog_lookup import CatalogLookup, default_catalog
from perfcast.validate.csv_fields import RowError, cell_float, cell_text, positive_int
from perfcast.validate.ft_memory import FT_MAX_POSITIONS, ft_gpt_model
from perfcast.validate.serving_rows import ServingCase, is_serving_row, parse_serving_row
from perfcast.validate.training_rows import SkippedRow

Row = Mapping[str, str | None]

INFERENCE_COLUMNS = frozenset({"metric", "value", "unit"})
"""Columns that mark the inference.csv schema (training.csv has none of them)."""

METRICS: dict[str, tuple[str, float]] = {
    "e2e_latency": ("e2e_latency_s", 1e3),
    "total_latency": ("e2e_latency_s", 1e3),
    "ttft": ("ttft_s", 1e3),
    "prefill_latency": ("ttft_s", 1e3),
    "decode_latency_per_token": ("tpot_s", 1e3),
    "output_throughput_per_gpu": ("output_tokens_per_s_per_gpu", 1.0),
    "output_throughput": ("output_tokens_per_s", 1.0),
    "decode_tokens_per_s_per_user": ("generated_tokens_per_s_incl_prefill", 1.0),
    "gpu_memory_usage": ("memory_total_bytes", 1e-9),
}
"""metric -> (report quantity, factor to the row's unit: ms, tokens/s, GB)."""

SECOND_UNITS = frozenset({"s", "sec", "secs", "second", "seconds"})
"""Unit texts of latencies stated in seconds rather than the usual milliseconds."""


def metric_quantity(metric: str, unit: str) -> tuple[str, float]:
    """(report quantity, factor to the row's unit): ``METRICS``, except that a latency whose
    unit says seconds is compared in seconds (factor 1, not 1e3)."""
    quantity, factor = METRICS[metric]
    if quantity.endswith("_s") and unit.strip().lower() in SECOND_UNITS:
        return quantity, 1.0
    return quantity, factor

PER_GPU_WHEN_UNSTATED = "per-gpu vs total not stated"
"""Unit text of TensorRT-LLM gptSessionBenchmark tables that do not say per GPU or total: the
benchmark divides by TP ("out_tps = output_seqlen*batch_size/total_latency/tp", TensorRT-LLM
performance.md methodology), so such values are compared per GPU."""

GPT_FAST_OUTPUT_LEN = 200
"""gpt-fast generate.py ``--max_new_tokens`` default (the rows' notes say the table uses it)."""

_SHAPE = re.compile(r"(?P<layers>\d+) layers, d=(?P<hidden>\d+), (?P<heads>\d+) heads, "
                    r"ffn (?P<ffn>\d+), vocab (?P<vocab>\d+)")


@dataclass(frozen=True)
class InferenceCase:
    """One measured inference metric, ready for ``estimate_inference``."""

    row_id: str
    source_id: str
    model: ModelSpec
    system: SystemSpec
    strategy: Strategy
    options: dict[str, Any]
    """Keyword arguments of ``estimate_inference`` (batch, lengths, precisions, batching)."""
    metric: str
    unit: str
    measured: float
    gpu_type: str = ""
    notes: tuple[str, ...] = field(default=())


def source_id(source: str) -> str:
    """Short, stable id of a source text: 'NVIDIA TensorRT-LLM docs: performance.md (...)' ->
    'tensorrt-llm-docs-performance-md' (words before any parenthesis, at most 6)."""
    text = re.sub(r"^NVIDIA\s+", "", source.split("(")[0])
    words = re.findall(r"[a-z0-9.]+(?:-[a-z0-9]+)*", text.lower())
    return "-".join(w.replace(".", "-") for w in words[:6])


def is_inference_schema(columns) -> bool:
    return INFERENCE_COLUMNS <= set(columns or ())


def _shape_model(description: str) -> ModelSpec | None:
    match = _SHAPE.search(description)
    if match is None:
        return None
    hidden, heads = int(match["hidden"]), int(match["heads"])
    return ModelSpec(
        name=description.split("(")[0].strip().lower().replace(" ", "-"),
        hidden_size=hidden, num_hidden_layers=int(match["layers"]), num_attention_heads=heads,
        intermediate_size=int(match["ffn"]), vocab_size=int(match["vocab"]),
        max_position_embeddings=FT_MAX_POSITIONS, activation="gelu", norm_type="layernorm",
        position_embedding="learned", attention_bias=True, mlp_bias=True,
        tie_word_embeddings=True, source=f"shape stated in the row: {description}")


def _model(row: Row, catalog: CatalogLookup) -> ModelSpec:
    name = cell_text(row, "model")
    model = catalog.model(name) or ft_gpt_model(name) or _shape_model(name)
    if model is None:
        raise RowError(f"model={name!r}: not in the catalog and no shape stated")
    return model


def _precision(row: Row, notes: list[str]) -> dict[str, str]:
    text = cell_text(row, "precision").lower()
    if not text:
        notes.append("precision empty: fp16")
        return {"precision": "fp16"}
    if "int8" in text or "int4" in text:
        weights = "int8" if "int8" in text else "int4"
        return {"precision": "bf16", "weight_precision": weights}
    if "fp8" in text:
        kv = "fp8" if "fp8 kv" in text else "fp16"
        return {"precision": "fp8", "kv_precision": kv}
    for fmt in ("bf16", "fp16"):
        if fmt in text:
            return {"precision": fmt}
    raise RowError(f"precision={cell_text(row, 'precision')!r}: not understood")


def _lengths(row: Row, metric: str, notes: list[str]) -> tuple[int, int]:
    input_len = positive_int(row, "input_len")
    if input_len is None:
        raise RowError("input_len is empty")
    output_len = positive_int(row, "output_len")
    if output_len is None:
        if metric in ("ttft", "prefill_latency"):
            output_len = 1
        elif metric == "decode_tokens_per_s_per_user":
            output_len = GPT_FAST_OUTPUT_LEN
        else:
            raise RowError(f"output_len is empty for metric {metric!r}")
        notes.append(f"output_len empty: {output_len}")
    return input_len, output_len


def _parse(row: Row, catalog: CatalogLookup) -> InferenceCase:
    notes: list[str] = []
    metric, unit = cell_text(row, "metric"), cell_text(row, "unit")
    if metric not in METRICS:
        raise RowError(f"metric={metric!r}: per-layer/per-operator metric, not forecast")
    if "speculative" in cell_text(row, "notes").lower():
        raise RowError("speculative decoding row without a stated acceptance rate")
    tp, pp = positive_int(row, "tp"), positive_int(row, "pp") or 1
    if tp is None:
        raise RowError("tp is empty (parallel split not stated)")
    ep = positive_int(row, "ep") or 1
    gpus = positive_int(row, "gpu_count") or tp * pp
    model = _model(row, catalog)
    gpu_type = cell_text(row, "gpu_type")
    system = catalog.system(gpu_type)
    if system is None:
        raise RowError(f"gpu_type={gpu_type!r}: no catalog system")
    system = system.with_num_gpus(gpus)
    strategy = Strategy(num_gpus=gpus, tp=tp, pp=pp, ep=ep, etp=tp // ep if ep > 1 else None)
    batch = positive_int(row, "batch_size_or_concurrency") or 1
    input_len, output_len = _lengths(row, metric, notes)
    measured = cell_float(row, "value")
    if measured is None or measured <= 0:
        raise RowError(f"value={cell_text(row, 'value')!r} must be a positive number")
    if metric == "output_throughput" and PER_GPU_WHEN_UNSTATED in unit.lower():
        metric = "output_throughput_per_gpu"
        notes.append("throughput unit per-GPU vs total unstated: per GPU (gptSessionBenchmark /tp)")
    engine = inference_engine_from_text(cell_text(row, "framework"))
    graphs = "cuda graphs" in cell_text(row, "notes").lower()
    if engine is not None:
        notes.append(f"engine profile {engine.name}: tp all-reduce {engine.tp_all_reduce}, "
                     f"decode CUDA graphs {engine.decode_cuda_graphs}, decode attention "
                     f"{engine.decode_attention_kernel}")
    options = {"batch_size": batch, "input_len": input_len, "output_len": output_len,
               "cuda_graphs": graphs,
               **({"static_engine": engine.name} if engine else {}),
               **_precision(row, notes)}
    return InferenceCase(
        row_id=cell_text(row, "row_id"), source_id=source_id(cell_text(row, "source")),
        model=model, system=system, strategy=strategy, options=options, metric=metric,
        unit=unit, measured=measured, gpu_type=gpu_type, notes=tuple(notes))


def parse_inference_row(row: Row, catalog: CatalogLookup | None = None
                        ) -> InferenceCase | ServingCase | SkippedRow:
    """One CSV row as an ``InferenceCase`` (static/batch-1 engine benchmarks), a ``ServingCase``
    (``validate.serving_rows``: concurrency, request rate, offline, or a serving engine's run),
    or a ``SkippedRow`` with the reason. Never raises."""
    try:
        if is_serving_row(row):
            return parse_serving_row(row, catalog or default_catalog(),
                                     source_id(cell_text(row, "source")))
        return _parse(row, catalog or default_catalog())
    except Exception as exc:  # noqa: BLE001 - a bad row must never stop the validation
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if not isinstance(exc, RowError):
            reason = f"{type(exc).__name__}: {reason}"
        return SkippedRow(row_id=cell_text(row, "row_id"), reason=reason,
                          source_id=source_id(cell_text(row, "source")))
