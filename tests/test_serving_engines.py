"""Serving-engine profiles (catalog/data/frameworks/serving/*.yaml) and the paged-KV memory model."""

from __future__ import annotations

import pytest

from perfcast.catalog.models import load_model
from perfcast.catalog.serving_engines import engine_config, engine_from_text, engine_names
from perfcast.errors import InputError
from perfcast.estimate.serving_memory import serving_memory_paged
from perfcast.specs.inference import InferencePrecision
from perfcast.specs.strategy import Strategy
from perfcast.units import GiB

DEVICES_GiB = (24, 48, 80, 141, 192, 288)


def test_five_engines_ship():
    assert set(engine_names()) == {"vllm", "sglang", "tensorrt-llm", "nim", "atom"}


def test_atom_prefills_whole_prompts_first():
    """AMD ATOM's nano-vllm-style scheduler: prefill-only steps of whole prompts (atom.yaml)."""
    assert engine_from_text("AMD ATOM (commit 2f713064) + AITER") == ("atom", None)
    atom = engine_config("atom", 288 * GiB)
    assert (atom.scheduler_policy, atom.chunked_prefill) == ("prefill_first", False)


def test_nim_serves_its_fp8_checkpoints_with_an_fp8_kv_cache():
    """NIM's FP8 profiles are ModelOpt FP8 checkpoints that declare an FP8 KV cache; the other
    engines' kv dtype 'auto' stays 16-bit for the FP8 checkpoints they load (nim.yaml)."""
    from perfcast.estimate.serving import default_kv_cache

    assert engine_from_text("NVIDIA NIM llama-3.3-70b-instruct 1.8.0") == ("nim", None)
    nim = engine_config("nim", 80 * GiB)
    assert default_kv_cache(nim, "fp8", "fp8") == "fp8"
    assert default_kv_cache(nim, "bf16", "bf16") == "bf16"
    for engine in ("vllm", "sglang", "tensorrt-llm"):
        assert default_kv_cache(engine_config(engine, 80 * GiB), "fp8", "fp8") == "bf16"


@pytest.mark.parametrize("engine", ["vllm", "sglang", "tensorrt-llm", "nim", "atom"])
@pytest.mark.parametrize("version", [None, "0.4.3", "0.7.3", "0.21.0", "1.3.0"])
@pytest.mark.parametrize("memory_GiB", DEVICES_GiB)
def test_every_profile_resolves_with_a_source_per_value(engine, version, memory_GiB):
    config = engine_config(engine, memory_GiB * GiB, version)
    assert config.token_budget_per_step > 0 and config.max_running_seqs > 0
    assert 0.5 < config.gpu_memory_fraction < 1.0
    assert config.kv_block_tokens >= 1
    assert all(source.strip() for _, source in config.sources)


def test_version_ranges_pick_the_default_of_that_release():
    # vLLM gpu_memory_utilization 0.9 through 0.19, 0.92 from 0.20 (frameworks.md §5)
    assert engine_config("vllm", 80 * GiB, "0.19.1").gpu_memory_fraction == 0.9
    assert engine_config("vllm", 80 * GiB, "0.20.0").gpu_memory_fraction == 0.92
    assert engine_config("vllm", 80 * GiB, "0.9.2").cuda_graph_max_batch == 0
    assert engine_config("vllm", 80 * GiB).cuda_graph_max_batch == 512


def test_vllm_v0_engine_before_0_8():
    """vLLM ≤ 0.7 ran the V0 engine (VLLM_USE_V1=0): prefill-first without chunking (MLA forces
    it off), max_num_seqs 256, decode graphs up to it (vLLM@0.7.3 arg_utils.py, config.py,
    core/scheduler.py)."""
    v0 = engine_config("vllm", 141 * GiB, "0.7.3")
    assert (v0.scheduler_policy, v0.chunked_prefill, v0.max_running_seqs) == ("prefill_first", False, 256)
    assert v0.cuda_graph_max_batch == 256 and not v0.overlap_scheduler
    v1 = engine_config("vllm", 141 * GiB, "0.8.5")
    assert (v1.scheduler_policy, v1.chunked_prefill, v1.max_running_seqs) == ("mixed", True, 1024)


def test_device_tiers():
    assert engine_config("vllm", 80 * GiB).token_budget_per_step == 8192
    assert engine_config("vllm", 180 * GiB).token_budget_per_step == 16384
    assert engine_config("sglang", 141 * GiB).token_budget_per_step == 8192
    assert engine_config("sglang", 192 * GiB).token_budget_per_step == 16384
    assert engine_config("sglang", 40 * GiB).token_budget_per_step == 4096


def test_scheduler_classes():
    assert engine_config("sglang", 80 * GiB).scheduler_policy == "prefill_first"
    assert engine_config("vllm", 80 * GiB).scheduler_policy == "mixed"
    trt = engine_config("tensorrt-llm", 80 * GiB)
    assert trt.scheduler_policy == "mixed" and not trt.chunked_prefill
    assert trt.kv_admission == "reserve_full" and trt.gpu_memory_fraction_basis == "free"


def test_unknown_engine_is_an_input_error():
    with pytest.raises(InputError, match="engine"):
        engine_config("lmdeploy", 80 * GiB)


@pytest.mark.parametrize("text, expected", [
    ("vLLM v0.21.0", ("vllm", "0.21.0")),
    ("SGLang 0.5.12 [lmsysorg/sglang:v0.5.12-cu130]", ("sglang", "0.5.12")),
    ("TensorRT-LLM 1.3.0rc14 [nvcr.io/...]", ("tensorrt-llm", "1.3.0")),
    ("NVIDIA Dynamo 0.8.1 + TensorRT-LLM (disaggregated)", ("tensorrt-llm", None)),
    ("AMD ATOM (commit 2f713064) + AITER", ("atom", None)),
    ("NVIDIA NIM llama-3.3-70b-instruct 1.8.0 (engine profile not stated)", ("nim", None)),
    ("LMDeploy 0.7.3 (TurboMind)", None),
])
def test_engine_from_framework_text(text, expected):
    assert engine_from_text(text) == expected


def _memory(model: str, tp: int, gpu_GiB: float = 80, engine: str = "vllm"):
    return serving_memory_paged(load_model(model), gpu_GiB * GiB, Strategy(num_gpus=tp, tp=tp),
                                InferencePrecision(), engine_config(engine, gpu_GiB * GiB))


def test_405b_on_one_h100_does_not_fit():
    memory = _memory("llama-3.1-405b", 1)
    assert not memory.fits(2048) and memory.max_concurrent_seqs(2048) == 0
    assert memory.kv_pool_bytes < 0


def test_70b_tp8_kv_pool_holds_hundreds_of_sequences():
    # ~52 GB of KV per GPU at 40 KB/token/GPU (80 layers x 1 KV head x 128 x 2 x 2 B):
    # the "KV cache alone holds ~900 sequences" at 2k tokens
    memory = _memory("llama-3.1-70b", 8)
    assert memory.kv_bytes_per_token == pytest.approx(80 * 1 * 128 * 2 * 2)
    assert 500 < memory.max_concurrent_seqs(2048) <= memory.max_running_seqs


@pytest.mark.parametrize("model", ["llama-3.1-70b", "llama-3.1-8b", "qwen3-235b-a22b"])
def test_more_tp_never_means_fewer_sequences(model):
    pools = [_memory(model, tp, 141).max_concurrent_seqs(4096) for tp in (1, 2, 4, 8)]
    assert pools == sorted(pools)


def test_kv_pages_round_up():
    memory = _memory("llama-3.1-8b", 1)
    per_seq_17 = memory.kv_pool_tokens // 32  # 17 tokens hold two 16-token pages
    assert memory.max_concurrent_seqs(17) == min(memory.max_running_seqs, per_seq_17)


def test_engine_settings_stated_in_notes_override_the_profile():
    from perfcast.validate.serving_rows import engine_overrides

    notes = ("chunked prefill on (max-num-batched-tokens 512), max-num-seqs 1024; "
             "max_batch_size 896 per rank, kv_cache_free_gpu_mem_fraction 0.93")
    assert engine_overrides(notes) == {"token_budget_per_step": 512, "max_running_seqs": 1024,
                                       "gpu_memory_fraction": 0.93, "chunked_prefill": True}
    # under attention DP the stated values are per rank; estimate_serving sums the ranks
    assert engine_overrides("max_batch_size 896 per rank") == {"max_running_seqs": 896}


def test_override_engine_names_its_source_and_rejects_unknown_settings():
    from perfcast.estimate.serving import override_engine

    config = override_engine(engine_config("vllm", 80 * GiB), {"token_budget_per_step": 512})
    assert config.token_budget_per_step == 512
    assert config.source("token_budget_per_step") == "set by the user"
    with pytest.raises(InputError, match="warp_size"):
        override_engine(config, {"warp_size": 64})


@pytest.mark.parametrize("notes, metric, expected", [
    ("...; MEAN TTFT (median 14419.0 ms, p99 16084.0 ms)", "ttft", "mean"),
    ("TTFT/TPOT are MEDIANS over requests; median TTFT (mean 961.48 ms)", "ttft", "median"),
    ("TTFT/TPOT are MEDIANS over requests; median TPOT (mean 16.9 ms)", "tpot", "median"),
    ("TTFT and ITL are MEDIANS (ITL used as TPOT)", "tpot", "median"),
    ("the page does not state whether TTFT/ITL are mean or median", "ttft", "mean"),
    ("closed loop, 500 prompts", "ttft", "mean"),
])
def test_row_statistic(notes, metric, expected):
    from perfcast.validate.serving_rows import row_statistic

    assert row_statistic(notes, metric) == expected


def test_continuous_batching_max_batch_comes_from_the_paged_pool():
    """The issue's 70B TP8 case: the FasterTransformer preallocation allowed ~90 sequences;
    paged KV holds the ~600 the pool fits."""
    from perfcast.catalog.systems import load_system
    from perfcast.estimate.inference import estimate_inference

    model, system = load_model("llama-3.1-70b"), load_system("dgx-h100", num_gpus=8)
    options = dict(batch_size=64, input_len=1024, output_len=1024)
    static = estimate_inference(model, system, Strategy(num_gpus=8, tp=8), **options)
    continuous = estimate_inference(model, system, Strategy(num_gpus=8, tp=8),
                                    batching="continuous", **options)
    assert static.max_batch_size < 100 < 500 < continuous.max_batch_size
    graphed = estimate_inference(model, system, Strategy(num_gpus=8, tp=8),
                                 batching="continuous", cuda_graphs=True, **options)
    assert graphed.tpot_s < continuous.tpot_s  # graphs reach the decode share of a mixed step


def test_chunked_prefill_stated_in_the_notes_switches_vllm_v0_to_its_chunked_scheduler():
    """vLLM 0.6 with chunked prefill on runs _schedule_chunked_prefill (decodes first, prompt
    chunks beside them: mixed) instead of prefills-first; SGLang keeps prefill-first."""
    from perfcast.estimate.serving import override_engine
    from perfcast.validate.serving_rows import engine_overrides

    notes = "TP8, --max-model-len 91680, chunked prefill on (max-num-batched-tokens 512)"
    found = engine_overrides(notes)
    assert found == {"token_budget_per_step": 512, "chunked_prefill": True}
    assert engine_overrides("TP8, chunked prefill off, --num-scheduler-steps 15") == {
        "chunked_prefill": False, "scheduler_steps": 15}
    assert engine_overrides("--scheduler-recv-interval 30, --stream-interval 10") == {
        "scheduler_steps": 30}
    v0 = engine_config("vllm", 80 * GiB, "0.6.3")
    assert (v0.scheduler_policy, v0.chunked_prefill) == ("prefill_first", False)
    chunked = override_engine(v0, found)
    assert (chunked.scheduler_policy, chunked.chunked_prefill) == ("mixed", True)
    assert chunked.source("scheduler_policy") == "set by the user"
    assert override_engine(v0, {"chunked_prefill": False}).scheduler_policy == "prefill_first"
    sglang = override_engine(engine_config("sglang", 80 * GiB), {"chunked_prefill": True})
    assert sglang.scheduler_policy == "prefill_first"


def test_approximate_engine_versions_are_read():
    assert engine_from_text("vLLM ~v0.19.1 (post FA3 FP8 fixes)") == ("vllm", "0.19.1")


def test_sglang_prefill_graphs_follow_release_platform_moe_runner_and_attention_dp():
    """SGLang's piecewise prefill graphs: on by default from 0.5.10 on CUDA; off on ROCm, with
    DP attention, and for DeepSeek-V3-class (MLA) models on SM100, whose default
    flashinfer_trtllm MoE runner disables them; MLA steps above 2048 tokens run eager
    (sglang.yaml, SGL@0.5.10/0.5.12 server_args.py)."""
    from perfcast.catalog.serving_engines import EngineTarget

    def config(vendor, generation, attention, version="0.5.12", dp=False):
        target = EngineTarget(gpu_vendor=vendor, gpu_generation=generation, attention=attention,
                              attention_dp=dp)
        return engine_config("sglang", 192 * GiB, version, target)

    assert config("nvidia", "hopper", "mla").mixed_step_graphs is True
    assert config("nvidia", "blackwell", "mha").mixed_step_graphs is True
    assert config("nvidia", "blackwell", "mla").mixed_step_graphs is False
    assert "flashinfer_trtllm" in config("nvidia", "blackwell-ultra", "mla").source(
        "mixed_step_graphs")
    assert config("amd", "cdna3", "mha").mixed_step_graphs is False
    assert "ROCm" in config("amd", "cdna4", "mla").source("mixed_step_graphs")
    assert config("nvidia", "hopper", "mha", dp=True).mixed_step_graphs is False
    assert config("nvidia", "hopper", "mha", version="0.5.9").mixed_step_graphs is False
    assert config("nvidia", "hopper", "mha", version="0.5.10").mixed_step_graphs is True
    # MLA: graphs up to 2048 tokens; other models: every step up to the chunk size
    mla, mha = config("nvidia", "hopper", "mla"), config("nvidia", "hopper", "mha")
    assert (mla.mixed_step_graphed(2048), mla.mixed_step_graphed(2049)) == (True, False)
    assert mha.mixed_step_graph_max_tokens is None and mha.mixed_step_graphed(16384)
    # device or model unknown: the general entries
    assert engine_config("sglang", 192 * GiB, "0.5.12").mixed_step_graphs is True
    assert engine_config("sglang", 192 * GiB, "0.4.3").mixed_step_graphs is False


def test_vllm_piecewise_graphs_stop_at_the_capture_size():
    """vLLM captures piecewise graphs for steps of up to max_cudagraph_capture_size tokens
    (512; 1024 on SM100 in 0.33): a larger mixed step, or a larger decode batch, runs eager."""
    from perfcast.catalog.serving_engines import EngineTarget

    hopper = engine_config("vllm", 80 * GiB, "0.21.0")
    assert (hopper.mixed_step_graphed(512), hopper.mixed_step_graphed(513)) == (True, False)
    b200 = EngineTarget(gpu_vendor="nvidia", gpu_generation="blackwell", attention="mha")
    assert engine_config("vllm", 180 * GiB, "0.33.0", b200).mixed_step_graph_max_tokens == 1024
    assert engine_config("vllm", 180 * GiB, "0.21.0", b200).mixed_step_graph_max_tokens == 512
    for engine in ("tensorrt-llm", "nim", "atom"):
        assert not engine_config(engine, 80 * GiB).mixed_step_graphed(1)


def test_engine_target_reads_the_gpu_and_the_attention():
    from perfcast.catalog.gpus import load_gpu
    from perfcast.catalog.serving_engines import engine_target

    deepseek, llama = load_model("deepseek-v3"), load_model("llama-3.1-70b")
    b200, mi300x = load_gpu("b200"), load_gpu("mi300x")
    assert engine_target(b200, deepseek).attention == "mla"
    assert engine_target(b200, llama).attention == "mha"
    assert (engine_target(mi300x, llama).gpu_vendor, engine_target(b200, llama).gpu_generation) \
        == ("amd", "blackwell")


def test_eager_sglang_prefill_of_deepseek_on_b200_costs_its_launch_overhead():
    """The profile's device/model selectors reach the forecast: DeepSeek-V3 prefill on 8×B200
    under SGLang 0.5 runs eager (trtllm_mla), so its TTFT is above the same step graphed."""
    from perfcast.catalog.systems import load_system
    from perfcast.estimate.serving import estimate_serving
    from perfcast.specs.serving import ServingWorkload

    args = (load_model("deepseek-v3"), load_system("dgx-b200", num_gpus=8),
            Strategy(num_gpus=8, tp=8),
            ServingWorkload(mode="concurrency", concurrency=1, num_requests=4, input_len=1024,
                            output_len=16))
    eager = estimate_serving(*args, engine="sglang", engine_version="0.5.12", precision="fp8")
    graphed = estimate_serving(*args, engine="sglang", engine_version="0.5.12", precision="fp8",
                               engine_overrides={"mixed_step_graphs": True})
    assert eager.ttft.mean_s > 1.05 * graphed.ttft.mean_s
    assert eager.tpot.mean_s == pytest.approx(graphed.tpot.mean_s, rel=1e-9)


def test_the_kv_pool_is_split_from_the_memory_the_driver_reports():
    """Engines size their pool from the device total the driver reports (cudaMemGetInfo /
    torch.cuda.mem_get_info), 81,559 MiB on an "80 GB" H100, not the vendor's 80e9 bytes:
    TensorRT-LLM's 0.9 of the free memory gains 0.9 x 5.5 GB, ~11 more 5,500-token sequences
    of Llama-3.3-70B FP8 at TP2 (NIM's KV-bound c >= 100 rows, ~85 running by Little's law)."""
    from perfcast.catalog.gpus import load_gpu
    from perfcast.catalog.systems import load_system
    from perfcast.estimate.serving import serving_setup

    gpu = load_gpu("h100-sxm")
    assert gpu.usable_hbm_bytes == 81559 * 2**20 > gpu.hbm_capacity_bytes
    model, system = load_model("llama-3.1-70b"), load_system("dgx-h100", num_gpus=2)
    setup = serving_setup(model, system, Strategy(num_gpus=2, tp=2), engine="nim",
                          precision="fp8")
    assert setup.memory.capacity_bytes == gpu.usable_hbm_bytes
    vendor = serving_memory_paged(model, gpu.hbm_capacity_bytes, Strategy(num_gpus=2, tp=2),
                                  InferencePrecision(weights="fp8", activations="fp8",
                                                     kv_cache="fp8"),
                                  engine_config("nim", gpu.hbm_capacity_bytes))
    reported = setup.memory.max_concurrent_seqs(5500)
    assert reported - vendor.max_concurrent_seqs(5500) >= 10
    assert 85 <= reported <= 95
