"""Strategy and workload of a ground-truth row: free-text columns mapped to Megatron vocabulary.

Every rule below is applied the same way to every row; defaults for empty cells are per
framework or per source and are recorded in the row's ``notes`` when used.

- Parallel sizes: ``tp``/``pp``/``vpp``/``cp``/``ep`` (empty = 1); ``dp``, else ``dp_derived``,
  else num_gpus/(tp·pp·cp). A stated DP must satisfy tp·pp·cp·dp = num_gpus or the row is
  skipped (this drops the NeMo B200 long-sequence rows, which the README calls inconsistent).
- ``dp_sharding``: SHARD_GRAD_OP -> ZeRO-2; FULL_SHARD / FSDP / FSDP2 / ZeRO-3 -> ``fsdp``
  ("FSDP size N": the shard group, recorded in notes); ZeRO-1 / distributed optimizer ->
  ``distributed_optimizer`` (with "precision-aware optimizer" / "BF16 optimizer states": bf16
  Adam moments, ``precision_aware_optimizer``); none / DDP / empty -> no sharding, except that
  Megatron-Core (NeMo) runs shard the optimizer (NeMo 2.0 recipes:
  ``distributed_fused_adam_with_cosine_annealing``, ``use_distributed_optimizer=True``).
- ``sequence_parallel``: yes/no; empty -> on when tp > 1 for NeMo / Megatron-Core and
  torchtitan (both always pair TP with SP); off otherwise.
- ``recompute``: none / no ... -> none; full ... -> full; torchtitan "selective layer" AC ->
  full recompute of every 2nd layer (``selective_ac_option='2'``); other selective -> selective,
  with the Megatron-Core recompute modules the text names (core_attn, mlp, moe, moe_act,
  shared_experts, layernorm, mla_up_proj / up_proj), else the default core_attn;
  empty -> full for megatron_sc21 (Narayanan 2021 Sec. 5: all runs use activation recompute;
  the run scripts pass ``--checkpoint-activations``), none elsewhere.
- ``precision``: "FP8 primary weights" / "fp8 param" -> ``fp8_param``; fp8 / float8 -> fp8
  (recipe from the text: rowwise, tensorwise / per-tensor
  current scaling, blockwise, delayed; unstated: torchtitan float8 default ``tensorwise``,
  otherwise Transformer Engine's default delayed scaling); fp16 -> fp16; bf16 -> bf16;
  empty -> bf16. Composer "MP mode PURE" reduces gradients in bf16, and so do Megatron-Core
  (NeMo) performance runs: NeMo 2.x ``pretrain_performance_optimizations`` of every LLM recipe
  sets ``recipe.trainer.plugins.grad_reduce_in_fp32 = False`` (nemo_toolkit 2.2.0,
  ``nemo/collections/llm/recipes/*.py``; the precision plugin overrides the DDP config), and the
  NeMo 1.x launcher configs set ``optim.grad_sync_dtype: bf16``.
- micro-batch: ``micro_batch``; else global/(dp·grad_accum); else for torchtitan pipelines the
  local batch split into pp micro-batches (``pipeline_parallel_microbatches`` defaults to the
  number of stages); else 1.
- global batch: ``global_batch_seqs``; else ``global_batch_tokens``/``seq_len``; else
  micro_batch·dp·grad_accum.
- ``tp_comm_overlap``: on for torchtitan rows whose framework says "async TP".
- expert TP: "ETP N" where ``dp_sharding`` or ``framework`` states it; otherwise Megatron-Core's
  default ETP = TP.
- pipeline split (Megatron-Core rows whose layers do not split evenly over pp·vpp): the
  embedding and loss counted as layers when layers + 2 split evenly, the loss when layers + 1
  do (Megatron-Core accepts no other split without an explicit layout).
- fine-grained activation offloading: the modules named in "activation offloading (...)".
- MoE routing: "capacity factor X" (token dropping), "pad to capacity", "forced load
  balance" in the framework or notes column; else dropless.
- ``ep_overlap``: where the framework or notes column says "A2A overlap" / "A2A_OVERLAP=1".
- ``moe_token_dispatcher``: HybridEP / DeepEP for rows whose framework names it; else NCCL
  all-to-all.
- FlashAttention: off for Megatron-LM 2021/2022 runs (megatron_sc21, korthikanti2022, which
  predate it); on otherwise.
- ``attention_kernel`` from the framework: torchtitan -> ``fa2`` (it calls PyTorch SDPA, whose
  flash backend is FlashAttention-2); Composer + llm-foundry -> ``triton`` (MPT's ALiBi bias
  needs llm-foundry's Triton FlashAttention, ``attn_impl: triton``; the CUDA FlashAttention of
  2023 took no bias); otherwise ``auto`` (NeMo / Megatron-Core: Transformer Engine's cuDNN
  fused attention, the generation's own kernel).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from perfcast.validate.csv_fields import RowError, cell_text, lower_text, positive_int

NO_FLASH_SOURCES = frozenset({"megatron_sc21", "korthikanti2022"})
RECOMPUTE_BY_DEFAULT_SOURCES = frozenset({"megatron_sc21"})


@dataclass(frozen=True)
class ParallelSizes:
    """Parallel degrees of one row; ``dp`` satisfies tp·pp·cp·dp = num_gpus."""

    num_gpus: int
    tp: int
    pp: int
    vpp: int
    cp: int
    ep: int
    dp: int


def _framework(row: Mapping[str, str | None]) -> str:
    return cell_text(row, "framework").lower()


def is_megatron_core(row: Mapping[str, str | None]) -> bool:
    """NeMo / Megatron-Core runs (not NeMo AutoModel, which is PyTorch FSDP2)."""
    framework = _framework(row)
    return "megatron-core" in framework or (
        framework.startswith("nemo") and "automodel" not in framework
    )


def is_torchtitan(row: Mapping[str, str | None]) -> bool:
    return "torchtitan" in _framework(row) or cell_text(row, "source_id") == "torchtitan"


def parallel_sizes(row: Mapping[str, str | None], notes: list[str]) -> ParallelSizes:
    """Parallel degrees; raises ``RowError`` when a stated DP contradicts num_gpus."""
    num_gpus = positive_int(row, "num_gpus")
    if num_gpus is None:
        raise RowError("num_gpus is empty")
    sizes = {c: positive_int(row, c) for c in ("tp", "pp", "vpp", "cp", "ep")}
    tp, pp, vpp, cp, ep = (sizes[c] or 1 for c in ("tp", "pp", "vpp", "cp", "ep"))
    unstated = [c for c in ("tp", "pp") if sizes[c] is None]
    dp = positive_int(row, "dp")
    column = "dp"
    if dp is None:
        dp, column = positive_int(row, "dp_derived"), "dp_derived"
    if dp is None:
        if num_gpus % (tp * pp * cp) != 0:
            raise RowError(f"num_gpus={num_gpus} not divisible by tp*pp*cp={tp * pp * cp}")
        dp = num_gpus // (tp * pp * cp)
    elif tp * pp * cp * dp != num_gpus:
        assumed = f" ({'/'.join(unstated)} not stated, taken as 1)" if unstated else ""
        raise RowError(
            f"tp*pp*cp*{column} = {tp}*{pp}*{cp}*{dp} = {tp * pp * cp * dp} != "
            f"num_gpus={num_gpus}{assumed}"
        )
    if vpp == 1 and pp > 1 and "interleaved" in _framework(row) and sizes["vpp"] is None:
        vpp = 2
        notes.append("vpp not stated: interleaved schedule with 2 stages per rank assumed")
    return ParallelSizes(num_gpus=num_gpus, tp=tp, pp=pp, vpp=vpp, cp=cp, ep=ep, dp=dp)


def sharding(row: Mapping[str, str | None], dp: int, notes: list[str]) -> dict[str, Any]:
    """``fsdp`` / ``zero_stage`` / ``distributed_optimizer`` from ``dp_sharding`` text."""
    text = cell_text(row, "dp_sharding").lower()
    if "shard_grad_op" in text or "zero-2" in text:
        return {"zero_stage": 2}
    if any(key in text for key in ("full_shard", "fsdp", "zero-3", "zero3")):
        size = re.search(r"fsdp size (\d+)", text)
        if size and int(size.group(1)) != dp:
            notes.append(f"FSDP size {size.group(1)} != dp={dp}: HSDP-like sharding, "
                         "modelled as full sharding over dp")
        elif size:
            notes.append(f"FSDP size {size.group(1)} = dp")
        return {"fsdp": True}
    if "zero-1" in text or "distributed optimizer" in text:
        fields: dict[str, Any] = {"distributed_optimizer": True}
        if "precision-aware optimizer" in text or "bf16 optimizer states" in text:
            notes.append("precision-aware optimizer with bf16 moments (row)")
            fields.update(precision_aware_optimizer=True, exp_avg_dtype="bf16",
                          exp_avg_sq_dtype="bf16")
        return fields
    if text and not any(key in text for key in ("none", "ddp")):
        raise RowError(f"dp_sharding={cell_text(row, 'dp_sharding')!r} not understood")
    if is_megatron_core(row):
        notes.append("Megatron-Core DDP: distributed optimizer assumed (NeMo recipe default)")
        return {"distributed_optimizer": True}
    return {}


def sequence_parallel(row: Mapping[str, str | None], tp: int, notes: list[str]) -> bool:
    """Sequence parallelism from yes/no text, or the framework default when empty."""
    text = cell_text(row, "sequence_parallel").lower()
    if text.startswith("yes"):
        return tp > 1
    if text.startswith("no"):
        return False
    if text:
        raise RowError(f"sequence_parallel={cell_text(row, 'sequence_parallel')!r} not understood")
    if tp > 1 and (is_megatron_core(row) or is_torchtitan(row)):
        notes.append("sequence_parallel not stated: on (framework pairs TP with SP)")
        return True
    return False


def tp_comm_overlap(row: Mapping[str, str | None], tp: int, notes: list[str]) -> bool:
    """TP communication overlap: torchtitan rows that say "async TP" (its TP overlap)."""
    framework = _framework(row).replace(" ", "")
    if tp > 1 and "asynctp" in framework:
        notes.append("async TP: TP communication overlapped with GEMMs")
        return True
    return False


def moe_token_dispatcher(row: Mapping[str, str | None], ep: int, notes: list[str]) -> str:
    """'hybridep' / 'deepep' where the framework column names HybridEP / DeepEP (and EP > 1),
    else 'alltoall'."""
    if ep > 1 and "hybridep" in _framework(row).replace(" ", ""):
        notes.append("HybridEP dispatch: tokens cross the network once per NVLink domain")
        return "hybridep"
    if ep > 1 and "deepep" in _framework(row).replace(" ", ""):
        notes.append("DeepEP dispatch: tokens cross the network once per destination node")
        return "deepep"
    return "alltoall"


def ep_overlap(row: Mapping[str, str | None], ep: int, notes: list[str]) -> bool:
    """EP all-to-all overlap (Megatron-Core --overlap-moe-expert-parallel-comm) where the
    framework or notes column states it ("EP A2A overlap", "A2A_OVERLAP=1"; "A2A_OVERLAP=0"
    says it was off)."""
    text = f"{_framework(row)} {lower_text(row, 'notes')}"
    if ep <= 1 or "a2a_overlap=0" in text.replace(" ", ""):
        return False
    if "a2a_overlap=1" in text.replace(" ", "") or re.search(r"\ba2a overlap\b", text):
        notes.append("EP all-to-all overlapped with another micro-batch (row)")
        return True
    return False


OFFLOAD_MODULES = ("attn_norm", "qkv_linear", "core_attn", "attn_proj", "mlp_norm",
                   "expert_fc1", "moe_act")


def offload_modules(row: Mapping[str, str | None], notes: list[str]) -> tuple[str, ...]:
    """Fine-grained activation offloading the notes state ("activation offloading (expert_fc1,
    moe_act)"): the Megatron-Core module names inside the parentheses."""
    match = re.search(r"activation offloading\s*\(([^)]*)\)", lower_text(row, "notes"))
    if not match:
        return ()
    modules = tuple(m for m in OFFLOAD_MODULES if re.search(rf"\b{m}\b", match.group(1)))
    if modules:
        notes.append(f"activation offloading of {', '.join(modules)} (row)")
    return modules


def moe_routing(row: Mapping[str, str | None], notes: list[str]) -> dict[str, Any]:
    """Routing mode the framework or notes column states: token dropping with "capacity
    factor X", "pad to capacity", "forced load balanc(e|ing)" (else dropless, as measured)."""
    text = f"{_framework(row)} {lower_text(row, 'notes')}"
    fields: dict[str, Any] = {}
    factor = re.search(r"capacity factor\s*([0-9.]+)", text)
    if factor:
        fields["moe_capacity_factor"] = float(factor.group(1))
        if "pad to capacity" in text:
            fields["moe_pad_expert_input_to_capacity"] = True
        notes.append(f"token dropping, capacity factor {factor.group(1)}"
                     + (", padded to capacity" if "pad to capacity" in text else "") + " (row)")
    if re.search(r"forced load balanc|force load balanc", text):
        fields["moe_router_force_load_balancing"] = True
    return fields


def expert_tp(row: Mapping[str, str | None], notes: list[str]) -> int | None:
    """Expert tensor-parallel size where ``dp_sharding`` or ``framework`` states "ETP N";
    otherwise None (Megatron-Core's default ETP = TP; framework profiles may set their own)."""
    stated = re.search(r"\betp\s*=?\s*(\d+)", f"{lower_text(row, 'dp_sharding')} {_framework(row)}")
    if stated:
        notes.append(f"expert TP {stated.group(1)} (row)")
        return int(stated.group(1))
    return None


def pipeline_split(row: Mapping[str, str | None], num_layers: int, sizes: ParallelSizes,
                   notes: list[str]) -> dict[str, Any]:
    """Megatron-Core asserts an even split of the layers over pp·vpp chunks; when the row's
    layers do not split but layers + 2 do, the run must have counted the embedding and the loss
    as layers (``--account-for-embedding/loss-in-pipeline-split``); layers + 1: the loss."""
    chunks = sizes.pp * sizes.vpp
    if sizes.pp == 1 or num_layers % chunks == 0 or not is_megatron_core(row):
        return {}
    if (num_layers + 2) % chunks == 0:
        notes.append(f"{num_layers} layers over pp*vpp={chunks}: embedding and loss counted as "
                     "layers in the pipeline split")
        return {"account_for_embedding_in_pipeline_split": True,
                "account_for_loss_in_pipeline_split": True}
    if (num_layers + 1) % chunks == 0:
        notes.append(f"{num_layers} layers over pp*vpp={chunks}: loss counted as a layer in the "
                     "pipeline split")
        return {"account_for_loss_in_pipeline_split": True}
    return {}


RECOMPUTE_MODULE_WORDS = (
    ("core_attn", "core_attn"), ("core attn", "core_attn"), ("mla_up_proj", "mla_up_proj"),
    ("up_proj", "mla_up_proj"), ("moe_act", "moe_act"), ("moe act", "moe_act"),
    ("shared_experts", "shared_experts"), ("layernorm", "layernorm"), ("mlp", "mlp"),
    ("moe", "moe"),
)
"""Spellings of Megatron-Core recompute modules in the rows, longest first so that 'moe_act'
is not read as 'moe' nor 'mla_up_proj' twice."""


def recompute_modules(text: str) -> tuple[str, ...]:
    """Megatron-Core ``--recompute-modules`` named in a selective-recompute text, in order of
    first mention (empty when none is named: the default core_attn applies)."""
    found: list[tuple[int, str]] = []
    rest = text.lower()
    for word, module in RECOMPUTE_MODULE_WORDS:
        for match in re.finditer(rf"(?<![a-z_]){re.escape(word)}(?![a-z_])", rest):
            if module not in (m for _, m in found):
                found.append((match.start(), module))
        rest = re.sub(rf"(?<![a-z_]){re.escape(word)}(?![a-z_])", " " * len(word), rest)
    return tuple(module for _, module in sorted(found))


def recompute(
    row: Mapping[str, str | None], layers_per_stage: int, notes: list[str]
) -> dict[str, Any]:
    """``recompute`` (and ``recompute_num_layers``) from free text or the source default."""
    text = cell_text(row, "recompute").lower()
    if not text:
        if cell_text(row, "source_id") in RECOMPUTE_BY_DEFAULT_SOURCES:
            notes.append("recompute not stated: full (Narayanan 2021 runs recompute activations)")
            return {"recompute": "full"}
        return {"recompute": "none"}
    if text.startswith(("none", "no ")):
        return {"recompute": "none"}
    if text.startswith("full"):
        return {"recompute": "full"}
    if "selective" in text and "layer" in text:
        notes.append("torchtitan selective layer AC: every 2nd layer fully recomputed")
        return {"recompute": "full", "recompute_num_layers": max(1, layers_per_stage // 2)}
    if "selective" in text:
        modules = recompute_modules(text)
        if modules:
            return {"recompute": "selective", "recompute_modules": modules}
        return {"recompute": "selective"}
    raise RowError(f"recompute={cell_text(row, 'recompute')!r}: granularity not understood")


def _fp8_recipe(text: str, row: Mapping[str, str | None], notes: list[str]) -> str:
    for key, recipe in (("gw_hp", "rowwise-hp-wgrad"), ("high-precision wgrad", "rowwise-hp-wgrad"),
                        ("rowwise", "rowwise"), ("tensorwise", "tensorwise"),
                        ("per-tensor", "tensorwise"), ("current scaling", "tensorwise"),
                        ("mxfp8", "mxfp8"), ("block", "blockwise"), ("delayed", "delayed")):
        if key in text:
            return recipe
    recipe = "tensorwise" if is_torchtitan(row) else "delayed"
    notes.append(f"fp8 recipe not stated: {recipe} (framework default)")
    return recipe


def precision(row: Mapping[str, str | None], notes: list[str]) -> dict[str, Any]:
    """``precision``, ``fp8_recipe`` and ``grad_reduce_dtype`` from the precision text."""
    text = cell_text(row, "precision").lower()
    fields: dict[str, Any] = {}
    if "mp mode pure" in text:
        fields["grad_reduce_dtype"] = "bf16"
    elif is_megatron_core(row):
        fields["grad_reduce_dtype"] = "bf16"
        notes.append("NeMo performance recipe: gradients reduced in bf16 (grad_reduce_in_fp32=False)")
    if "fp8" in text or "float8" in text:
        # Megatron-Core passes is_first_microbatch, so Transformer Engine casts FP8 weights once
        # per step; torchao and Composer cast them in every forward.
        fields.update(precision="fp8", fp8_recipe=_fp8_recipe(text, row, notes),
                      fp8_weight_cache=is_megatron_core(row))
        if "fp8 primary weights" in text or "fp8 param" in text:
            notes.append("FP8 parameter storage (row)")
            fields["fp8_param"] = True
    elif "fp16" in text or "float16" in text:
        fields["precision"] = "fp16"
    elif "bf16" in text or not text:
        fields["precision"] = "bf16"
        if not text:
            notes.append("precision not stated: bf16")
    else:
        raise RowError(f"precision={cell_text(row, 'precision')!r} not understood")
    return fields


def global_batch(
    row: Mapping[str, str | None], seq_length: int, dp: int
) -> int:
    """Sequences per optimizer step (global batch)."""
    seqs = positive_int(row, "global_batch_seqs")
    if seqs is not None:
        return seqs
    tokens = positive_int(row, "global_batch_tokens")
    if tokens is not None:
        if tokens % seq_length != 0:
            raise RowError(f"global_batch_tokens={tokens} not a multiple of seq_len={seq_length}")
        return tokens // seq_length
    micro, accum = positive_int(row, "micro_batch"), positive_int(row, "grad_accum")
    if micro is not None and accum is not None:
        return micro * dp * accum
    raise RowError("no global batch: global_batch_seqs, global_batch_tokens and "
                   "micro_batch*dp*grad_accum are all missing")


def micro_batch(
    row: Mapping[str, str | None], global_batch_size: int, sizes: ParallelSizes,
    notes: list[str],
) -> int:
    """Sequences per micro-batch (see the module docstring for the order of rules)."""
    stated = positive_int(row, "micro_batch")
    if stated is not None:
        return stated
    accum = positive_int(row, "grad_accum")
    if accum is not None and global_batch_size % (sizes.dp * accum) == 0:
        return global_batch_size // (sizes.dp * accum)
    local = global_batch_size // sizes.dp
    if sizes.pp > 1 and is_torchtitan(row) and local % sizes.pp == 0:
        notes.append(f"micro_batch not stated: local batch {local} / pp {sizes.pp} micro-batches")
        return local // sizes.pp
    notes.append("micro_batch not stated: 1")
    return 1


def attention_kernel(row: Mapping[str, str | None], notes: list[str]) -> str:
    """Fused-attention kernel class the row's framework runs (module docstring)."""
    if is_torchtitan(row):
        notes.append("attention kernel: fa2 (torchtitan: PyTorch SDPA flash backend)")
        return "fa2"
    if "llm-foundry" in _framework(row):
        notes.append("attention kernel: triton (llm-foundry ALiBi: attn_impl triton)")
        return "triton"
    return "auto"


def flash_attention(row: Mapping[str, str | None]) -> bool:
    """False for the 2021/2022 Megatron-LM runs, which predate FlashAttention."""
    return cell_text(row, "source_id") not in NO_FLASH_SOURCES and (
        "megatron-lm (2021)" not in lower_text(row, "framework")
    )
