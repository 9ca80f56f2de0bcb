"""Serving-engine profiles as data: ``catalog/data/frameworks/serving/<engine>.yaml``.

Each file lists, per scheduler setting, entries ``{value, source}`` optionally selected by an
engine version range (``since`` inclusive, ``until`` exclusive), a device-memory tier
(``min_gpu_memory_GiB``), the device's vendor (``gpu_vendor``: the platform an engine branches
on, CUDA vs ROCm), its architecture generation (``gpu_generations``: a list; the engines
branch on the compute capability, e.g. SM100 = the catalog's ``blackwell`` and
``blackwell-ultra`` data-centre parts) and the model's attention (``attention``: ``mla`` or
``mha``, MHA/GQA/MQA; the engines pick attention backends by it) and data-parallel attention
(``attention_dp``: true/false); the first entry that matches
wins, as the engines' own default logic does (vLLM ``arg_utils.py``, SGLang ``memory_hook.py``,
TensorRT-LLM ``BaseLlmArgs``; file and line cited in every ``source``, from
/work/shared/reference/frameworks.md §5-7). An entry with a device or model selector never
matches when that property is not given (the general entry below it applies).

``engine_config(name, gpu_memory_bytes, version, target=...)`` resolves a profile to an
``EngineConfig`` of plain typed values with the source of each value, for one device, model
and engine version.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal

from perfcast.catalog.files import DATA_DIR, read_mapping
from perfcast.errors import InputError
from perfcast.specs.hardware import GPUSpec
from perfcast.specs.model import ModelSpec
from perfcast.units import GiB

SERVING_DIR = DATA_DIR / "frameworks" / "serving"

SchedulerPolicy = Literal["mixed", "prefill_first"]
DecodeAttentionKernel = Literal["grouped", "per_query_head"]
MemoryBasis = Literal["total", "free"]
MoEDispatch = Literal["allreduce", "alltoall"]
KVAdmission = Literal["reserve_full", "on_demand"]
CheckpointKV = Literal["model", "fp8"]
AttentionKind = Literal["mla", "mha"]
RankTokenBudget = Literal["full", "half", "split"]
TPAllReduce = Literal["custom", "nccl"]
MLADecodeWeights = Literal["split", "absorbed"]
AttentionDPGather = Literal["nccl_all_gather", "in_tp_all_reduce"]
EagerLaunch = Literal["python", "native"]
Fp8BlockKernels = Literal["triton_rocm", "native"]

_SETTINGS = ("scheduler_policy", "chunked_prefill", "chunked_scheduler_policy",
             "token_budget_per_step", "max_running_seqs",
             "kv_block_tokens", "gpu_memory_fraction", "gpu_memory_fraction_basis",
             "cuda_graph_max_batch", "mixed_step_graphs", "mixed_step_graph_max_tokens",
             "decode_attention_kernel",
             "overlap_scheduler", "moe_dispatch", "kv_admission", "fp8_checkpoint_kv_cache",
             "scheduler_steps", "attention_dp_rank_budget", "tp_all_reduce",
             "mla_decode_head_block", "mla_decode_weights", "attention_dp_gather",
             "eager_launch", "fp8_block_kernels")


@dataclass(frozen=True)
class EngineConfig:
    """One engine's scheduler and memory defaults resolved for a device and version."""

    engine: str
    version: str | None
    """Engine version the values were resolved for (None = latest documented)."""
    scheduler_policy: SchedulerPolicy
    """mixed: decode tokens and prefill chunks share each step (vLLM V1, TRT-LLM in-flight
    batching); prefill_first: waiting prompts are prefilled in their own step first (SGLang)."""
    chunked_prefill: bool
    """Prompts longer than the step budget are split over steps."""
    chunked_scheduler_policy: SchedulerPolicy
    """The policy when chunked prefill is switched on (``serving.override_engine``): vLLM's V0
    engine then runs its chunked-prefill scheduler (decodes first, prompt chunks beside them,
    i.e. ``mixed``) instead of prefills-first; the other engines keep their policy."""
    token_budget_per_step: int
    """Most tokens (decode + prefill) one step processes (max_num_batched_tokens, ...)."""
    max_running_seqs: int
    """Most sequences admitted at once (max_num_seqs, max_running_requests, max_batch_size)."""
    kv_block_tokens: int
    """Tokens per KV page: a sequence holds ⌈tokens/block⌉ pages."""
    gpu_memory_fraction: float
    """Share of device memory (basis ``total``) or of what is free after weights (``free``)."""
    gpu_memory_fraction_basis: MemoryBasis
    cuda_graph_max_batch: int
    """Largest decode batch replayed as a CUDA graph (0 = no graphs)."""
    mixed_step_graphs: bool
    """Prefill/mixed steps also run as (piecewise) graphs: no per-layer launch overhead."""
    mixed_step_graph_max_tokens: int | None
    """Largest step (tokens) the prefill/mixed graphs are captured for; a larger step runs
    eager (vLLM ``max_cudagraph_capture_size``, SGLang ``piecewise_cuda_graph_max_tokens``).
    None = every step up to the token budget."""
    decode_attention_kernel: DecodeAttentionKernel
    """grouped: each KV head read once per step (XQA, FlashInfer, FA3); per_query_head: once
    per query head of its group (2023 masked-MHA kernels)."""
    overlap_scheduler: bool
    """CPU scheduling overlapped with the GPU step (no host time per step exposed)."""
    moe_dispatch: MoEDispatch
    """Expert parallelism inside the TP group without attention DP: ``allreduce`` = tokens
    replicated, each rank runs its local experts, outputs all-reduced with the TP all-reduce
    (no all-to-all); ``alltoall`` = tokens dispatched to the experts' ranks."""
    kv_admission: KVAdmission
    """reserve_full: a request is admitted only with pages for its whole length;
    on_demand: with pages for its prompt (pages added as it decodes)."""
    fp8_checkpoint_kv_cache: CheckpointKV
    """KV-cache dtype the engine runs with the FP8 checkpoint it serves when none is set:
    ``model`` = the activations' 16-bit type (kv dtype 'auto', the checkpoint declares no KV
    quantization); ``fp8`` = the checkpoint declares an FP8 KV cache (NIM's ModelOpt FP8)."""
    scheduler_steps: int
    """Decode steps per scheduler call (vLLM V0 ``--num-scheduler-steps``, multi-step
    scheduling): a decode batch runs this many steps before new requests are admitted. SGLang's
    ``--scheduler-recv-interval N`` gates admission the same way: the scheduler takes new
    requests from its socket only after N decode steps since it last took them, or right after
    a prefill step (SGL@0.5.12 scheduler_recv_skipper.py, weights in environ.py L229-232)."""
    attention_dp_rank_budget: RankTokenBudget
    """Step token budget of each rank's scheduler under attention DP: ``full`` = the whole
    budget per rank (TensorRT-LLM max_num_tokens per rank), ``half`` = half of it (SGLang
    0.4.3), ``split`` = the budget divided over the tp ranks (SGLang from 0.4.6)."""
    tp_all_reduce: TPAllReduce
    """The TP all-reduce of the engine's forward pass: ``custom`` = the engine's own one-shot
    (peer-to-peer) all-reduce kernel inside the NVLink/xGMI domain where it is faster than the
    ring (``comm.one_shot``); ``nccl`` = the collective library's all-reduce only (NCCL/RCCL,
    its latency model with the launch, ``comm.select``): engines that switch their custom kernel
    off on a platform (vLLM through 0.8.0 and SGLang before 0.4.4 on AMD GPUs)."""
    mla_decode_head_block: int | None
    """MLA decode kernel: query heads one program block handles per read of the compressed
    latent KV (the Triton MLA decode kernel of vLLM V0 and SGLang 0.4: ``BLOCK_H`` 16), so the
    latent is read ⌈heads on the GPU / block⌉ times a step; None = once for all heads (FlashMLA,
    FlashInfer MLA, FA3 MLA). Matters where one GPU holds more than a block of heads (attention
    DP: all 128 heads of DeepSeek-V3 on each rank, 8 reads)."""
    mla_decode_weights: MLADecodeWeights
    """MLA decode projections: ``split`` = W_UK applied to the query and W_UV to the attention
    output per step (bmm over the heads; kv_b_proj's bytes); ``absorbed`` = the products
    W_UQ·W_UK and W_UV·W_O precomputed and read instead (vLLM ≤ 0.7.3: heads·kv_lora_rank-wide
    matrices, ~3.5× the bytes of the split ones for DeepSeek-V3;
    ``inference_ops.absorbed_mla_decode_ops``)."""
    attention_dp_gather: AttentionDPGather
    """Under attention DP, how the ranks' tokens meet for the MLP: ``nccl_all_gather`` = a
    collective all-gather of the hidden states every layer before the MLP, then its TP
    all-reduce (SGLang 0.4.3-0.4.4); ``in_tp_all_reduce`` = no gather collective charged
    beyond the layer's one TP all-reduce of all ranks' tokens (the model's default form)."""
    eager_launch: EagerLaunch
    """Who issues the kernels of a step that is not replayed as a graph: ``python`` = the
    model's forward runs as PyTorch modules called from Python (vLLM, SGLang, the TensorRT-LLM
    PyTorch backend), ~10 µs of host time an op (``calibration/host_launch.yaml``
    ``host_s_per_op``), so an eager step takes at least its ops × that
    (``inference_phases.eager_host_floor_s``) -- the bound that matters where graphs are off
    (TensorRT-LLM PyTorch backend before 1.0) for a model of many small decode ops (DeepSeek-V3:
    ~1,400 ops a step); ``native`` = a C++ runtime launches a prebuilt engine (NIM's TensorRT
    engines): no host floor beyond the kernels' own launch floor."""
    fp8_block_kernels: Fp8BlockKernels
    """Kernels of block-scaled FP8 GEMMs (the 128x128-block checkpoints of DeepSeek-V3/R1 and
    Kimi K2, the catalog's MLA models): ``triton_rocm`` = Triton ``w8a8_block_fp8_matmul`` and
    ``fused_moe`` on ROCm, the builds before AITER/CK kernels (SGLang before 0.4.7 without the
    opt-in CK_MOE / SGLANG_AITER_MOE; vLLM without VLLM_ROCM_USE_AITER), their GEMMs slower by
    the sourced factors of ``calibration/fp8_block_kernels.yaml``; ``native`` = the platform's
    tuned kernels the roofline stands for."""
    sources: tuple[tuple[str, str], ...]
    """(setting, source) of every resolved value."""
    max_chunk_tokens: int | None = None
    """Most prompt tokens one request prefills in a step (None = the step budget): under
    attention DP a request is prefilled on its rank, within that rank's budget."""

    def source(self, setting: str) -> str:
        return dict(self.sources)[setting]

    def mixed_step_graphed(self, tokens: float) -> bool:
        """Whether a prefill/mixed step of ``tokens`` tokens replays a (piecewise) graph."""
        cap = self.mixed_step_graph_max_tokens
        return self.mixed_step_graphs and (cap is None or tokens <= cap)


@dataclass(frozen=True)
class EngineTarget:
    """Device and model properties a profile entry may be selected by (module docstring);
    None = not known (entries that need it do not match)."""

    gpu_vendor: str | None = None
    """Vendor of the GPU (``GPUSpec.vendor``: nvidia, amd, ...)."""
    gpu_generation: str | None = None
    """Architecture generation (``GPUSpec.generation``: hopper, blackwell, cdna3, ...)."""
    attention: AttentionKind | None = None
    """mla: multi-head latent attention (DeepSeek-V2/V3 layout); mha: MHA/GQA/MQA."""
    attention_dp: bool | None = None
    """Data-parallel attention (each TP rank its own scheduler and requests)."""


def engine_target(gpu: GPUSpec, model: ModelSpec, attention_dp: bool = False) -> EngineTarget:
    """The selectors of one deployment: the GPU's vendor and generation, the model's attention,
    and whether attention runs data-parallel."""
    return EngineTarget(gpu_vendor=gpu.vendor, gpu_generation=gpu.generation,
                        attention="mla" if model.is_mla else "mha", attention_dp=attention_dp)


def _version_key(text: str) -> tuple[int, ...]:
    """'0.10.2' -> (0, 10, 2); trailing non-numeric parts ignored ('0.5.12rc1' -> (0, 5, 12))."""
    return tuple(int(x) for x in re.findall(r"\d+", text)[:3])


def _matches_target(entry: dict[str, Any], target: EngineTarget) -> bool:
    """Whether the entry's device/model selectors (if any) hold for ``target``."""
    if "gpu_vendor" in entry and target.gpu_vendor != entry["gpu_vendor"]:
        return False
    if "gpu_generations" in entry and target.gpu_generation not in entry["gpu_generations"]:
        return False
    if "attention_dp" in entry and target.attention_dp != entry["attention_dp"]:
        return False
    return "attention" not in entry or target.attention == entry["attention"]


def _matches(entry: dict[str, Any], version: str | None, memory_GiB: float,
             target: EngineTarget) -> bool:
    if not _matches_target(entry, target):
        return False
    if version is not None:
        key = _version_key(version)
        if "since" in entry and key < _version_key(str(entry["since"])):
            return False
        if "until" in entry and key >= _version_key(str(entry["until"])):
            return False
    elif "until" in entry:
        return False  # unknown version: the latest documented default
    return memory_GiB >= float(entry.get("min_gpu_memory_GiB", 0.0))


@cache
def _profile(name: str) -> dict[str, Any]:
    path = SERVING_DIR / f"{name}.yaml"
    if not path.exists():
        raise InputError("engine", name, f"no serving-engine profile (known: {', '.join(engine_names())})")
    return read_mapping(path)


def engine_names() -> tuple[str, ...]:
    """Engines with a profile file."""
    return tuple(sorted(p.stem for p in SERVING_DIR.glob("*.yaml")))


def engine_config(name: str, gpu_memory_bytes: float, version: str | None = None,
                  target: EngineTarget | None = None) -> EngineConfig:
    """Resolve engine ``name`` for a device of ``gpu_memory_bytes``, an engine ``version`` and
    the device/model ``target`` (None: entries with device or model selectors are skipped)."""
    data = _profile(name)
    target = target or EngineTarget()
    memory_GiB = gpu_memory_bytes / GiB
    values: dict[str, Any] = {}
    sources = []
    for setting in _SETTINGS:
        entries = data.get(setting) or []
        entry = next((e for e in entries if _matches(e, version, memory_GiB, target)), None)
        if entry is None:
            raise InputError("engine", name, f"profile has no {setting} for version {version!r}")
        values[setting] = entry["value"]
        sources.append((setting, str(entry["source"])))
    return EngineConfig(engine=name, version=version, sources=tuple(sources), **values)


_ENGINE_PATTERNS = (("tensorrt-llm", re.compile(r"tensorrt-llm|trt-llm|trtllm", re.I)),
                    ("sglang", re.compile(r"sglang", re.I)),
                    ("vllm", re.compile(r"vllm", re.I)),
                    ("nim", re.compile(r"\bNIM\b")),
                    ("atom", re.compile(r"\bATOM\b")))


def engine_from_text(text: str) -> tuple[str, str | None] | None:
    """(engine, version) named in a framework description ('SGLang 0.5.12 [...]',
    'vLLM v0.21.0', 'vLLM ~v0.19.1' (approximate: read as 0.19.1), 'NVIDIA Dynamo +
    TensorRT-LLM ...', 'NVIDIA NIM llama-3.3-70b-instruct 1.8.0'), or None for an engine
    without a profile."""
    for name, pattern in _ENGINE_PATTERNS:
        match = pattern.search(text)
        if match:
            rest = text[match.end():]
            version = re.match(r"\s*~?v?(\d+\.\d+(?:\.\d+)?)", rest)
            return name, version.group(1) if version else None
    return None
