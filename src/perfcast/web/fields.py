"""The form fields of each page and how a form (URL query) becomes the CLI's argument list.

A page's state is its URL query: one key per field, named as the CLI names the option's value
(``tp``, ``seq_length``). ``cli_args`` turns that query into ``perfcast <command>`` arguments;
only the fields listed here are accepted (no output-file options such as ``--trace`` or
``--plot``: a web page must not make the server write files). Choices come from the CLI's own
option enums and the catalogs, so the web form offers exactly what the CLI accepts.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from functools import lru_cache
from typing import Literal

from perfcast.errors import InputError

FieldKind = Literal["text", "int", "float", "choice", "flag", "switch", "repeat"]
"""text/int/float/choice: ``--flag VALUE``; flag: ``--flag`` when on; switch: ``--flag`` when
'on', ``--no-flag`` when 'off' (typer's ``--x/--no-x`` options); repeat: ``--flag ITEM`` once
per whitespace-separated item (the search's repeatable ``--fix`` / ``--exclude``)."""


@dataclass(frozen=True)
class Field:
    """One form field: the URL key, the CLI option it fills and how."""

    name: str
    """URL query key, the option's value name in the CLI (``seq_length``)."""
    flag: str
    """The CLI option (``--seq-length``)."""
    kind: FieldKind
    label: str
    default: str = ""
    """Value the form starts with ('' = leave the option out: the CLI's default applies)."""
    choices: tuple[str, ...] = ()
    off_flag: str = ""
    """For ``switch``: the option that turns it off (``--no-sequence-parallel``)."""
    hidden: bool = False
    """Accepted from the query but not shown in the form (the page sets it itself)."""

    def args(self, value: str) -> list[str]:
        """The CLI arguments for ``value`` ([] when empty or a flag left off)."""
        value = value.strip()
        if value == "":
            return []
        if self.kind == "flag":
            return [self.flag] if _on(self.name, value) else []
        if self.kind == "switch":
            return [self.flag] if _on(self.name, value) else [self.off_flag]
        if self.kind == "repeat":
            return [arg for item in value.split() for arg in (self.flag, item)]
        return [self.flag, value]

    def to_dict(self) -> dict[str, object]:
        return {"name": self.name, "flag": self.flag, "kind": self.kind, "label": self.label,
                "default": self.default, "choices": list(self.choices), "hidden": self.hidden}


def _on(name: str, value: str) -> bool:
    if value in ("on", "true", "1"):
        return True
    if value in ("off", "false", "0"):
        return False
    raise InputError(name, value, "must be on or off")


def _enum(enum: type[Enum]) -> tuple[str, ...]:
    return tuple(member.value for member in enum)


def _catalog_choices() -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    from perfcast.catalog.frameworks import framework_names
    from perfcast.catalog.models import model_names
    from perfcast.catalog.serving_engines import engine_names
    from perfcast.catalog.systems import system_names

    return (tuple(model_names()), tuple(system_names()), tuple(framework_names()),
            tuple(engine_names()))


@lru_cache(maxsize=1)
def page_fields() -> dict[str, tuple[Field, ...]]:
    """Fields per CLI command the pages run (train, memory, infer, search, infer-search); built
    once."""
    from perfcast.cli.infer_cmd import ActPrecisionOpt, KVPrecisionOpt, WeightPrecisionOpt
    from perfcast.cli.infer_search_cmd import SearchEngineOpt
    from perfcast.cli.options import (
        CpCommTypeOpt,
        CudaGraphsOpt,
        FP8RecipeOpt,
        PrecisionOpt,
        RecomputeOpt,
    )
    from perfcast.cli.search_cmd import ObjectiveOpt
    from perfcast.cli.train_cmd import ScheduleOpt

    models, systems, frameworks, engines = _catalog_choices()
    model = Field("model", "--model", "choice", "model", "llama-3-8b", models)
    system = Field("system", "--system", "choice", "system", "dgx-h100", systems)
    framework = Field("framework", "--framework", "choice", "framework profile", "",
                      ("", *frameworks))
    run = (
        model, system,
        Field("gpus", "--gpus", "int", "GPUs", "8"),
        Field("tp", "--tp", "int", "TP", "1"),
        Field("pp", "--pp", "int", "PP", "1"),
        Field("vpp", "--vpp", "int", "VPP", "1"),
        Field("cp", "--cp", "int", "CP", "1"),
        Field("cp_comm_type", "--cp-comm-type", "choice", "CP exchange", "",
              ("", *_enum(CpCommTypeOpt))),
        Field("hierarchical_context_parallel_sizes", "--hierarchical-context-parallel-sizes",
              "text", "a2a+p2p levels A,P", ""),
        Field("tp2d", "--tp2d", "text", "2D TP grid ROWSxCOLS", ""),
        Field("ep", "--ep", "int", "EP", "1"),
        Field("micro_batch_size", "--micro-batch-size", "int", "micro-batch", "1"),
        Field("global_batch_size", "--global-batch-size", "int", "global batch", ""),
        Field("seq_length", "--seq-length", "int", "sequence length", "4096"),
        Field("precision", "--precision", "choice", "precision", "bf16", _enum(PrecisionOpt)),
        Field("recompute", "--recompute", "choice", "recompute", "none", _enum(RecomputeOpt)),
        Field("recompute_num_layers", "--recompute-num-layers", "int", "recomputed layers per stage", ""),
        Field("fp8_recipe", "--fp8-recipe", "choice", "FP8 recipe", "", ("", *_enum(FP8RecipeOpt))),
        Field("num_layers_at_start_in_bf16", "--num-layers-at-start-in-bf16", "int",
              "first layers in BF16 (FP8)", ""),
        Field("num_layers_at_end_in_bf16", "--num-layers-at-end-in-bf16", "int",
              "last layers in BF16 (FP8)", ""),
        Field("cpu_offload_layers", "--cpu-offloading-num-layers", "int",
              "layers with activations offloaded", ""),
        Field("offload_modules", "--offload-modules", "text", "offloaded modules", ""),
        Field("zero_stage", "--zero-stage", "int", "ZeRO stage", ""),
        Field("fsdp", "--fsdp", "switch", "FSDP", "", ("", "on", "off"), off_flag="--no-fsdp"),
        Field("tp_comm_overlap", "--tp-comm-overlap", "switch", "TP comm overlap", "", ("", "on", "off"),
              off_flag="--no-tp-comm-overlap"),
        Field("pipeline_layout", "--pipeline-layout", "text", "pipeline layout (Megatron string)", ""),
        Field("first_stage_layers", "--decoder-first-pipeline-num-layers", "int",
              "layers on the first stage", ""),
        Field("last_stage_layers", "--decoder-last-pipeline-num-layers", "int",
              "layers on the last stage", ""),
        Field("account_for_embedding", "--account-for-embedding-in-pipeline-split", "flag",
              "embedding counts as a layer", "", ("", "on")),
        Field("account_for_loss", "--account-for-loss-in-pipeline-split", "flag",
              "loss counts as a layer", "", ("", "on")),
        Field("sequence_parallel", "--sequence-parallel", "switch", "sequence parallel", "",
              ("", "on", "off"), off_flag="--no-sequence-parallel"),
        Field("distributed_optimizer", "--use-distributed-optimizer", "switch",
              "distributed optimizer", "", ("", "on", "off"), off_flag="--no-distributed-optimizer"),
        framework,
        Field("pipeline_schedule", "--pipeline-schedule", "choice", "pipeline schedule", "auto",
              _enum(ScheduleOpt)),
        Field("cuda_graphs", "--cuda-graphs", "choice", "CUDA graphs", "",
              ("", *_enum(CudaGraphsOpt))),
        Field("torch_compile", "--torch-compile", "switch", "fused element-wise ops "
              "(torch.compile)", "", ("", "on", "off"), off_flag="--no-torch-compile"),
    )
    infer = (
        model, system,
        Field("gpus", "--gpus", "int", "GPUs", ""),
        Field("tp", "--tp", "int", "TP", "1"),
        Field("pp", "--pp", "int", "PP", "1"),
        Field("ep", "--ep", "int", "EP", "1"),
        Field("engine", "--engine", "choice", "engine", "vllm", engines),
        Field("concurrency", "--concurrency", "int", "concurrency", "16"),
        Field("request_rate", "--request-rate", "float", "request rate (/s)", ""),
        Field("num_requests", "--num-requests", "int", "requests", ""),
        Field("input_len", "--input-len", "int", "input tokens", "1024"),
        Field("output_len", "--output-len", "int", "output tokens", "256"),
        Field("precision", "--precision", "choice", "precision", "bf16", _enum(ActPrecisionOpt)),
        Field("weight_precision", "--weight-precision", "choice", "weight precision", "",
              ("", *_enum(WeightPrecisionOpt))),
        Field("kv_precision", "--kv-precision", "choice", "KV precision", "",
              ("", *_enum(KVPrecisionOpt))),
        Field("attention_dp", "--attention-dp", "flag", "attention DP", "", ("", "on")),
        Field("curve", "--curve", "flag", "throughput-latency curve", "", ("", "on"), hidden=True),
    )
    deploy = (
        model, system,
        Field("gpus", "--gpus", "int", "GPUs", "8"),
        Field("input_len", "--input-len", "int", "input tokens", "1024"),
        Field("output_len", "--output-len", "int", "output tokens", "1024"),
        Field("ttft_ms", "--ttft-ms", "float", "TTFT target (ms, mean)", ""),
        Field("tpot_ms", "--tpot-ms", "float", "TPOT target (ms, mean)", ""),
        Field("min_tokens_per_s_per_user", "--min-tokens-per-s-per-user", "float",
              "least tokens/s per user", ""),
        Field("engine", "--engine", "choice", "engine", "vllm", _enum(SearchEngineOpt)),
        Field("disaggregated", "--disaggregated", "switch", "disaggregated (xPyD)", "off",
              ("on", "off"), off_flag="--no-disaggregated"),
        Field("top", "--top", "int", "top", "5"),
    )
    search = (
        model, system,
        Field("gpus", "--gpus", "int", "GPUs", "16"),
        Field("global_batch_size", "--global-batch-size", "int", "global batch", "512"),
        Field("seq_length", "--seq-length", "int", "sequence length", "4096"),
        Field("objective", "--objective", "choice", "objective", "throughput", _enum(ObjectiveOpt)),
        Field("top", "--top", "int", "top", "5"),
        Field("max_tp", "--max-tp", "int", "max TP", ""),
        Field("max_pp", "--max-pp", "int", "max PP", ""),
        Field("no_fp8", "--no-fp8", "flag", "no FP8", "", ("", "on")),
        Field("framework", "--framework", "choice", "framework profile", "megatron-core",
              frameworks),
        Field("fix", "--fix", "repeat", "pin KEY=VALUE (e.g. recompute_modules=core_attn,mlp)",
              ""),
        Field("exclude", "--exclude", "repeat", "never try KEY=VALUE", ""),
    )
    return {"train": run, "memory": run, "infer": infer, "search": search,
            "infer-search": deploy}


def cli_args(command: str, query: dict[str, str]) -> list[str]:
    """``perfcast <command>`` arguments of a page's query; InputError for an unknown command or
    a key the page does not offer."""
    fields = page_fields()
    if command not in fields:
        raise InputError("command", command, f"not served; choose from {', '.join(fields)}")
    by_name = {field.name: field for field in fields[command]}
    args: list[str] = []
    for name, value in query.items():
        if name not in by_name:
            raise InputError(name, value, f"not a field of {command}; "
                             f"choose from {', '.join(by_name)}")
        args += by_name[name].args(value)
    return args
