"""Simulated requests per second of the serving simulation (issue 17 target: a 10,000-request
run in ≤ 1 s, ≥ 100k simulated requests/s of the scheduler loop on one core).

    python benchmarks/serving_sim_speed.py
"""

from __future__ import annotations

import time

from perfcast.catalog.models import load_model
from perfcast.catalog.serving_engines import engine_config
from perfcast.catalog.systems import load_system
from perfcast.estimate.serving import estimate_serving
from perfcast.specs.serving import ServingWorkload
from perfcast.specs.strategy import Strategy

CASES = (("llama-3.1-70b", 8, "vllm", 64), ("llama-3.1-70b", 8, "sglang", 256),
         ("llama-3.1-8b", 1, "tensorrt-llm", 32), ("deepseek-v3", 8, "vllm", 128))


def main() -> None:
    for model, tp, engine, concurrency in CASES:
        spec, system = load_model(model), load_system("dgx-h200", num_gpus=tp)
        workload = ServingWorkload(mode="concurrency", concurrency=concurrency,
                                   num_requests=10_000, input_len=1024, output_len=1024,
                                   length_range_ratio=0.8)
        engine_config(engine, system.gpu.hbm_capacity_bytes)
        start = time.perf_counter()
        report = estimate_serving(spec, system, Strategy(num_gpus=tp, tp=tp), workload,
                                  engine=engine, precision="fp8" if model == "deepseek-v3" else "bf16")
        seconds = time.perf_counter() - start
        print(f"{model:16s} tp{tp} {engine:13s} c={concurrency:4d}: 10,000 requests, "
              f"{report.num_steps:,} engine steps in {seconds:.3f} s "
              f"({10_000 / seconds:,.0f} requests/s)")


if __name__ == "__main__":
    main()
