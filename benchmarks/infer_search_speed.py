"""Print the speed of ``perfcast infer-search`` (issue 19 done-when numbers).

1. Bulk evaluation: every deployment of DeepSeek-V3 on 256 H200 (dgx-h200) with disaggregated
   pools allowed, 1k/1k tokens: the layouts priced through the serving step-cost physics plus
   the array screen of all aggregated and xPyD deployments. Prints
   ``deployments_per_s_per_core`` = deployments / CPU seconds of this process (numpy runs the
   element-wise work on one core), counting the layout pricing, not only the array pass; and
   the same for the 32-GPU case, whose space is too small to amortize the pricing.
2. The two done-when searches end to end (CPU and wall seconds): Llama-3.1-70B on 8 H100,
   1k/1k, TPOT ≤ 50 ms (≤ 5 s), and DeepSeek-V3 on 32 H200 with disaggregated pools (≤ 30 s),
   with their best deployments.

    python benchmarks/infer_search_speed.py
"""

from __future__ import annotations

import time

from perfcast.catalog.models import load_model
from perfcast.catalog.systems import load_system
from perfcast.serving_search import Targets, search_deployments
from perfcast.serving_search.bulk import screen_aggregated, screen_disaggregated
from perfcast.serving_search.run import layout_tables
from perfcast.serving_search.transfer import kv_transfer_s


def bulk_rate(model_name: str, system_name: str, num_gpus: int) -> tuple[int, float, float]:
    """(deployments, CPU s pricing layouts, CPU s of the array screen)."""
    model = load_model(model_name)
    system = load_system(system_name).with_num_gpus(num_gpus)
    cpu = time.process_time()
    tables = layout_tables(model, system, num_gpus, 1024, 1024, "vllm")
    priced = time.process_time() - cpu
    cpu = time.process_time()
    agg = screen_aggregated(tables, num_gpus, 1024)
    dis = screen_disaggregated(tables, num_gpus, 1024, lambda p, d: kv_transfer_s(
        model, system, p.layout, d.layout, 1024))
    return len(agg) + len(dis), priced, time.process_time() - cpu


def timed_search(label: str, model: str, system: str, gpus: int, disaggregated: bool) -> None:
    wall, cpu = time.perf_counter(), time.process_time()
    result = search_deployments(load_model(model), load_system(system), gpus, 1024, 1024,
                                targets=Targets(tpot_s=0.050), disaggregated=disaggregated)
    cpu_s, wall_s = time.process_time() - cpu, time.perf_counter() - wall
    print(f"{label}_cpu_s: {cpu_s:.2f}  {label}_wall_s: {wall_s:.2f}  "
          f"evaluated: {result.evaluated}  rescored: {len(result.rescored)}")
    modes = ("aggregated", "disaggregated") if disaggregated else ("aggregated",)
    for mode in modes:
        best = result.best_of(mode)
        if best is not None:
            print(f"  best {mode}: {best.deployment.label()}  "
                  f"{best.output_tokens_per_s_per_gpu:.0f} tok/s/GPU  TTFT {best.ttft_s:.3f} s  "
                  f"TPOT {best.tpot_s * 1e3:.1f} ms")


def main() -> None:
    load_model("deepseek-v3")  # catalog and imports warm
    for label, gpus in (("large", 256), ("done_when", 32)):
        n, priced_s, screen_s = bulk_rate("deepseek-v3", "dgx-h200", gpus)
        print(f"{label}: DeepSeek-V3 on {gpus} H200, disaggregated allowed: {n} deployments, "
              f"layout pricing {priced_s:.2f} CPU s, array screen {screen_s:.3f} CPU s, "
              f"array screen alone {n / max(screen_s, 1e-9):,.0f} deployments/s")
        if label == "large":
            print(f"deployments_per_s_per_core: {n / (priced_s + screen_s):.0f}")
        else:
            print(f"done_when_deployments_per_s_per_core: {n / (priced_s + screen_s):.0f}")
    timed_search("llama_70b_8xh100", "llama-3.1-70b", "dgx-h100", 8, False)
    timed_search("deepseek_v3_32xh200", "deepseek-v3", "dgx-h200", 32, True)


if __name__ == "__main__":
    main()
