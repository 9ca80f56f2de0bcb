"""Ground-truth training rows (../shared/ground_truth/training.csv schema) as typed inputs.

``parse_row`` turns one ``csv.DictReader`` row into a ``ParsedRow`` (model, system, strategy,
workload and the measured tokens/s/GPU) or a ``SkippedRow`` with the reason; it never raises.
The rules for architecture are in ``perfcast.validate.row_model``, for strategy and workload in
``perfcast.validate.row_strategy``, for FLOP conventions in ``perfcast.validate.flop_conventions``.

Measured value, first available of (recorded in ``measured_from``):

1. ``tokens_per_s_per_gpu`` (as published);
2. ``derived_tokens_per_s_per_gpu`` (simple arithmetic on published numbers, see ``notes``);
3. ``step_time_s``: global_batch·seq_len / step_time / num_gpus;
4. ``tflops_per_gpu`` converted with the source's own FLOP convention (README "Judge
   throughput, not published TFLOP/s").
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from perfcast.catalog.framework_defaults import RunFacts
from perfcast.errors import InputError, format_validation_error
from perfcast.specs.compat import check_strategy_for_model, check_workload_for_strategy
from perfcast.specs.hardware import SystemSpec
from perfcast.specs.model import ModelSpec
from perfcast.specs.strategy import Strategy
from perfcast.specs.workload import Workload
from perfcast.validate import row_strategy as rs
from perfcast.validate.catalog_lookup import CatalogLookup, default_catalog
from perfcast.validate.csv_fields import RowError, cell_float, cell_text, positive_int
from perfcast.validate.flop_conventions import (
    convention_for,
    flops_per_token,
    tokens_per_s_from_tflops,
)
from perfcast.validate.row_framework import framework_fields
from perfcast.validate.row_history import annotate_histories, history_settings
from perfcast.validate.row_model import row_model
from perfcast.validate.vocabulary import read_count

Row = Mapping[str, str | None]


@dataclass(frozen=True)
class ParsedRow:
    """One measured configuration, ready for ``estimate_training``."""

    row_id: str
    source_id: str
    quality: str
    model: ModelSpec
    system: SystemSpec
    strategy: Strategy
    workload: Workload
    measured_tokens_per_s_per_gpu: float
    measured_from: str
    """Which column the measurement comes from (e.g. 'tokens_per_s_per_gpu',
    'tflops_per_gpu (narayanan_4pass)')."""
    gpu_type: str = ""
    """The row's ``gpu_type`` text as published."""
    notes: tuple[str, ...] = field(default=())
    """Defaults and assumptions applied while parsing (one line each)."""

    @property
    def arch_type(self) -> str:
        return self.model.arch_type


@dataclass(frozen=True)
class SkippedRow:
    """A row that cannot be modelled, with the reason (names the column and value)."""

    row_id: str
    reason: str
    source_id: str = ""
    quality: str = ""


def _system(row: Row, catalog: CatalogLookup, num_gpus: int, notes: list[str]) -> SystemSpec:
    gpu_type = cell_text(row, "gpu_type")
    if not gpu_type:
        raise RowError("gpu_type is empty")
    system = catalog.system(gpu_type)
    if system is None:
        raise RowError(f"gpu_type={gpu_type!r}: no catalog system")
    notes.extend(catalog.notes("gpu_type", gpu_type))
    update: dict[str, object] = {"num_gpus": num_gpus}
    per_node = positive_int(row, "gpus_per_node")
    if per_node is not None and per_node != system.gpus_per_node:
        update["gpus_per_node"] = per_node
        notes.append(f"gpus_per_node {system.gpus_per_node}->{per_node} (row)")
    try:
        return SystemSpec.model_validate({**system.model_dump(), **update})
    except ValidationError as exc:
        raise RowError(f"system: {format_validation_error(exc)}") from exc


def _strategy(row: Row, sizes: rs.ParallelSizes, model: ModelSpec, system: SystemSpec,
              gbs: int, notes: list[str]) -> Strategy:
    stated: dict[str, object] = {
        "etp": rs.expert_tp(row, notes),
        "sequence_parallel": rs.sequence_parallel(row, sizes.tp),
        "tp_comm_overlap": rs.tp_comm_overlap(row, sizes.tp, notes),
        "eager_elementwise": rs.eager_elementwise(row, notes),
        "moe_token_dispatcher": rs.moe_token_dispatcher(row, sizes.ep, notes),
        "attention_kernel": rs.attention_kernel(row, notes),
        "ep_overlap": rs.ep_overlap(row, sizes.ep, notes) or None,
        "offload_modules": rs.offload_modules(row, notes) or None,
    }
    explicit = {name: value for name, value in stated.items() if value is not None}
    layers_per_stage = max(1, model.num_hidden_layers // sizes.pp)
    explicit.update(rs.sharding(row, sizes.dp, notes))
    if model.is_moe:
        explicit.update(rs.moe_routing(row, notes))
    explicit.update(rs.pipeline_split(row, model.num_hidden_layers, sizes, notes))
    explicit.update(rs.recompute(row, layers_per_stage, notes))
    explicit.update(rs.precision(row, notes))
    if explicit["precision"] == "fp8":
        explicit.update(rs.bf16_layers(row, model.num_hidden_layers, notes))
    explicit.update(history_settings(row, notes))
    facts = RunFacts(tp=sizes.tp, ep=sizes.ep, precision=str(explicit["precision"]),
                     generation=system.gpu.generation, layers_per_stage=layers_per_stage,
                     cp=sizes.cp)
    fields: dict[str, object] = {
        **framework_fields(row, explicit, facts, notes), **explicit,
        "num_gpus": sizes.num_gpus, "tp": sizes.tp, "pp": sizes.pp, "vpp": sizes.vpp,
        "cp": sizes.cp, "ep": sizes.ep,
        "micro_batch_size": rs.micro_batch(row, gbs, sizes, notes),
    }
    try:
        return Strategy.model_validate(fields)
    except ValidationError as exc:
        raise RowError(f"strategy: {format_validation_error(exc)}") from exc


def measured_throughput(
    row: Row, model: ModelSpec, workload: Workload, num_gpus: int
) -> tuple[float, str]:
    """(tokens/s/GPU, column it came from); raises ``RowError`` when the row has none."""
    for column in ("tokens_per_s_per_gpu", "derived_tokens_per_s_per_gpu"):
        value = cell_float(row, column)
        if value is not None:
            if value <= 0:
                raise RowError(f"{column}={value} must be positive")
            return value, column
    step_time = cell_float(row, "step_time_s")
    if step_time is not None and step_time > 0:
        return workload.tokens_per_step / step_time / num_gpus, "step_time_s"
    tflops = cell_float(row, "tflops_per_gpu")
    if tflops is not None and tflops > 0:
        source_id = cell_text(row, "source_id")
        convention = convention_for(source_id, cell_text(row, "tflops_definition"))
        if convention is None:
            raise RowError(f"tflops_per_gpu given but no FLOP convention known for {source_id!r}")
        per_token = flops_per_token(convention, model, workload.seq_length)
        return tokens_per_s_from_tflops(tflops, per_token), f"tflops_per_gpu ({convention})"
    raise RowError("no throughput measurement")


def _parse(row: Row, catalog: CatalogLookup) -> ParsedRow:
    notes: list[str] = []
    seq_length = read_count(cell_text(row, "seq_len"), "seq_len", binary=True)
    if not seq_length:
        raise RowError("seq_len is empty")
    sizes = rs.parallel_sizes(row, notes)
    model = row_model(row, catalog, seq_length, notes)
    sizes = rs.unstated_expert_parallel(row, sizes, model.num_experts, notes)
    system = _system(row, catalog, sizes.num_gpus, notes)
    gbs = rs.global_batch(row, seq_length, sizes.dp)
    workload = Workload(seq_length=seq_length, global_batch_size=gbs)
    assumed = f" ({'/'.join(sizes.unstated)} not stated, taken as 1)" if sizes.unstated else ""
    try:
        strategy = _strategy(row, sizes, model, system, gbs, notes)
        check_strategy_for_model(model, strategy)
        check_workload_for_strategy(workload, strategy)
    except (InputError, RowError) as exc:
        raise RowError(f"{exc}{assumed}") from exc
    measured, measured_from = measured_throughput(row, model, workload, sizes.num_gpus)
    return ParsedRow(
        row_id=cell_text(row, "row_id"), source_id=cell_text(row, "source_id"),
        quality=cell_text(row, "quality"), model=model, system=system, strategy=strategy,
        workload=workload, measured_tokens_per_s_per_gpu=measured, measured_from=measured_from,
        gpu_type=cell_text(row, "gpu_type"), notes=tuple(notes),
    )


def parse_row(row: Row, catalog: CatalogLookup | None = None) -> ParsedRow | SkippedRow:
    """One CSV row as a ``ParsedRow``, or a ``SkippedRow`` with the reason. Never raises."""
    row_id = cell_text(row, "row_id") if isinstance(row, Mapping) else ""
    try:
        return _parse(row, catalog or default_catalog())
    except Exception as exc:  # noqa: BLE001 - a bad row must never stop the validation
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if not isinstance(exc, RowError | InputError | ValidationError):
            reason = f"{type(exc).__name__}: {reason}"
        return SkippedRow(
            row_id=row_id, reason=reason,
            source_id=cell_text(row, "source_id") if isinstance(row, Mapping) else "",
            quality=cell_text(row, "quality") if isinstance(row, Mapping) else "",
        )


def read_rows(path: Path) -> list[dict[str, str | None]]:
    """The rows of a training.csv-schema file as plain dicts (``InputError`` if unreadable)."""
    try:
        with Path(path).open(newline="", encoding="utf-8") as handle:
            return list(csv.DictReader(handle))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise InputError("data", str(path), f"cannot read CSV: {exc}") from exc


def parse_rows(
    rows: Iterable[Row], catalog: CatalogLookup | None = None
) -> tuple[list[ParsedRow], list[SkippedRow]]:
    """Parse every row; returns (parsed, skipped) in input order. Rows of a cumulative
    optimization history carry the steps of the rows before them
    (``perfcast.validate.row_history``)."""
    parsed: list[ParsedRow] = []
    skipped: list[SkippedRow] = []
    for row in annotate_histories(rows):
        result = parse_row(row, catalog)
        if isinstance(result, ParsedRow):
            parsed.append(result)
        else:
            skipped.append(result)
    return parsed, skipped
