"""Forecast DeepSeek-V3's published pre-training configuration (not a fit; prints numbers).

DeepSeek-V3 technical report (arXiv 2412.19437): 2,048 H800 (§3.1), PP 16 with DualPipe, EP 64
over 8 nodes, ZeRO-1 DP, no TP (§3.2), FP8 mixed precision with 1x128 / 128x128 block scaling
(§3.3), MTP depth 1 (§2.2), RMSNorm and MLA up-projection recomputed and the MoE SwiGLU output
recomputed (§3.2.3, §3.3.2) with the SwiGLU inputs cached in FP8 (§3.3.2), AdamW moments in
BF16 with FP32 master weights and gradients (§3.3.3), DeepEP-style node-limited dispatch
(§3.2.2), sequence 4,096 and a final batch of 15,360 sequences (§4.2). The report's
180K H800 GPU-hours per trillion tokens is 1e12 / (180e3 * 3600) = 1,543 tokens/s/GPU
(training.csv row 76). The per-stage layer split is not published: the default split and a
3 / 2 first/last split (the DualPipe device holding both ends also holds the embedding, the
head and the MTP module) are both printed.

    python tools/deepseek_v3_published.py
"""

from __future__ import annotations

from perfcast.catalog.models import load_model
from perfcast.catalog.systems import load_system
from perfcast.estimate.training import estimate_training
from perfcast.specs.strategy import Strategy
from perfcast.specs.workload import Workload
from perfcast.units import GiB

PUBLISHED_TOKENS_PER_S_PER_GPU = 1e12 / (180e3 * 3600)


def published_strategy(**layout) -> Strategy:
    return Strategy(
        num_gpus=2048, pp=16, ep=64, pipeline_schedule="dualpipe", precision="fp8",
        fp8_recipe="blockwise", fp8_moe_act_inputs=True, distributed_optimizer=True, mtp_num_layers=1,
        recompute="selective", recompute_modules=("layernorm", "mla_up_proj", "moe_act"),
        precision_aware_optimizer=True, store_param_remainders=False, exp_avg_dtype="bf16",
        exp_avg_sq_dtype="bf16",
        moe_token_dispatcher="deepep", **layout)


def main() -> None:
    model = load_model("deepseek-v3")
    system = load_system("hgx-h800", num_gpus=2048)
    workload = Workload(seq_length=4096, global_batch_size=15360)
    for name, layout in (("default split", {}),
                         ("first 3 / last 2 layers", {"num_layers_in_first_pipeline_stage": 3,
                                                      "num_layers_in_last_pipeline_stage": 2})):
        report = estimate_training(model, system, published_strategy(**layout), workload)
        error = report.tokens_per_s_per_gpu / PUBLISHED_TOKENS_PER_S_PER_GPU - 1
        print(f"{name}: {report.tokens_per_s_per_gpu:,.0f} tokens/s/GPU ({error:+.1%} vs "
              f"{PUBLISHED_TOKENS_PER_S_PER_GPU:,.0f}); peak {report.memory.peak_bytes / GiB:.2f} "
              f"GiB of {report.memory.capacity_bytes / GiB:.2f} GiB "
              f"({'fits' if report.memory.fits else 'does not fit'})")


if __name__ == "__main__":
    main()
