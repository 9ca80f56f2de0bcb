"""Serving rows of ../shared/ground_truth/inference.csv (fixed concurrency, request rate,
offline) against the engine simulation.

No constant of the serving path is fitted on these rows (engine defaults come from the engine
sources, step costs from the static-batch calibration), so in-sample and leave-one-source-out
figures agree within 0.1 point (the calibration refit per fold moves step costs only). Bounds sit
a margin above the measured error on 272 rows (2026-11-24, branch srv17, CV / in-sample):
TTFT 47.4% (80 rows; 70.1% before the NIM and ATOM profiles), TPOT 25.8% (96; 26.7%),
throughput 62.2% (93; 61.4-63.6%) MAPE; after the moe16/inf21 merge and refit (branch srv17b,
CV = in-sample): TTFT 46.2%, TPOT 26.0%, throughput 62.3%. The NIM rows ran on vLLM defaults with a 16-bit KV
cache before: 38 sequences of 5.5k tokens fit on 2xH100 where the measured throughput needs
~86; NIM's FP8 checkpoints carry an FP8 KV cache (nim.yaml). The ATOM rows ran on vLLM's mixed
chunked scheduler; ATOM's nano-vllm-style prefill-first whole-prompt scheduler (atom.yaml)
takes its Qwen3-235B TTFT from 54% to 11% (TPOT 10.7% -> 15.9%: the prefill pauses now in
TPOT expose a decode step costed ~15% low). The early-2025 DeepSeek-R1 rows (dstack: SGLang
0.4.3, vLLM 0.7, TensorRT-LLM 0.17) hold most of the throughput error (270% on 15 rows): their
3-5x slower MLA/MoE kernels are not modelled. Branch srv17c (CV = in-sample, after refit):
TTFT 44.7%, TPOT 25.5%, throughput 60.5% -- the busiest EP rank's expert count in MoE decode
(InferenceX TPOT 18.5 -> 17.4%, throughput 23.2 -> 21.0%), 'BF16 weights; FP8 KV cache' read
as BF16 weights (vLLM FP8-KV blog TPOT 38.0 -> 34.4%, throughput 56.0 -> 47.5%), vLLM V0 chunked
prefill and multi-step scheduling as the dstack 405B rows state them (TTFT 59.3 -> 39.8%, TPOT
36.4 -> 39.4%, throughput 43.3 -> 49.3%: the engines now run the stated scheduler; what is left
is the saturated V0 step cost); MXFP4 weights beside BF16 activations dequantize like int4
weight-only (gpt-oss-20b on H100: vLLM blog TPOT 34.4 -> 19.4%, throughput 47.5 -> 21.9%):
TTFT 44.7%, TPOT 24.7%, throughput 59.1%; TensorRT-LLM before 1.0 without decode CUDA graphs
and SGLang 0.4's 8192-token chunk and 160 graphed batch (dstack DeepSeek-R1 rows) and a refit:
TTFT 44.8%, TPOT 24.6%, throughput 57.5% (38.9% / 16.3% / 19.8% without the 15 early-2025
DeepSeek-R1 configurations). Branch srv17d (no refit; CV = in-sample): prefill/mixed-step graph
coverage read from the released SGLang wheels (piecewise prefill graphs on by default only from
0.5.10, off on ROCm, with DP attention and for DeepSeek-V3-class MLA on SM100, MLA steps above
2048 tokens eager) and vLLM's 512-token capture cap: TTFT 44.8 -> 44.1%, TPOT 24.5 -> 24.4%,
throughput 55.9 -> 55.6% (static/batch-1 CV 14.63 -> 14.57%). Branch serve17 (no refit; CV =
in-sample): NIM's prebuilt TensorRT engines run without the PyTorch executor's overlap
scheduler (nim.yaml), so a closed-loop request joins the batch formed when the next step
starts, one step ahead instead of two: TTFT 44.2 -> 42.5%, TPOT 24.4 -> 24.3%, throughput 55.7
-> 55.7% (static/batch-1 unchanged). Branch dstack17 (no refit; CV
= in-sample), two mechanisms of the early-2025 releases read from their PyPI wheels: vLLM
through 0.8.0 and SGLang before 0.4.4 switch their custom all-reduce off on AMD GPUs (RCCL
all-reduce, ~40 us a call: dstack DeepSeek-R1 MI300X rows, dstack 405B MI300X rows), and the
Triton MLA decode kernel of vLLM V0 / SGLang 0.4 reads the latent once per 16 query heads
(8 reads under SGLang 0.4.3's DP attention): TTFT 44.2 -> 43.7%, TPOT 24.4 -> 23.9%,
throughput 56.7 -> 51.1% (without the 15 DeepSeek-R1 configurations 38.0/16.2/19.5 ->
37.5/16.2/19.4%); static/batch-1 CV 14.57% unchanged. Branch ttft17 (no refit; CV = in-sample):
rows whose notes say the statistic is not stated (NIM) take the steady-state mean, the c prompts
sent at t = 0 left out (``serving_rows.statistic_unstated``: the start-up burst's floor under a
mean over all requests exceeds the published TTFT): concurrency CV TTFT 42.05 -> 39.79% (65 rows
without the DeepSeek-R1 configurations 35.43 -> 32.65%), TPOT 23.84 and throughput 51.08%
unchanged; NIM TTFT in-sample 43.3 -> 17.5% on its 7 concurrency rows (bounds tightened: overall
TTFT 0.43 -> 0.41, NIM TTFT 0.45 -> 0.19); static/batch-1 CV 14.57% unchanged.
37.5/16.2/19.4%); static/batch-1 CV 14.57% unchanged. Branch mla17 (no refit; CV = in-sample):
vLLM <= 0.7.3 decodes MLA with the absorbed W_UQ.W_UK / W_UV.W_O matrices (74 MB a layer at 16
heads a GPU instead of 21.5 MB) and SGLang 0.4.3-0.4.4 gather the attention-DP ranks' tokens
with an NCCL all-gather before every MLP: TTFT 42.05 -> 42.01%, TPOT 23.84 -> 23.68%, throughput
51.08 -> 49.10%; static/batch-1 unchanged.
"""

from __future__ import annotations

import csv
from functools import cache

import pytest

from perfcast.validate.inference_compare import validate_inference

from conftest import shared_path

METRIC_GROUPS = {"ttft": "ttft", "tpot": "tpot", "itl": "tpot",
                 "output_throughput_per_gpu": "throughput", "output_throughput_total": "throughput",
                 "request_throughput": "throughput"}
MAPE_BOUNDS = {"ttft": 0.365, "tpot": 0.158, "throughput": 0.305}
"""Concurrency/request-rate rows, MAPE per metric (in-sample; see the module docstring)."""

SOURCE_BOUNDS = {
    ("ttft", "nim-llm-benchmarking-docs-performance-page"): 0.14,
    ("tpot", "nim-llm-benchmarking-docs-performance-page"): 0.07,
    ("throughput", "nim-llm-benchmarking-docs-performance-page"): 0.05,
    ("ttft", "semianalysis-inferencex"): 0.44,
    ("tpot", "semianalysis-inferencex"): 0.095,
    ("throughput", "semianalysis-inferencex"): 0.1,
    ("tpot", "semianalysis-inferencex-blog-b200-nvfp4-vs"): 0.05,
    ("throughput", "semianalysis-inferencex-blog-b200-nvfp4-vs"): 0.055,
    ("ttft", "amd-rocm-atom-recipe-qwen3-235b-a22b-usage"): 0.105,
    ("tpot", "amd-rocm-atom-recipe-qwen3-235b-a22b-usage"): 0.08,
    ("throughput", "amd-rocm-atom-recipe-qwen3-235b-a22b-usage"): 0.07,
    ("ttft", "vllm-blog-the-state-of-fp8"): 0.22,
    ("tpot", "vllm-blog-the-state-of-fp8"): 0.17,
    ("throughput", "vllm-blog-the-state-of-fp8"): 0.19,
    ("throughput", "tensorrt-llm-blog-how-to-get-best"): 0.13,
    ("ttft", "dstack-benchmarks-llama-3--1-405b-fp8-on"): 0.20,
    ("tpot", "dstack-benchmarks-llama-3--1-405b-fp8-on"): 0.39,
    ("throughput", "dstack-benchmarks-llama-3--1-405b-fp8-on"): 0.50,
    ("ttft", "dstack-benchmarks-deepseek-r1-on-8xh200-vs"): 0.635,
    ("tpot", "dstack-benchmarks-deepseek-r1-on-8xh200-vs"): 0.476,
    ("throughput", "dstack-benchmarks-deepseek-r1-on-8xh200-vs"): 1.325,
}
"""Concurrency/request-rate rows, MAPE per (metric, source): measured 2026-11-24 (branch srv17)
NIM 62.8/8.8/5.4%, InferenceX 47.5/18.8/23.8%, InferenceX blog -/7.9/11.7%, ATOM recipe
11.3/15.9/18.7%, vLLM FP8-KV blog 25.6/38.0/56.0%, TensorRT-LLM blog throughput 24.4%; after the
moe16/inf21 merge and refit (branch srv17b): NIM 62.9/8.8/5.4%, InferenceX 46.3/18.5/23.2%,
InferenceX blog -/9.8/13.6%, ATOM recipe 9.9/15.7/18.2%, vLLM FP8-KV blog 25.5/38.0/56.0%,
TensorRT-LLM blog throughput 26.2% (bounds tightened: TTFT 0.51 -> 0.49 overall and InferenceX,
NIM 0.70 -> 0.66, ATOM 0.14 -> 0.13). Branch srv17c (after refit): InferenceX 46.2/17.4/21.0%,
ATOM recipe 10.0/15.2/17.5%, vLLM FP8-KV blog 21.3/34.4/47.5%, dstack 405B 39.8/39.4/49.3%
(bounds tightened: overall 0.49/0.28/0.64 -> 0.47/0.27/0.62, InferenceX TPOT 0.21 -> 0.19 and
throughput 0.26 -> 0.23, ATOM 0.13/0.18/0.21 -> 0.12/0.17/0.19, vLLM blog 0.29/0.41/0.59 ->
0.23/0.37/0.50; dstack 405B bounds new). MXFP4 W4A16 dequant: vLLM blog 20.8/19.4/21.9%
(bounds 0.22/0.21/0.24; overall TPOT 0.26, throughput 0.61). After the TensorRT-LLM 0.17 and
SGLang 0.4 profile entries and a refit: overall bounds 0.46/0.25/0.59; dstack DeepSeek-R1
70.3/69.0/253.2% (bounds new, 0.72/0.71/2.6: their 3-5x slower early-2025 kernels are not
modelled). Branch srv17d: InferenceX 44.8/17.1/20.3% (bounds 0.49/0.19/0.23 ->
0.46/0.18/0.22; overall 0.46/0.25/0.59 -> 0.45/0.25/0.58). Branch serve17 (NIM without the
overlap scheduler): NIM 62.3/9.0/5.3% -> 43.3/8.3/5.3% (bounds 0.66/0.12 -> 0.45/0.09; overall
TTFT 0.45 -> 0.43). Branch dstack17 (RCCL all-reduce of
vLLM <= 0.8.0 / SGLang < 0.4.4 on AMD GPUs, Triton MLA decode reads per 16 heads): dstack
DeepSeek-R1 70.7/68.7/250.0 -> 70.7/65.6/215.8%, dstack 405B 39.8/39.2/49.2 -> 32.4/39.2/47.7%
(bounds tightened: overall TPOT 0.25 -> 0.245, throughput 0.58 -> 0.53; DeepSeek-R1 TPOT
0.71 -> 0.67, throughput 2.6 -> 2.2; 405B TTFT 0.43 -> 0.34, throughput 0.52 -> 0.49). Branch
mla17 (absorbed MLA projections of vLLM <= 0.7.3, SGLang 0.4.3-0.4.4 DP-attention NCCL
all-gather): dstack DeepSeek-R1 70.7/65.6/215.8 -> 70.5/64.5/203.5% (bounds tightened: overall
TPOT 0.245 -> 0.24, throughput 0.53 -> 0.50; DeepSeek-R1 0.72/0.67/2.2 -> 0.71/0.655/2.08).
Branch tpot17 (device time per kernel boundary of graphed decode steps, calibration/
graph_replay.yaml: NVIDIA 1.0 us, AMD 2.5 us), TTFT/TPOT/throughput before -> after: NIM
17.5/8.3/5.3 -> 18.1/6.6/4.8%, InferenceX 44.8/17.1/20.3 -> 42.6/8.3/9.2%, InferenceX blog
-/9.7/13.3 -> -/3.9/4.8%, ATOM recipe 10.1/15.2/17.5 -> 10.1/6.7/5.4%, vLLM FP8-KV blog
20.6/19.4/21.9 -> 20.5/16.1/17.8%, TensorRT-LLM blog throughput 26.3 -> 25.4%, dstack 405B
32.4/39.2/47.7 -> 36.2/37.9/47.0%, dstack DeepSeek-R1 70.5/64.5/203.5 -> 70.5/61.0/178.9%.
Bounds tightened where the numbers improved; one moved the wrong way and is loosened, stated:
dstack 405B TTFT 0.34 -> 0.37 (its saturated request-rate rows queue behind the now slower
decode steps: 32.4 -> 36.2%).
Branch gapcal17 (the gap fitted by ``perfcast calibrate``, NVIDIA 1.0 -> 1.146 us, AMD 2.5 ->
2.30 us), in-sample TTFT/TPOT/throughput 37.19/17.56/37.71 -> 37.20/17.41/37.46%; ATOM
-/7.65/6.56 -> -/6.85/6.03%, InferenceX blog -/4.28/4.69 -> -/3.88/3.75%, InferenceX
42.29/8.50/9.23 -> 42.31/8.61/9.42%, vLLM FP8 blog 20.53/16.10/17.82 -> 20.51/15.62/17.24%
(bounds unchanged; the out-of-sample figures, with the gap refitted per fold, are in
tests/test_inference_validation.py).
Branch ttft17b (KV pool and device tier from the driver-reported memory, ``usable_hbm_bytes``):
NIM 17.5/8.3/5.3 -> 13.5/6.7/4.2% (its c >= 100 rows are KV-bound: ~85 sequences run by Little's
law, 80 -> 91 forecast), overall TTFT 39.75 -> 39.39%; bounds tightened (overall TTFT 0.43 ->
0.40, NIM 0.19/0.09/0.08 -> 0.14/0.07/0.05). The InferenceX-blog TPOT bound moves UP 0.10 ->
0.101 (measured 9.68 -> 10.02%): its Kimi-K2.5 NVFP4 TP4 c = 64 configuration now holds 57 of
its 9,216-token sequences instead of 40 (measured output throughput x TPOT: ~53 in flight), and
the decode step at that batch is 12.8% slow (row 704, +7.4 -> +12.8%; decode step cost, not
admission). Then the busiest EP rank's share of the routed tokens under a learned router
(``graph.stage.moe_load_imbalance``, calibration/moe_routing.yaml 1.563, measured on
Qwen3-235B at EP 8; the value training uses) in every serving step with EP > 1: in-sample
TTFT/TPOT/throughput 39.39/23.62/49.04 -> 39.08/23.37/47.48%; ATOM 10.1/15.2/17.6 ->
10.0/13.4/13.7%, TensorRT-LLM blog throughput 26.3 -> 12.7%, InferenceX 44.8/17.1/20.3 ->
44.5/17.1/20.1%, dstack DeepSeek-R1 70.5/64.5/203.5 -> 69.7/64.5/202.7%; bounds tightened
(overall 0.40/0.24/0.50 -> 0.395/0.235/0.48; ATOM 0.12/0.17/0.19 -> 0.105/0.14/0.14;
TensorRT-LLM blog 0.27 -> 0.13; InferenceX TTFT 0.46 -> 0.45, throughput 0.22 -> 0.21;
DeepSeek-R1 TTFT 0.71 -> 0.70, throughput 2.08 -> 2.05).
Both merged (lead, 2026-11-24), in-sample TTFT/TPOT/throughput 38.3/17.6/37.6%; ATOM
10.0/7.7/6.6%, dstack 405B 36.2/37.9/47.0%. Bounds are the tighter of the two branches except ATOM
TPOT 0.08 / throughput 0.07 (each branch alone was below; still far under the session's start
0.17 / 0.19). The dstack 405B TTFT moved 32.4 -> 36.2% on one row (793, MI300X, saturated at 16
req/s) that turned out to be seed noise: one Poisson draw of 1,000 requests gives a mean TTFT
from 0.5 to 2.6 s on row 787 depending on the seed. Request-rate forecasts now average 8 arrival
draws (``ServingWorkload.arrival_draws``, the expected statistic of one run): dstack 405B
TTFT/TPOT/throughput 18.6/36.5/49.2% (the same method without the kernel-boundary gap:
18.6/36.9/49.5%, so the gap improves all three). Bounds: TTFT 0.34 -> 0.20, overall TTFT 0.395 ->
0.385; the throughput bound 0.49 (session start; 0.48 after tpot17) -> 0.50: the single draw's
47.0% was seed luck, the expected error of the session-start code is 49.5% (stated).
Branch dsr1_17 (host-bound eager steps, ``EngineConfig.eager_launch``: TensorRT-LLM 0.17's
graph-less DeepSeek-R1 decode takes at least ~1,400 ops x 10 us): concurrency TTFT/TPOT/
throughput 37.2/17.56/37.7 -> 37.2/17.51/36.8%, dstack DeepSeek-R1 69.7/61.0/178.1 ->
69.7/60.6/172.3% (5 rows changed, CV the same); bounds tpot 0.19 -> 0.18, throughput 0.39 ->
0.375, dstack DeepSeek-R1 tpot 0.62 -> 0.61, throughput 1.8 -> 1.74.
Branch dsr17 (block-FP8 kernel class, ``EngineConfig.fp8_block_kernels``: SGLang before 0.4.7 and
vLLM on ROCm ran the DeepSeek-R1 block-FP8 linears through Triton w8a8_block_fp8_matmul and the
routed experts through Triton fused_moe; AMD's AITER blog's 2x / 3x,
calibration/fp8_block_kernels.yaml; refit): concurrency TTFT/TPOT/throughput
37.2/17.36/36.53 -> 35.90/15.24/30.02%; dstack DeepSeek-R1 69.71/60.67/172.16 ->
62.77/47.13/131.83% (the 18 MI300X rows; the H200 rows unchanged); bounds tightened ttft 0.385
-> 0.365, tpot 0.18 -> 0.158, throughput 0.375 -> 0.305, dstack DeepSeek-R1 0.7/0.61/1.74 ->
0.635/0.476/1.325."""

SKIP_REASONS = ("disaggregated", "prefill-only", "speculative", "production-traffic",
                "does not fit", "no catalog system", "not in the catalog")


@cache
def _validation():
    path = shared_path("ground_truth", "inference.csv")
    with path.open(newline="", encoding="utf-8") as handle:
        batching = {row["row_id"]: row["batching"] for row in csv.DictReader(handle)}
    return validate_inference(path), batching


def _concurrency_rows():
    report, batching = _validation()
    return [r for r in report.rows if batching[r.row_id].startswith("continuous")]


@pytest.mark.parametrize("group, bound", sorted(MAPE_BOUNDS.items()))
def test_concurrency_rows_mape_per_metric(group, bound):
    rows = [r for r in _concurrency_rows() if METRIC_GROUPS.get(r.metric) == group]
    assert len(rows) >= 60
    mape = sum(abs(r.error) for r in rows) / len(rows)
    assert mape <= bound, f"{group}: MAPE {mape:.3f} over {len(rows)} rows"


@pytest.mark.parametrize("group, source", sorted(SOURCE_BOUNDS))
def test_concurrency_rows_mape_per_metric_and_source(group, source):
    rows = [r for r in _concurrency_rows()
            if METRIC_GROUPS.get(r.metric) == group and r.source_id == source]
    assert len(rows) >= 5
    mape = sum(abs(r.error) for r in rows) / len(rows)
    assert mape <= SOURCE_BOUNDS[(group, source)], f"{group} {source}: MAPE {mape:.3f}"


def test_concurrency_rows_are_forecast_by_an_engine_profile():
    rows = _concurrency_rows()
    assert len(rows) >= 265
    assert {r.engine for r in rows} == {"vllm", "sglang", "tensorrt-llm", "nim", "atom"}


def test_every_serving_skip_names_a_known_reason():
    report, batching = _validation()
    serving = [s for s in report.skipped if batching[s.row_id].startswith(("continuous", "offline"))]
    for skipped in serving:
        assert any(reason in skipped.reason for reason in SKIP_REASONS), skipped


def test_units_are_respected():
    """e2e latency in seconds (Argonne) and in ms (TensorRT-LLM blog) both land near 1x."""
    report, _ = _validation()
    e2e = [r for r in report.rows if r.metric == "e2e_latency" and r.engine]
    assert {r.unit for r in e2e} >= {"s", "ms"}
    assert all(0.2 < r.predicted / r.measured < 5 for r in e2e)


def test_length_spread_in_the_notes_is_sampled_around_the_nominal():
    """'~20k input / ~2k output tokens (+-15% variance)': uniform in [0.85 L, 1.15 L]."""
    from perfcast.validate.inference_rows import parse_inference_row

    row = {"row_id": "1", "source": "s", "model": "Llama-3.1-8B", "gpu_type": "H100 SXM",
           "gpu_count": "1", "tp": "1", "pp": "", "ep": "", "precision": "BF16",
           "framework": "vLLM v0.19.1", "batching": "continuous (fixed concurrency 8)",
           "batch_size_or_concurrency": "8", "input_len": "20000", "output_len": "2000",
           "metric": "ttft", "value": "700", "unit": "ms",
           "notes": "150 requests at concurrency 8, ~20k input / ~2k output tokens (+-15% variance)"}
    w = parse_inference_row(row).workload
    assert (w.input_len, w.output_len) == (23000, 2300)
    assert w.length_range_ratio * w.input_len == pytest.approx(17000)


@pytest.mark.parametrize("row_id", ["855", "742"])
def test_lengths_stated_fixed_stay_fixed(row_id):
    """The NIM rows ('synthetic prompts of fixed token counts', AIPerf) and the dstack rows
    ('random-range-ratio 1') state fixed lengths: no length spread is simulated for them, even
    though a spread would desynchronise the closed-loop clients (NIM TTFT at 5 clients 978 ms
    -> 436 ms with lengths uniform in [0.8 L, L], measured 547 ms; not what the rows state)."""
    from perfcast.validate.inference_rows import parse_inference_row

    with shared_path("ground_truth", "inference.csv").open(newline="", encoding="utf-8") as handle:
        row = next(r for r in csv.DictReader(handle) if r["row_id"] == row_id)
    assert parse_inference_row(row).workload.length_range_ratio == 1.0
