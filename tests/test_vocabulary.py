"""The normalization layer: free text of published tables -> typed values, one table per field."""

from __future__ import annotations

import re

import pytest

from perfcast.catalog.models import load_model
from perfcast.validate.vocabulary import (
    PrecisionText,
    RecomputeText,
    ShardingText,
    VocabularyError,
    read_arch_features,
    read_bool,
    read_count,
    read_precision,
    read_recompute,
    read_sharding,
)
from perfcast.validate.vocabulary_names import (
    ARCHITECTURE_TWINS,
    read_gpu_type,
    read_model_name,
)

# ----- booleans --------------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "value"), [
    ("yes", True), ("Yes (TP>1)", True), ("TRUE", True), ("true", True), ("on", True),
    ("enabled", True), ("1", True), ("y", True),
    ("no", False), ("No", False), ("false", False), ("off", False), ("disabled", False),
    ("0", False), ("none", False),
    ("", None), (None, None), ("   ", None),
])
def test_read_bool(text: str | None, value: bool | None) -> None:
    assert read_bool(text, "sequence_parallel") is value


@pytest.mark.parametrize("text", ["maybe", "sometimes (TP>1)", "2"])
def test_read_bool_unknown_names_column_and_value(text: str) -> None:
    with pytest.raises(VocabularyError, match=re.escape(f"sequence_parallel={text!r}")):
        read_bool(text, "sequence_parallel")


# ----- counts ----------------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "binary", "value"), [
    ("1024", True, 1024), ("1,024", True, 1024), ("4k", True, 4096), ("4K", True, 4096),
    ("2M", True, 2 * 1024 * 1024), ("32k (tokens)", True, 32768), ("8192", False, 8192),
    ("2M", False, 2_000_000), ("1.5k", False, 1500), ("", True, None), (None, False, None),
])
def test_read_count(text: str | None, binary: bool, value: int | None) -> None:
    assert read_count(text, "global_batch_tokens", binary=binary) == value


@pytest.mark.parametrize("text", ["3072 -> 15360 (ramped)", "up to 147", "1.5", "many"])
def test_read_count_refuses_inexact(text: str) -> None:
    with pytest.raises(VocabularyError, match="global_batch_seqs="):
        read_count(text, "global_batch_seqs", binary=False)


# ----- precision -------------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "expected"), [
    ("bf16", PrecisionText("bf16")),
    ("BF16", PrecisionText("bf16")),
    ("amp_bf16 (MP mode DEFAULT)", PrecisionText("bf16")),
    ("bf16 (MP mode PURE)", PrecisionText("bf16", None, True)),
    ("mixed (fp16)", PrecisionText("fp16")),
    ("fp16/bf16 mixed (calculon encodes float16)", PrecisionText("fp16")),
    ("FP16", PrecisionText("fp16")),
    ("fp8", PrecisionText("fp8")),
    ("FP8", PrecisionText("fp8")),
    ("amp_fp8 (MP mode DEFAULT)", PrecisionText("fp8")),
    ("FP8-CS", PrecisionText("fp8", "tensorwise")),
    ("fp8 (per-tensor, current scaling)", PrecisionText("fp8", "tensorwise")),
    ("bf16 + float8 linears (tensorwise)", PrecisionText("fp8", "tensorwise")),
    ("FP8 delayed", PrecisionText("fp8", "delayed")),
    ("fp8 delayed scaling", PrecisionText("fp8", "delayed")),
    ("Float8CurrentScaling", PrecisionText("fp8", "tensorwise")),
    ("Float8BlockScaling", PrecisionText("fp8", "blockwise")),
    ("MXFP8BlockScaling", PrecisionText("fp8", "mxfp8")),
    ("NVFP4BlockScaling", PrecisionText("fp8", "nvfp4")),
    ("FP8-MX", PrecisionText("fp8", "mxfp8")),
    ("MXFP8", PrecisionText("fp8", "mxfp8")),
    ("MXFP8 (TE; 1x32 blocks, E8M0 scales)", PrecisionText("fp8", "mxfp8")),
    ("FP8 block-scaled", PrecisionText("fp8", "blockwise")),
    ("FP8 blockwise (TE; 1x128 activations, 128x128 weights)", PrecisionText("fp8", "blockwise")),
    ("FP8 mixed (fine-grained block quantization)", PrecisionText("fp8", "blockwise")),
    ("NVFP4", PrecisionText("fp8", "nvfp4")),
    ("nvfp4 (torchao; last layers bf16)", PrecisionText("fp8", "nvfp4")),
    ("bf16 + float8 rowwise", PrecisionText("fp8", "rowwise")),
    ("FP8 rowwise_with_gw_hp (rowwise; weight-grad GEMM in high precision)",
     PrecisionText("fp8", "rowwise-hp-wgrad")),
    ("", None),
])
def test_read_precision(text: str, expected: PrecisionText | None) -> None:
    assert read_precision(text) == expected


@pytest.mark.parametrize("text", ["int3", "MXFP4", "FP6 (MX)", "W4A16 int4"])
def test_read_precision_unknown(text: str) -> None:
    with pytest.raises(VocabularyError, match=re.escape(f"precision={text!r}")):
        read_precision(text)


# ----- sharding --------------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "expected"), [
    ("DDP (FSDP=0)", ShardingText("none", None, True)),
    ("no FSDP", ShardingText("none", None, True)),
    ("none", ShardingText("none", None, True)),
    ("none (DDP)", ShardingText("none", None, True)),
    ("DDP", ShardingText("none", None, True)),
    ("FSDP (FSDP=1)", ShardingText("fsdp")),
    ("PyTorch FSDP FULL_SHARD", ShardingText("fsdp")),
    ("FSDP2", ShardingText("fsdp")),
    ("FSDP2 (8-way)", ShardingText("fsdp", 8)),
    ("FSDP2 (FSDP size 64)", ShardingText("fsdp", 64)),
    ("FSDP 4", ShardingText("fsdp", 4)),
    ("HSDP (shard 8, replicate 4)", ShardingText("fsdp", 8)),
    ("ZeRO-3 (DeepSpeed)", ShardingText("fsdp")),
    ("ZeRO stage 3", ShardingText("fsdp")),
    ("Megatron FSDP; expert-DP (EDP) 32, ETP 1", ShardingText("fsdp")),
    ("PyTorch FSDP SHARD_GRAD_OP", ShardingText("zero2")),
    ("ZeRO-2", ShardingText("zero2")),
    ("ZeRO-1 DP", ShardingText("distributed_optimizer")),
    ("distributed optimizer (ZeRO-1); BF16 optimizer states", ShardingText("distributed_optimizer")),
    ("use_distributed_optimizer", ShardingText("distributed_optimizer")),
    ("", None),
])
def test_read_sharding(text: str, expected: ShardingText | None) -> None:
    assert read_sharding(text) == expected


def test_read_sharding_unknown() -> None:
    with pytest.raises(VocabularyError, match="dp_sharding='tensor sharding of sorts'"):
        read_sharding("tensor sharding of sorts")


# ----- recompute -------------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "expected"), [
    ("none", RecomputeText("none")),
    ("no activation checkpointing", RecomputeText("none")),
    ("off", RecomputeText("none")),
    ("none stated", None),
    ("", None),
    ("full", RecomputeText("full")),
    ("full activation checkpointing", RecomputeText("full")),
    ("full (--activations-checkpoint-method uniform)", RecomputeText("full")),
    # torchtitan per-op SAC (selective_ac_option = "op"): the op_sac module
    ("selective per-op SAC", RecomputeText("selective", ("op_sac",))),
    ("per-op selective activation checkpointing", RecomputeText("selective", ("op_sac",))),
    ("selective op activation checkpointing", RecomputeText("selective", ("op_sac",))),
    ("selective (op) per default toml", RecomputeText("selective", ("op_sac",))),
    ("selective activation checkpointing", RecomputeText("selective")),
    ("selective (attention core only)", RecomputeText("selective", ("core_attn",))),
    ("selective (--recompute-modules mlp moe_act)", RecomputeText("selective", ("mlp", "moe_act"))),
    ("selective (--recompute-modules layernorm moe)", RecomputeText("selective",
                                                                    ("layernorm", "moe"))),
    ("selective (moe_act, layernorm)", RecomputeText("selective", ("moe_act", "layernorm"))),
    ("selective (layernorm, moe act, shared_expert)",
     RecomputeText("selective", ("layernorm", "moe_act", "shared_experts"))),
    ("selective layer activation checkpointing", RecomputeText("every_other_layer")),
    ("AC: full", RecomputeText("full")),
    ("Full AC", RecomputeText("full")),
    ("activation checkpointing: none", RecomputeText("none")),
    ("recompute off", RecomputeText("none")),
])
def test_read_recompute(text: str, expected: RecomputeText | None) -> None:
    assert read_recompute(text) == expected


def test_read_recompute_unknown() -> None:
    with pytest.raises(VocabularyError, match="recompute='sometimes'"):
        read_recompute("sometimes")


# ----- architecture features ------------------------------------------------------------------

@pytest.mark.parametrize(("text", "features"), [
    ("MPT: ALiBi, no bias, GELU", {"position_embedding": "alibi", "attention_bias": False,
                                   "mlp_bias": False, "activation": "gelu"}),
    ("dense (parallel layers, multi-query attention)", {"parallel_attention_mlp": True,
                                                         "num_key_value_heads": 1}),
    ("moe (SwiGLU; GeGLU elsewhere)", {}),
    ("dense", {}),
    ("", {}),
])
def test_read_arch_features(text: str, features: dict) -> None:
    assert read_arch_features(text) == features


# ----- GPUs and systems ------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "system", "gpu"), [
    ("H100", "dgx-h100", "h100-sxm"),
    ("NVIDIA H100 80GB HBM3", "dgx-h100", "h100-sxm"),
    ("H100 80GB HBM3 (700W)", "dgx-h100", "h100-sxm"),
    ("DGX H100", "dgx-h100", "h100-sxm"),
    ("H100 (DGX-H100)", "dgx-h100", "h100-sxm"),
    ("H100 PCIe", "h100-pcie-node", "h100-pcie"),
    ("NVIDIA A100 80GB SXM", "dgx-a100", "a100-80gb"),
    ("A100 40GB", "dgx-a100-40gb", "a100-40gb"),
    ("a100 sxm 40gb", "dgx-a100-40gb", "a100-40gb"),
    ("A100 80GB (Selene, DGX A100)", "dgx-a100", "a100-80gb"),
    ("NVIDIA H200 141GB", "dgx-h200", "h200-sxm"),
    ("B200 SXM 180GB", "dgx-b200", "b200"),
    ("GB200 NVL72", "gb200-nvl72", "gb200"),
    ("GB200 (NVL72)", "gb200-nvl72", "gb200"),
    ("GB300 (DGX-GB300)", "gb300-nvl72", "b300"),
    ("GB300 (NVL72)", "gb300-nvl72", "b300"),
    ("GB300", "gb300-nvl72", "b300"),
    ("NVIDIA GB300 288GB", "gb300-nvl72", "b300"),
    ("GB300 NVL72 (B300 GPU 288GB, rack NVLink)", "gb300-nvl72", "b300"),
    ("B300 SXM 288GB (Blackwell Ultra)", "dgx-b300", "b300"),
    ("AMD Instinct MI300X 192GB", "mi300x-8", "mi300x"),
    ("MI355X 288GB", "mi355x-8", "mi355x"),
])
def test_read_gpu_type(text: str, system: str, gpu: str) -> None:
    found = read_gpu_type(text)
    assert found is not None and (found.system, found.gpu) == (system, gpu)


def test_read_gpu_type_notes_memory_and_power() -> None:
    # the catalog has the 96 GB, 500 W variant: it is chosen, and nothing is left to note
    found = read_gpu_type("NVIDIA H100 96GB HBM2e SXM (500W power limit)")
    assert found is not None and found.gpu == "h100-96gb-500w"
    assert (found.memory_GB, found.power_W) == (96, 500) and found.notes == ()
    # a memory size and power limit the catalog GPU does not have are noted
    found = read_gpu_type("H100 SXM 94GB (600W)")
    assert found is not None and found.gpu == "h100-sxm"
    assert (found.memory_GB, found.power_W) == (94, 600)
    assert any("94 GB" in n for n in found.notes) and any("600 W" in n for n in found.notes)


def test_read_gpu_type_unknown_suggests() -> None:
    with pytest.raises(VocabularyError, match=r"gpu_type='V200'.*did you mean"):
        read_gpu_type("V200")
    assert read_gpu_type("") is None


# ----- model names -----------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "slug"), [
    ("Llama-3.1-70B", "llama-3.1-70b"),
    ("meta-llama/Llama-3.1-70B-Instruct", "llama-3.1-70b"),
    ("meta-llama/Meta-Llama-3-8B", "llama-3-8b"),
    ("llama_3.1_405b", "llama-3.1-405b"),
    ("LLAMA3.1-405B", "llama-3.1-405b"),
    ("Llama-3.1-405B(-Instruct)", "llama-3.1-405b"),
    ("Llama-3.3-70B-Instruct", "llama-3.1-70b"),
    ("Qwen/Qwen3-235B-A22B-Instruct-2507", "qwen3-235b-a22b"),
    ("Qwen3-8B-Base", "qwen3-8b"),
    ("Qwen3-30B-A3B-FP8", "qwen3-30b-a3b"),
    ("DeepSeek-R1 (671B MoE)", "deepseek-v3"),
    ("deepseek-ai/DeepSeek-R1-0528", "deepseek-v3"),
    ("DeepSeek-V3/R1 (671B MoE)", "deepseek-v3"),
    ("Mixtral-8x22B-Instruct-v0.1", "mixtral-8x22b"),
])
def test_read_model_name(text: str, slug: str) -> None:
    found = read_model_name(text)
    assert found is not None and found.catalog == slug


@pytest.mark.parametrize("text", ["Kimi-K3", "Qwen3-Next-80B-A3B", "MPT-3b"])
def test_read_model_name_unknown(text: str) -> None:
    with pytest.raises(VocabularyError, match="model="):
        read_model_name(text)


@pytest.mark.parametrize("twin", ARCHITECTURE_TWINS, ids=lambda t: t.spelling)
def test_architecture_twins_exist(twin) -> None:
    assert load_model(twin.catalog).name == twin.catalog and twin.source
