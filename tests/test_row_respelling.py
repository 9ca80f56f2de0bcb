"""Respelling a public training row's free text never changes its forecast or drops it.

Each example takes one row of ../shared/ground_truth/training.csv and rewrites its free-text
cells the way other tables spell the same thing (case, vendor prefixes, memory sizes, boolean
words, Hugging Face organisations and release suffixes, sharding/recompute synonyms, unit
suffixes and thousands separators). The respelled row must parse whenever the original does,
to the same typed inputs (so the same forecast: ``estimate_training`` is pure); where the inputs
differ at all, the two forecasts must agree within 0.5%.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence
from functools import cache
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from perfcast.validate.compare import default_estimator
from perfcast.validate.training_rows import ParsedRow, parse_row, read_rows
from perfcast.validate.vocabulary import read_bool
from perfcast.validate.vocabulary_names import read_gpu_type

from conftest import shared_path

Row = dict[str, str | None]
FORECAST_TOLERANCE = 0.005


@cache
def _rows() -> tuple[Row, ...]:
    return tuple(read_rows(shared_path("ground_truth", "training.csv")))


@cache
def _parsed(index: int) -> ParsedRow | None:
    result = parse_row(_rows()[index])
    return result if isinstance(result, ParsedRow) else None


def _parsed_indices() -> list[int]:
    return [i for i in range(len(_rows())) if _parsed(i) is not None]


# ----- respellings (each: pick, text -> text; ``pick`` chooses one of a sequence) -------------

Pick = Callable[[Sequence[Any]], Any]


def _case(pick: Pick, text: str) -> str:
    return pick((text, text.lower(), text.upper()))


VENDORS = {"nvidia": "NVIDIA", "amd": "AMD Instinct"}


def _gpu_type(pick: Pick, text: str) -> str:
    found = read_gpu_type(text)
    assert found is not None
    gpu = found.system_spec.gpu
    out = text
    head, _, tail = out.partition(" (")
    if pick((False, True)) and not re.search(r"\d\s*GB", text, re.IGNORECASE):
        head = f"{head} {gpu.hbm_capacity_bytes / 1e9:g}GB"
    if pick((False, True)) and not re.search(r"\d\s*W\b", text):
        head = f"{head} {pick(('(700W)', '(1000W)', '(500W power limit)'))}"
    out = head + (f" ({tail}" if tail else "")
    if pick((False, True)):
        out = f"{VENDORS[gpu.vendor]} {out}"
    return _case(pick, out)


def _model(pick: Pick, text: str) -> str:
    out = text
    if pick((False, True)) and "/" not in text:
        out = pick(("some-org/", "meta-llama/", "Qwen/")) + out
    if pick((False, True)) and "(" not in text and "," not in text:
        out += pick(("-Instruct", "-Base", "-FP8", "-Instruct-2507"))
    return _case(pick, out)


TRUE_SPELLINGS = ("yes", "Yes", "true", "TRUE", "on", "enabled", "1")
FALSE_SPELLINGS = ("no", "No", "false", "off", "disabled", "0")


def _boolean(pick: Pick, text: str) -> str:
    value = read_bool(text, "sequence_parallel")
    if value is None:
        return text
    rest = re.sub(r"^\s*\w+", "", text)
    return pick(TRUE_SPELLINGS if value else FALSE_SPELLINGS) + rest


SYNONYMS = {
    "dp_sharding": {
        "none": ("no FSDP", "none", "DDP (FSDP=0)", "None"),
        "FSDP2": ("fsdp2", "FSDP2", "PyTorch FSDP2"),
        "distributed optimizer": ("ZeRO-1", "use_distributed_optimizer", "Distributed Optimizer"),
        "PyTorch FSDP FULL_SHARD": ("FSDP full_shard", "ZeRO-3", "FULL_SHARD"),
    },
    "recompute": {
        "none": ("off", "no activation checkpointing", "None", "disabled"),
        "full": ("full activation checkpointing", "FULL", "full recompute"),
        "full activation checkpointing": ("full", "Full (uniform)", "activation checkpointing"),
    },
    "precision": {
        "bf16": ("BF16", "bfloat16", "bf16 mixed"),
        "fp8": ("FP8",),
    },
}


def _synonym(pick: Pick, column: str, text: str) -> str:
    choices = SYNONYMS[column].get(text)
    return pick(choices) if choices else _case(pick, text)


def _count(pick: Pick, text: str, binary_suffix: bool) -> str:
    if not re.fullmatch(r"\d+", text):
        return text
    value = int(text)
    spellings = [text, f"{value:,}"]
    if binary_suffix and value % 1024 == 0:
        spellings.append(f"{value // 1024}k")
    if binary_suffix and value % 2**20 == 0:
        spellings.append(f"{value // 2**20}M")
    return pick(spellings)


def respell(row: Row, pick: Pick) -> Row:
    """A copy of ``row`` with every free-text cell respelled by ``pick``'s choices."""
    out = dict(row)
    text = {k: (v or "").strip() for k, v in row.items()}
    out["gpu_type"] = _gpu_type(pick, text["gpu_type"])
    out["model"] = _model(pick, text["model"])
    out["sequence_parallel"] = _boolean(pick, text["sequence_parallel"])
    for column in SYNONYMS:
        out[column] = _synonym(pick, column, text[column])
    out["seq_len"] = _count(pick, text["seq_len"], binary_suffix=True)
    out["global_batch_tokens"] = _count(pick, text["global_batch_tokens"], binary_suffix=True)
    out["global_batch_seqs"] = _count(pick, text["global_batch_seqs"], binary_suffix=False)
    return out


@st.composite
def respelled_rows(draw) -> tuple[int, Row]:
    index = draw(st.sampled_from(_parsed_indices()))
    return index, respell(_rows()[index], lambda options: draw(st.sampled_from(options)))


# ----- the property ----------------------------------------------------------------------------

def _inputs(parsed: ParsedRow) -> tuple:
    model = parsed.model.model_dump(exclude={"name", "source"})
    return (model, parsed.system, parsed.strategy, parsed.workload,
            parsed.measured_tokens_per_s_per_gpu)


@cache
def _forecast(index: int) -> float:
    parsed = _parsed(index)
    assert parsed is not None
    report = default_estimator()(parsed.model, parsed.system, parsed.strategy, parsed.workload)
    return report.tokens_per_s_per_gpu


def _check_same_forecast(index: int, row: Row) -> None:
    original = _parsed(index)
    assert original is not None
    respelled = parse_row(row)
    assert isinstance(respelled, ParsedRow), (row, getattr(respelled, "reason", ""))
    if _inputs(respelled) == _inputs(original):
        return
    report = default_estimator()(respelled.model, respelled.system, respelled.strategy,
                                 respelled.workload)
    assert report.tokens_per_s_per_gpu == pytest.approx(_forecast(index),
                                                        rel=FORECAST_TOLERANCE), row


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(respelled_rows())
def test_respelling_never_changes_the_forecast(case: tuple[int, Row]) -> None:
    _check_same_forecast(*case)


def test_every_parsed_row_respelled_forecasts_the_same() -> None:
    """Every public row that parses, respelled once with seeded random choices."""
    for index in _parsed_indices():
        chooser = random.Random(index)
        _check_same_forecast(index, respell(_rows()[index], chooser.choice))


def test_every_parsed_row_survives_its_own_spellings() -> None:
    """Deterministic sweep: upper and lower case of every free-text cell of every parsed row."""
    columns = ("gpu_type", "model", "dp_sharding", "recompute", "precision",
               "sequence_parallel")
    for index in _parsed_indices():
        for change in (str.lower, str.upper):
            row = dict(_rows()[index])
            for column in columns:
                row[column] = change(row[column] or "")
            respelled = parse_row(row)
            assert isinstance(respelled, ParsedRow), (index, getattr(respelled, "reason", ""))
            assert _inputs(respelled) == _inputs(_parsed(index)), (index, change)
