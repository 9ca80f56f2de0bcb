"""Ground-truth serving rows (fixed concurrency, request rate, offline; engines with a profile)
as typed cases for ``estimate_serving``.

A row of inference.csv is a serving row when its ``batching`` is ``continuous (fixed
concurrency N)``, ``continuous (request rate R/s)`` or ``offline-max-throughput``, or when it is
a ``batch-1``/``static`` run of an engine whose serving profile covers the row's version
(``catalog.serving_engines``: vLLM, SGLang, TensorRT-LLM ≥ 0.17 PyTorch backend). Rules (each
recorded in the case's ``notes``):

* engine and version from ``framework`` (NIM: TensorRT-LLM engines with the checkpoint's FP8
  KV cache; AMD ATOM: a nano-vllm-style prefill-first scheduler); an engine without a profile
  runs on the vLLM profile, the most common open-source scheduler (noted);
* statistic: ``MEDIAN`` in the notes → median, else mean (notes saying the statistic is not
  stated: the steady-state mean, the c prompts sent at t = 0 left out,
  ``statistic_unstated``); an ITL stored as ``tpot`` compares
  with the simulated ITL; units ``ms``/``s`` converted; throughput ``tokens/s/GPU`` per GPU,
  ``tokens/s`` for the deployment (output tokens), ``req/s`` requests;
* lengths: ``random-range-ratio 0.8`` in the notes → uniform in [0.8 L, L], ``+-15% variance``
  → uniform in [0.85 L, 1.15 L]; requests: ``10*conc``
  / ``N prompts`` / ``N requests`` in the notes, else 10 × concurrency (≥ 100), at most
  ``MAX_SIMULATED_REQUESTS``;
* precision: FP8 (W+A; ``FP8 KV`` also the cache), NVFP4/MXFP4/FP4 (W+A on GPUs with FP4 tensor
  cores; MoE-only MXFP4 ``as released`` with BF16 activations = FP4 weights), INT4 weight-only,
  BF16/FP16; ``ep`` empty or 0 = no expert parallelism; attention DP when the notes say so.
* engine settings the notes state (token budget, max sequences, memory fraction) replace the
  profile's defaults (``engine_overrides``; per rank under attention DP);
* skipped with a reason: disaggregated prefill/decode, production traffic, prefill-only
  (``input_throughput_per_gpu``) and speculative/MTP rows.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypedDict

from perfcast.catalog.serving_engines import engine_from_text
from perfcast.specs.hardware import SystemSpec
from perfcast.specs.model import ModelSpec
from perfcast.specs.serving import ServingWorkload
from perfcast.specs.strategy import Strategy
from perfcast.validate.catalog_lookup import CatalogLookup
from perfcast.validate.csv_fields import RowError, cell_float, cell_text, positive_int

Row = Mapping[str, str | None]

MAX_SIMULATED_REQUESTS = 20_000
"""Cap on simulated requests per row (steady-state statistics converge long before)."""

SERVING_METRICS: dict[str, str] = {
    "ttft": "ttft", "tpot": "tpot", "itl": "itl", "decode_latency_per_token": "tpot",
    "e2e_latency": "e2e_latency", "total_latency": "e2e_latency",
    "output_throughput_per_gpu": "output_tokens_per_s_per_gpu",
    "output_throughput_total": "output_tokens_per_s", "output_throughput": "output_tokens_per_s",
    "request_throughput": "requests_per_s",
}
"""Row metric -> simulated quantity (latencies take the row's statistic)."""

SERVING_ONLY_METRICS = frozenset({"tpot", "itl", "output_throughput_total", "request_throughput"})
"""Metrics only serving benchmarks report: a batch-1/static row stating one is a serving run."""

UNIT_FACTORS = {"ms": 1e3, "s": 1.0, "tokens/s/gpu": 1.0, "tokens/s": 1.0, "req/s": 1.0}
"""Row unit -> factor from SI seconds / per-second quantities."""

ENGINE_VERSION_FLOOR = {"tensorrt-llm": "0.17"}
"""Oldest engine version a profile describes (TensorRT-LLM's PyTorch backend / trtllm-serve);
older TensorRT-LLM rows are static-batch engine benchmarks of ``estimate_inference``."""

_ENGINE_OVERRIDES = (
    (re.compile(r"(?:max[-_]num[-_]batched[-_]tokens|max_num_tokens|chunked[-_]prefill[-_]size)"
                r"[\s=:]+(\d+)", re.I), "token_budget_per_step", int),
    (re.compile(r"(?:max[-_]num[-_]seqs|max[-_]running[-_]requests)[\s=:]+(\d+)", re.I),
     "max_running_seqs", int),
    (re.compile(r"max_batch_size[\s=:]+(\d+)\b", re.I), "max_running_seqs", int),
    (re.compile(r"(?:gpu[-_]memory[-_]utilization|mem[-_]fraction[-_]static)[\s=:]+([\d.]+)",
                re.I), "gpu_memory_fraction", float),
    (re.compile(r"(?:kv_cache_free_gpu_mem_fraction|free_gpu_memory_fraction)[\s=:]+([\d.]+)",
                re.I), "gpu_memory_fraction", float),
    (re.compile(r"(?:num[-_]scheduler[-_]steps|scheduler[-_]recv[-_]interval)[\s=:]+(\d+)",
                re.I), "scheduler_steps", int),
)
"""Engine settings a row's notes state (``--max-num-batched-tokens 512``, ``max_num_tokens
2048``, ...): they replace the profile's defaults for that row. The values are per scheduler:
with attention DP each rank runs one (``max_batch_size 896 per rank``) and ``estimate_serving``
sums the tp ranks (``serving.attention_dp_scheduler``)."""


_CHUNKED_PREFILL = re.compile(r"chunked[-_ ]prefill[\s=:]+(on|off|true|false)\b", re.I)
"""'chunked prefill on' / 'chunked prefill off' (dstack's vLLM 0.6 rows state it)."""


def engine_overrides(notes_text: str) -> dict[str, Any]:
    """Scheduler settings stated in the notes, by ``EngineConfig`` field."""
    found: dict[str, Any] = {}
    for pattern, setting, kind in _ENGINE_OVERRIDES:
        match = pattern.search(notes_text)
        if match and setting not in found:
            found[setting] = kind(match.group(1))
    chunked = _CHUNKED_PREFILL.search(notes_text)
    if chunked:
        found["chunked_prefill"] = chunked.group(1).lower() in ("on", "true")
    return found


@dataclass(frozen=True)
class ServingCase:
    """One measured serving metric, ready for ``estimate_serving``."""

    row_id: str
    source_id: str
    model: ModelSpec
    system: SystemSpec
    strategy: Strategy
    workload: ServingWorkload
    options: dict[str, Any]
    """Keyword arguments of ``estimate_serving`` (engine, version, precisions, attention DP)."""
    metric: str
    quantity: str
    statistic: str
    """mean, median or batch (static: the whole batch's latency)."""
    unit: str
    measured: float
    engine: str
    notes: tuple[str, ...] = field(default=())


def is_serving_row(row: Row) -> bool:
    batching = cell_text(row, "batching").lower()
    if batching.startswith("continuous") or batching.startswith("offline"):
        return True
    if batching not in ("batch-1", "static"):
        return False
    if cell_text(row, "metric") in SERVING_ONLY_METRICS:
        return True
    found = engine_from_text(cell_text(row, "framework"))
    if found is None:
        return False
    engine, version = found
    floor = ENGINE_VERSION_FLOOR.get(engine)
    if floor is None:
        return True
    if version is None:
        return "pytorch" in cell_text(row, "framework").lower()
    return tuple(map(int, version.split("."))) >= tuple(map(int, floor.split(".")))


def _skip_reason(row: Row) -> str | None:
    text = (cell_text(row, "framework") + " " + cell_text(row, "notes")).lower()
    batching = cell_text(row, "batching").lower()
    if "production traffic" in batching:
        return "production-traffic average: not a benchmark workload"
    if cell_text(row, "metric") == "input_throughput_per_gpu":
        return "prefill-only throughput of a disaggregated instance: not simulated"
    if "disaggregat" in text or "pd disagg" in text:
        return "disaggregated prefill/decode: not simulated"
    if "mtp" in text.split("no mtp")[0] or "speculative" in text:
        return "speculative decoding (MTP) without a stated acceptance rate"
    return None


def _model(row: Row, catalog: CatalogLookup, notes: list[str]) -> ModelSpec:
    name = cell_text(row, "model")
    base = name.split("(")[0].strip()
    model = catalog.model(base)  # spellings and architecture twins: validate.vocabulary_names
    if model is None:
        raise RowError(f"model={name!r}: not in the catalog")
    return model


def _system(row: Row, catalog: CatalogLookup, notes: list[str]) -> SystemSpec:
    gpu_type = cell_text(row, "gpu_type")
    system = catalog.system(gpu_type)  # spellings: validate.vocabulary_names
    if system is None:
        raise RowError(f"gpu_type={gpu_type!r}: no catalog system")
    return system


def _precision(row: Row, system: SystemSpec, notes: list[str]) -> dict[str, Any]:
    text = cell_text(row, "precision").lower()
    kv = "fp8" if re.search(r"fp8 \(?e4m3\)? kv|fp8 kv|fp8-kv", text) else None
    if "int4" in text:
        return {"precision": "bf16", "weight_precision": "int4", "kv_precision": kv}
    if "fp4" in text:
        if "bf16 activations" in text or "as released" in text:
            return {"precision": "bf16", "weight_precision": "fp4", "kv_precision": kv}
        if system.gpu.supports("fp4"):
            return {"precision": "fp4", "kv_precision": kv}
        notes.append("FP4 weights on a GPU without FP4 tensor cores: weight-only FP4")
        return {"precision": "bf16", "weight_precision": "fp4", "kv_precision": kv}
    if "fp8" in text and "bf16 weights" not in text:
        return {"precision": "fp8", "kv_precision": kv}
    if "fp16" in text and "bf16" not in text:
        return {"precision": "fp16", "kv_precision": kv}
    if "bf16" in text or not text:
        if not text:
            notes.append("precision empty: bf16")
        return {"precision": "bf16", "kv_precision": kv}
    raise RowError(f"precision={cell_text(row, 'precision')!r}: not understood")


_ATTENTION_DP = re.compile(r"(attention[- ]dp|dp[- ]attention|attention data)(\s*[=:]\s*(on|off))?")


def attention_dp_stated(notes_text: str) -> bool:
    """Whether the notes say attention DP was on: named ('--enable-dp-attention', 'attention
    DP + EP8', 'DP-attention=on'), and not switched off ('DP-attention=off', InferenceX's
    field for a run without it)."""
    return any(m.group(3) != "off" for m in _ATTENTION_DP.finditer(notes_text.lower()))


def _num_requests(notes_text: str, clients: int) -> int:
    per_client = re.search(r"(\d+)\s*[*×]\s*conc", notes_text)
    if per_client:
        n = int(per_client.group(1)) * clients
    else:
        match = re.search(r"([\d,]+) (?:prompts|requests)", notes_text)
        n = int(match.group(1).replace(",", "")) if match else max(10 * clients, 100)
    return max(1, min(n, MAX_SIMULATED_REQUESTS))


class _Lengths(TypedDict):
    """Prompt/output lengths every workload of a row shares (``ServingWorkload`` fields)."""

    input_len: int
    output_len: int
    length_range_ratio: float


def _workload(row: Row, notes: list[str]) -> tuple[ServingWorkload, str]:
    batching = cell_text(row, "batching").lower()
    text = cell_text(row, "notes").lower()
    input_len, output_len = positive_int(row, "input_len"), positive_int(row, "output_len")
    if input_len is None or output_len is None:
        raise RowError("input_len/output_len not stated")
    ratio = 0.8 if "random-range-ratio 0.8" in text else 1.0
    spread = re.search(r"(?:\+-|±)\s*(\d+)\s*% variance", text)
    if spread:  # lengths uniform in [(1 − v)·L, (1 + v)·L]: top (1 + v)·L, ratio (1 − v)/(1 + v)
        v = int(spread.group(1)) / 100
        input_len, output_len = round(input_len * (1 + v)), round(output_len * (1 + v))
        ratio = (1 - v) / (1 + v)
        notes.append(f"lengths ±{spread.group(1)}% around the nominal (uniform)")
    common = _Lengths(input_len=input_len, output_len=output_len, length_range_ratio=ratio)
    rate = re.search(r"request rate ([\d.]+)", batching)
    if rate:
        n = _num_requests(text, 100)
        return ServingWorkload(mode="request_rate", request_rate_per_s=float(rate.group(1)),
                               num_requests=n, **common), "request_rate"
    clients = re.search(r"fixed concurrency (\d+)", batching)
    if clients:
        c = int(clients.group(1))
        warmup = c if statistic_unstated(text) and c > 1 else 0
        if warmup:
            notes.append(f"statistic not stated: the steady state, the {c} prompts sent at "
                         f"t = 0 left out (start-up burst)")
        return ServingWorkload(mode="concurrency", concurrency=c, warmup_requests=warmup,
                               num_requests=_num_requests(text, c), **common), "concurrency"
    batch = positive_int(row, "batch_size_or_concurrency") or 1
    if batching == "static":
        notes.append("static batch: all requests queued at once, latency of the whole batch")
        return ServingWorkload(mode="offline", num_requests=batch, **common), "static"
    if batching == "batch-1":
        return ServingWorkload(mode="concurrency", concurrency=1,
                               num_requests=_num_requests(text, 1) if "requests" in text else 10,
                               **common), "batch-1"
    raise RowError(f"batching={cell_text(row, 'batching')!r}: offline run without a batch size")


def statistic_unstated(notes_text: str) -> bool:
    """Whether the notes say the page does not state its statistic. Such a page measured the
    steady state: a closed loop sends all c clients' prompts at t = 0, and their queue, at
    least (c − 1)/2 prefills on average for those c requests, puts a floor of c(c − 1)/(2N)
    prefill times under a mean over N requests (AIPerf 0.13 sends N = max(10, 2c) by default,
    and its warm-up phase drains before profiling starts: cli_config.py ``request_count``,
    config/phases.py ``seamless`` False). NIM's 5000/500 TTFT at c = 25 and 50 (689, 835 ms,
    a 407 ms prefill at c = 1) sit below that floor even at N = 10c, while its ITL matches the
    mean over the run's steps, not the median step gap (simulated 58 and 23 ms at c = 50,
    published 60 ms): a mean over the steady state, the c requests of the start-up burst left
    out (``ServingWorkload.warmup_requests``)."""
    return "not state" in notes_text.lower()


def row_statistic(notes_text: str, metric: str) -> str:
    """mean or median of a latency row, from its notes: the word right before the metric
    ('MEAN TTFT', 'median TTFT (mean ...)'), else a plural statement ('TTFT/TPOT are
    MEDIANS'), else any 'median'; unstated = mean (benchmark_serving's headline)."""
    text = notes_text.lower()
    names = {"ttft": "ttft", "tpot": "(?:tpot|itl)", "itl": "itl", "e2e_latency": "e2e"}
    name = names.get(metric, re.escape(metric))
    adjacent = re.search(rf"\b(mean|median)s?\s+{name}", text)
    if adjacent:
        return adjacent.group(1)
    stated = re.search(r"\bare\s+(mean|median)s\b", text)
    if stated:
        return stated.group(1)
    if statistic_unstated(text):
        return "mean"
    return "median" if "median" in text else "mean"


def _statistic(row: Row, metric: str, kind: str) -> tuple[str, str]:
    text = cell_text(row, "notes").lower()
    quantity = SERVING_METRICS[metric]
    if metric == "tpot" and "itl" in text and ("used as tpot" in text or "instead of tpot" in text):
        quantity = "itl"
    if kind == "static" and quantity == "e2e_latency":
        return "batch_latency", "batch"
    return quantity, row_statistic(text, metric)


def parse_serving_row(row: Row, catalog: CatalogLookup, source_id: str) -> ServingCase:
    """A serving row as a ``ServingCase``; raises ``RowError`` with the reason to skip it."""
    reason = _skip_reason(row)
    if reason:
        raise RowError(reason)
    metric, unit = cell_text(row, "metric"), cell_text(row, "unit")
    if metric not in SERVING_METRICS:
        raise RowError(f"metric={metric!r}: not a serving metric")
    if unit.lower() not in UNIT_FACTORS:
        raise RowError(f"unit={unit!r}: not understood")
    notes: list[str] = []
    tp = positive_int(row, "tp")
    if tp is None:
        raise RowError("tp is empty (parallel split not stated)")
    ep_text = cell_text(row, "ep")
    ep = int(ep_text) if ep_text.isdigit() and int(ep_text) > 0 else 1
    model = _model(row, catalog, notes)
    system = _system(row, catalog, notes)
    gpus = positive_int(row, "gpu_count") or tp
    if gpus % tp:
        raise RowError(f"gpu_count={gpus} is not a multiple of tp={tp}")
    system = system.with_num_gpus(gpus)
    if not model.is_moe:
        ep = 1
    strategy = Strategy(num_gpus=gpus, tp=tp, ep=ep, etp=tp // ep if ep > 1 else None)
    workload, kind = _workload(row, notes)
    found = engine_from_text(cell_text(row, "framework"))
    if found is None:
        found = ("vllm", None)
        notes.append("engine without a serving profile: vLLM defaults")
    text = cell_text(row, "notes").lower()
    attention_dp = tp > 1 and attention_dp_stated(text)
    options = {"engine": found[0], "engine_version": found[1], "attention_dp": attention_dp,
               **_precision(row, system, notes)}
    overrides = engine_overrides(cell_text(row, "notes"))
    if overrides:
        options["engine_overrides"] = overrides
        notes.append(f"engine settings from the notes: {overrides}")
    measured = cell_float(row, "value")
    if measured is None or measured <= 0 or not math.isfinite(measured):
        raise RowError(f"value={cell_text(row, 'value')!r} must be a positive number")
    quantity, statistic = _statistic(row, metric, kind)
    return ServingCase(
        row_id=cell_text(row, "row_id"), source_id=source_id, model=model, system=system,
        strategy=strategy, workload=workload, options=options, metric=metric, quantity=quantity,
        statistic=statistic, unit=unit, measured=measured, engine=found[0], notes=tuple(notes))
