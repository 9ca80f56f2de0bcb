"""Strategy and workload of a ground-truth row: free-text columns mapped to Megatron vocabulary.

Every rule below is applied the same way to every row. The functions here read what a row
*states*; what it leaves empty is filled by its framework's profile (``perfcast.validate.
row_framework``, the same ``catalog/data/frameworks`` profiles as ``perfcast train
--framework``), and each default used is recorded in the row's ``notes``. Free text (yes/no
words, sharding, recompute, precision and FP8/FP4 recipe names, counts with k/M suffixes) is
read by the normalization layer ``perfcast.validate.vocabulary``; text it does not know is a
skip reason naming the column and value.

- Parallel sizes: ``tp``/``pp``/``vpp``/``cp``/``ep`` (empty = 1); ``dp``, else ``dp_derived``,
  else num_gpus/(tp·pp·cp). A stated DP must satisfy tp·pp·cp·dp = num_gpus or the row is
  skipped (this drops the NeMo B200 long-sequence rows, which the README calls inconsistent).
- ``dp_sharding``: SHARD_GRAD_OP -> ZeRO-2; FULL_SHARD / FSDP / FSDP2 / HSDP / ZeRO-3 /
  "FSDP=1" -> ``fsdp`` ("FSDP size N": the shard group, recorded in notes); ZeRO-1 /
  distributed optimizer -> ``distributed_optimizer`` (with "precision-aware optimizer" / "BF16
  optimizer states": bf16 Adam moments, ``precision_aware_optimizer``); none / DDP /
  "DDP (FSDP=0)" / "no FSDP" / empty -> not stated: the framework profile decides
  (Megatron-Core recipes: "DDP" is the distributed optimizer), else no sharding.
- ``sequence_parallel``: yes/no/true/false/on/off/enabled/disabled/1/0; empty -> not stated
  (profile: Megatron-Core and torchtitan pair TP with SP).
- ``recompute``: none / no ... -> none; full ... -> full; torchtitan "selective layer" AC ->
  full recompute of every 2nd layer (``selective_ac_option='2'``); other selective -> selective,
  with the Megatron-Core recompute modules the text names (core_attn, mlp, moe, moe_act,
  shared_experts, layernorm, mla_up_proj), else the default core_attn; empty or "none stated"
  -> not stated (profile: e.g. Megatron-LM 2021 runs recompute in full).
- ``precision``: fp8 / float8 / MXFP8 / NVFP4 -> fp8 (recipe from the text: rowwise,
  rowwise_with_gw_hp, tensorwise / per-tensor / current scaling / FP8-CS, MXFP8 / FP8-MX,
  blockwise / block-scaled, delayed, NVFP4; unstated: the profile's meaning of a bare FP8, else
  Transformer Engine's default delayed scaling); "FP8 primary weights" / "fp8 param" /
  "float8 FSDP all-gather" -> ``fp8_param``; "layers A-B [+ LM head] bf16" at the start or end of the model ->
  ``num_layers_at_start_in_bf16`` / ``num_layers_at_end_in_bf16``; "linears only" /
  "grouped GEMMs only" -> ``fp8_gemm_scope`` linear / grouped; fp16 -> fp16; bf16 -> bf16;
  empty -> bf16. Composer "MP mode PURE" reduces gradients in bf16; otherwise the profile's
  reduce dtype.
- micro-batch: ``micro_batch``; else global/(dp·grad_accum); else, where the framework
  profile's ``pipeline_microbatches`` is ``total_stages`` (torchtitan before 2025-04:
  ``pipeline_parallel_microbatches`` defaults to the stages in all, pp x stages per rank), the
  local batch split into pp·vpp micro-batches; else 1 (torchtitan from v0.1.0:
  ``pipeline_parallel_microbatch_size`` 1).
- global batch: ``global_batch_seqs``; else ``global_batch_tokens``/``seq_len`` (token counts
  with k/M suffixes are powers of two: "2M" = 2,097,152); else
  micro_batch·dp·grad_accum.
- ``tp_comm_overlap``: on where the framework text says "async TP"; else the profile's.
- ``eager_elementwise``: off (fused) where the framework text says "torch.compile" or "async
  TP" (torchtitan's async TP needs compile); else the profile's (torchtitan: eager).
- expert TP: "ETP N" where ``dp_sharding`` or ``framework`` states it; else the profile's.
- pipeline split (Megatron-Core rows whose layers do not split evenly over pp·vpp): the
  embedding and loss counted as layers when layers + 2 split evenly, the loss when layers + 1
  do (Megatron-Core accepts no other split without an explicit layout).
- fine-grained activation offloading: the modules named in "activation offloading (...)".
- MoE routing: "capacity factor X" (token dropping), "pad to capacity", "forced load
  balance" / "fake balanced gate" (NeMo AutoModel) in the framework or notes column; else
  dropless with the learned router (``graph.stage.moe_load_imbalance``).
- ``ep_overlap``: where the framework or notes column says "A2A overlap" / "A2A_OVERLAP=1".
- ``moe_token_dispatcher``: HybridEP / DeepEP for rows whose framework names it; else the
  profile's.
- EP size where ``ep`` is empty but the framework names DeepEP / HybridEP (which need EP > 1):
  the profile's ``expert_parallel_unstated`` (NeMo AutoModel: experts over the whole FSDP
  group, the largest divisor of the expert count dividing tp·cp·dp); else 1.
- cumulative optimization histories (notes: 'Cumulative optimization step "NAME"'): every
  step taken up to the row and every step still to come in its table set the Strategy options
  they name (``perfcast.validate.row_history``: permute / router fusion, CUDA graphs, FP8
  quantization fused into the norm); unmodelled steps are named in the notes.
- attention kernel class ``fa2`` where the framework column names FlexAttention (PyTorch's
  Triton template of the FlashAttention-2 algorithm).
- FlashAttention and the attention kernel class: from the profile (Megatron-LM 2021/2022
  predates FlashAttention; torchtitan's PyTorch SDPA runs FlashAttention-2 on Ampere/Hopper and
  cuDNN / ROCm kernels elsewhere; llm-foundry's MPT ALiBi runs Triton FlashAttention).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from perfcast.catalog.frameworks import framework_of_text, pick
from perfcast.validate.csv_fields import RowError, cell_text, lower_text, positive_int
from perfcast.validate.vocabulary import (
    read_bool,
    read_count,
    read_precision,
    read_recompute,
    read_sharding,
)


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
    unstated: tuple[str, ...] = ()
    """Degrees the row leaves empty among tp/pp (taken as 1)."""


def _framework(row: Mapping[str, str | None]) -> str:
    return cell_text(row, "framework").lower()


def pipeline_microbatches_default(row: Mapping[str, str | None]) -> str | None:
    """The row's framework profile's ``pipeline_microbatches`` default for its release
    (None: no profile, or none recorded: one sequence per micro-batch)."""
    found = framework_of_text(cell_text(row, "framework"), cell_text(row, "version_or_date"))
    if found is None:
        return None
    picked = pick(found.profile.pipeline_microbatches, found.version)
    return picked.value if picked is not None else None


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
    return ParallelSizes(num_gpus=num_gpus, tp=tp, pp=pp, vpp=vpp, cp=cp, ep=ep, dp=dp,
                         unstated=tuple(unstated))


def sharding(row: Mapping[str, str | None], dp: int, notes: list[str]) -> dict[str, Any]:
    """``fsdp`` / ``zero_stage`` / ``distributed_optimizer`` from ``dp_sharding`` text
    (``perfcast.validate.vocabulary.read_sharding``)."""
    stated = read_sharding(cell_text(row, "dp_sharding"))
    if stated is not None and stated.kind == "zero2":
        return {"zero_stage": 2}
    if stated is not None and stated.kind == "fsdp":
        if stated.shard_size is not None and stated.shard_size != dp:
            notes.append(f"FSDP size {stated.shard_size} != dp={dp}: HSDP-like sharding, "
                         "modelled as full sharding over dp")
        elif stated.shard_size is not None:
            notes.append(f"FSDP size {stated.shard_size} = dp")
        return {"fsdp": True}
    if stated is not None and stated.kind == "distributed_optimizer":
        fields: dict[str, Any] = {"distributed_optimizer": True}
        text = cell_text(row, "dp_sharding").lower()
        if "precision-aware optimizer" in text or "bf16 optimizer states" in text:
            notes.append("precision-aware optimizer with bf16 moments (row)")
            fields.update(precision_aware_optimizer=True, exp_avg_dtype="bf16",
                          exp_avg_sq_dtype="bf16")
        return fields
    return {}  # plain data parallelism or unstated: the framework profile decides


def sequence_parallel(row: Mapping[str, str | None], tp: int) -> bool | None:
    """Sequence parallelism from a yes/no cell; None when the row does not say."""
    stated = read_bool(cell_text(row, "sequence_parallel"), "sequence_parallel")
    if stated is None:
        return None
    return stated and tp > 1


def tp_comm_overlap(row: Mapping[str, str | None], tp: int, notes: list[str]) -> bool | None:
    """TP communication overlap where the framework text says "async TP"; else None."""
    framework = _framework(row).replace(" ", "")
    if tp > 1 and "asynctp" in framework:
        notes.append("async TP: TP communication overlapped with GEMMs")
        return True
    return None


def eager_elementwise(row: Mapping[str, str | None], notes: list[str]) -> bool | None:
    """False (element-wise ops fused) where the framework text names torch.compile, or async
    TP, which torchtitan runs only under ``compile.enable`` (frameworks.md §3); else None (the
    profile's: torchtitan runs eager by default)."""
    framework = _framework(row).replace(" ", "")
    if "compile" in framework or "asynctp" in framework:
        notes.append("torch.compile: element-wise ops fused (Inductor)")
        return False
    return None


def moe_token_dispatcher(row: Mapping[str, str | None], ep: int, notes: list[str]) -> str | None:
    """'hybridep' / 'deepep' where the framework column names HybridEP / DeepEP (and EP > 1);
    else None (the profile's)."""
    if ep > 1 and "hybridep" in _framework(row).replace(" ", ""):
        notes.append("HybridEP dispatch: tokens cross the network once per NVLink domain")
        return "hybridep"
    if ep > 1 and "deepep" in _framework(row).replace(" ", ""):
        notes.append("DeepEP dispatch: tokens cross the network once per destination node")
        return "deepep"
    return None


_FLEX_ATTENTION = re.compile(r"\bflex[ _-]?(?:attn|attention)\b")
"""A framework cell naming PyTorch FlexAttention ("FlexAttn", "flex_attention")."""


def attention_kernel(row: Mapping[str, str | None], notes: list[str]) -> str | None:
    """'fa2' where the framework column names FlexAttention; else None (the profile's).

    ``torch.nn.attention.flex_attention`` compiles to a Triton template of the
    FlashAttention-2 algorithm (one program per query tile, online softmax; torch/_inductor/
    kernel/flex_attention.py) without Hopper's TMA / warp-specialized WGMMA pipeline that
    FlashAttention-3 uses (Shah et al. 2024, §3): FlashAttention-2 class, not the
    generation's own kernel. PyTorch blog "FlexAttention: The Flexibility of PyTorch with the
    Performance of FlashAttention" (Aug 2024): about 90% of FlashAttention-2's forward and 85%
    of its backward speed (A100); Dong et al. 2024 (arXiv:2412.05496) likewise compare it with
    FlashAttention-2."""
    if _FLEX_ATTENTION.search(_framework(row)):
        notes.append("FlexAttention: FlashAttention-2-class kernel (row)")
        return "fa2"
    return None


def _names_ep_dispatcher(row: Mapping[str, str | None]) -> bool:
    """The framework column names a token dispatcher that runs only with EP > 1."""
    framework = _framework(row).replace(" ", "")
    return "deepep" in framework or "hybridep" in framework


def unstated_expert_parallel(row: Mapping[str, str | None], sizes: ParallelSizes,
                             num_experts: int, notes: list[str]) -> ParallelSizes:
    """``sizes`` with the EP size of a row that leaves ``ep`` empty but names DeepEP / HybridEP
    (which run only with EP > 1, so EP 1 cannot be what ran), where the row's framework
    profile's ``expert_parallel_unstated`` says how its benchmarks lay experts out:
    ``data_parallel`` = the largest divisor of ``num_experts`` that divides the non-pipeline
    ranks tp·cp·dp (NeMo AutoModel: EP carved out of them, components/distributed/
    mesh_utils.py). Unchanged otherwise (a stated EP, no such dispatcher, a dense model, or
    no profile value)."""
    if positive_int(row, "ep") is not None or num_experts <= 1 \
            or not _names_ep_dispatcher(row):
        return sizes
    found = framework_of_text(cell_text(row, "framework"), cell_text(row, "version_or_date"))
    picked = None if found is None else pick(found.profile.expert_parallel_unstated,
                                             found.version)
    if found is None or picked is None or picked.value != "data_parallel":
        return sizes
    ranks = sizes.tp * sizes.cp * sizes.dp
    ep = max(d for d in range(1, min(ranks, num_experts) + 1)
             if ranks % d == 0 and num_experts % d == 0)
    if ep > 1:
        notes.append(f"ep not stated, EP-only dispatcher named: EP {ep} ({found.label}: "
                     f"{picked.says})")
    return replace(sizes, ep=ep)


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
    factor X", "pad to capacity", "forced load balanc(e|ing)" or NeMo AutoModel's "fake
    balanced gate" (else dropless with the learned router, as measured)."""
    text = f"{_framework(row)} {lower_text(row, 'notes')}"
    fields: dict[str, Any] = {}
    factor = re.search(r"capacity factor\s*([0-9.]+)", text)
    if factor:
        fields["moe_capacity_factor"] = float(factor.group(1))
        if "pad to capacity" in text:
            fields["moe_pad_expert_input_to_capacity"] = True
        notes.append(f"token dropping, capacity factor {factor.group(1)}"
                     + (", padded to capacity" if "pad to capacity" in text else "") + " (row)")
    # NeMo AutoModel's benchmark "fake balanced gate" balances every expert exactly, but not at
    # random: token t takes experts t*k .. t*k+k-1 (mod E) (nemo-automodel 0.1.2 and 0.7.0
    # components/moe/layers.py FakeBalancedGate, noise 0). Forced balance matches its expert
    # loads. DeepEP sends a token once per destination rank; the dispatch model deduplicates
    # per node only, for random routing (comm/dispatch.py), so these rows carry more
    # all-to-all volume than the gate sends (tools/moe_dispatch_screen.py).
    if re.search(r"forced load balanc|force load balanc|fake balanced gate", text):
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
    """The embedding/loss accounting a row's layout needs when its layers do not split evenly
    over pp·vpp chunks: the first split the row's framework profile accepts
    (``pipeline_splits_accepted``, read by ``search.framework_rules.LayoutRules``, the same
    rule the search uses); {} for an even split or a framework without such rules."""
    from perfcast.search.framework_rules import LayoutRules

    found = framework_of_text(cell_text(row, "framework"), cell_text(row, "version_or_date"))
    if sizes.pp == 1 or found is None:
        return {}
    rules = LayoutRules.of(found)
    split = rules.pipeline_split(num_layers, sizes.pp, sizes.vpp)
    if split not in ("embedding_as_layer", "embedding_and_loss_as_layers"):
        return {}
    notes.append(f"{num_layers} layers over pp*vpp={sizes.pp * sizes.vpp}: "
                 f"{split.replace('_', ' ')} in the pipeline split ({found.label})")
    return rules.split_fields(num_layers, sizes.pp, sizes.vpp)

def recompute(
    row: Mapping[str, str | None], layers_per_stage: int, notes: list[str]
) -> dict[str, Any]:
    """``recompute`` (and ``recompute_num_layers``) from the cell; {} when not stated."""
    stated = read_recompute(cell_text(row, "recompute"))
    if stated is None:
        return {}
    if stated.kind == "every_other_layer":
        notes.append("torchtitan selective layer AC: every 2nd layer fully recomputed")
        return {"recompute": "full", "recompute_num_layers": max(1, layers_per_stage // 2)}
    if stated.modules:
        return {"recompute": "selective", "recompute_modules": stated.modules}
    return {"recompute": stated.kind}


def precision(row: Mapping[str, str | None], notes: list[str]) -> dict[str, Any]:
    """``precision``, and ``fp8_recipe`` / ``grad_reduce_dtype`` where the cell states them
    (``perfcast.validate.vocabulary.read_precision``)."""
    stated = read_precision(cell_text(row, "precision"))
    fields: dict[str, Any] = {}
    if stated is not None and stated.pure_bf16_reduce:
        fields["grad_reduce_dtype"] = "bf16"
    if stated is None:
        notes.append("precision not stated: bf16")
        fields["precision"] = "bf16"
    elif stated.precision == "fp8":
        fields["precision"] = "fp8"
        if stated.fp8_recipe is not None:
            fields["fp8_recipe"] = stated.fp8_recipe
        text = cell_text(row, "precision").lower()
        if "fp8 primary weights" in text or "fp8 param" in text:
            notes.append("FP8 parameter storage (row)")
            fields["fp8_param"] = True
        elif _FP8_ALL_GATHER.search(text):
            notes.append("FP8 parameter all-gather (row)")
            fields["fp8_param"] = True
        scope = fp8_gemm_scope(text)
        if scope != "all":
            notes.append(f"fp8_gemm_scope={scope}: only the "
                         + ("linear layers" if scope == "linear" else
                            "routed experts' grouped GEMMs") + " in the recipe (row)")
            fields["fp8_gemm_scope"] = scope
    else:
        fields["precision"] = stated.precision
    return fields


_FP8_ALL_GATHER = re.compile(r"\b(?:float8|fp8)\s+(?:fsdp\s+)?all[- ]?gather")
"""A precision cell naming an FP8 parameter all-gather ("float8 FSDP all-gather": torchao
``enable_fsdp_float8_all_gather``); "bf16 FSDP all-gather" does not match."""
_LINEARS_ONLY = re.compile(r"linears?\s+only")
_GROUPED_ONLY = re.compile(r"grouped[ _-]?(?:gemms?|mm)\s+only")


def fp8_gemm_scope(precision_text: str) -> str:
    """``Strategy.fp8_gemm_scope`` a lower-case precision cell states: "... for linears only"
    (torchtitan ``quantize.linear.mx``) -> linear; "... grouped GEMMs only"
    (``quantize.grouped_mm.mx``) -> grouped; anything else -> all."""
    if _LINEARS_ONLY.search(precision_text):
        return "linear"
    if _GROUPED_ONLY.search(precision_text):
        return "grouped"
    return "all"


_BF16_LAYERS = re.compile(r"layers\s+(\d+)\s*-\s*(\d+)(?:\s*\+\s*lm head)?\s+bf16")
"""A precision cell's decoder-layer range kept in BF16 ("layers 27-31 + LM head bf16")."""


def bf16_layers(row: Mapping[str, str | None], num_layers: int,
                notes: list[str]) -> dict[str, int]:
    """``num_layers_at_start_in_bf16`` / ``num_layers_at_end_in_bf16`` where the precision cell
    names a 0-based range of decoder layers kept in BF16 under the FP8/FP4 recipe, at the start
    or the end of the model (torchao/torchtitan ``filter_fqns``, Megatron-Core
    ``--first-last-layers-bf16``). A range in the middle is not modelled (RowError)."""
    match = _BF16_LAYERS.search(lower_text(row, "precision"))
    if match is None:
        return {}
    first, last = int(match.group(1)), int(match.group(2))
    if not 0 <= first <= last < num_layers:
        raise RowError(f"precision: BF16 layers {first}-{last} outside the model's "
                       f"{num_layers} layers")
    count = last - first + 1
    notes.append(f"layers {first}-{last} keep BF16 GEMMs (row)")
    if last == num_layers - 1:
        return {"num_layers_at_end_in_bf16": count}
    if first == 0:
        return {"num_layers_at_start_in_bf16": count}
    raise RowError(f"precision: BF16 layers {first}-{last} neither start nor end the model")


def global_batch(
    row: Mapping[str, str | None], seq_length: int, dp: int
) -> int:
    """Sequences per optimizer step (global batch)."""
    seqs = read_count(cell_text(row, "global_batch_seqs"), "global_batch_seqs", binary=False)
    if seqs:
        return seqs
    tokens = read_count(cell_text(row, "global_batch_tokens"), "global_batch_tokens", binary=True)
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
    stages = sizes.pp * sizes.vpp
    if sizes.pp > 1 and local % stages == 0 \
            and pipeline_microbatches_default(row) == "total_stages":
        notes.append(f"micro_batch not stated: local batch {local} / pp*vpp {stages} "
                     f"micro-batches (framework profile: pipeline_microbatches total_stages)")
        return local // stages
    notes.append("micro_batch not stated: 1")
    return 1
