"""Print the bulk evaluator's speed over the full Llama-3.1-405B / 16,384-H100 strategy space.

dgx-h100, sequence 8192, global batch 2048 (16M tokens per step). Prints strategies per second
per core (numpy runs element-wise work on one core), the wall time of the whole search, and
the best strategy found next to the published Llama 3 layout (TP 8, PP 16, DP 128) as
forecast by perfcast.

    python benchmarks/search_speed.py
"""

from __future__ import annotations

import time

from perfcast.catalog.models import load_model
from perfcast.catalog.systems import load_system
from perfcast.estimate.training import estimate_training
from perfcast.search.bulk import BulkEvaluator
from perfcast.search.enumerate import enumerate_strategies
from perfcast.search.run import search_strategies
from perfcast.specs import Strategy, Workload

NUM_GPUS = 16384


def main() -> None:
    model = load_model("llama-3.1-405b")
    system = load_system("dgx-h100", num_gpus=NUM_GPUS)
    workload = Workload(seq_length=8192, global_batch_size=2048)

    space = enumerate_strategies(model, system, NUM_GPUS, workload)
    evaluator = BulkEvaluator.for_space(model, system, workload, space)
    start = time.perf_counter()
    evaluator.evaluate_all(space)
    bulk_s = time.perf_counter() - start
    print(f"strategies: {len(space)}  blocks: {len(space.blocks)}  "
          f"layer_keys: {len(space.layer_keys)}  invalid_layouts: {space.invalid}")
    print(f"bulk_evaluate_s: {bulk_s:.3f}")
    print(f"strategies_per_s_per_core: {len(space) / bulk_s:.0f}")

    start = time.perf_counter()
    result = search_strategies(model, system, workload, NUM_GPUS, top=1)
    print(f"search_wall_s: {time.perf_counter() - start:.2f}  "
          f"(evaluated {result.evaluated}, feasible {result.feasible})")

    published = Strategy(num_gpus=NUM_GPUS, tp=8, pp=16, sequence_parallel=True,
                         distributed_optimizer=True, recompute="selective")
    rows = [("published TP8 PP16 DP128", estimate_training(model, system, published, workload)),
            ("best found", result.best[0].report)]
    print(f"{'layout':28} {'tok/s/GPU':>10} {'MFU':>6} {'step s':>8} {'GiB':>6} fits  strategy")
    for name, r in rows:
        s = r.strategy
        print(f"{name:28} {r.tokens_per_s_per_gpu:10.1f} {r.mfu:6.3f} {r.step_time_s:8.3f} "
              f"{r.memory.peak_bytes / 2**30:6.1f} {str(r.memory.fits):5} tp={s.tp} pp={s.pp} "
              f"vpp={s.vpp} cp={s.cp} dp={s.dp} mbs={s.micro_batch_size} "
              f"recompute={s.recompute} precision={s.precision}")


if __name__ == "__main__":
    main()
