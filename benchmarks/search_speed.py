"""Print the bulk evaluator's speed over a full strategy space.

Default: Llama-3.1-405B on 16,384 H100 (dgx-h100), sequence 8192, global batch 2048 (16M tokens
per step), next to the published Llama 3 layout (TP 8, PP 16, DP 128). ``--moe``: Mixtral 8x7B
on 64 H100, sequence 4096, global batch 256, whose space adds EP and expert TP, next to NeMo's
Mixtral layout (TP 1, EP 8, distributed optimizer; NeMo 25.02 performance summary).
``--dsv3``: DeepSeek-V3 on 1,024 H100 with ``perfcast search``'s defaults (sequence 4096, global
batch 512), next to its technical report's layout (PP 16, EP 64, DualPipe; arXiv:2412.19437
§3.2; the search ranks it as a 1F1B candidate). Prints strategies per second per core (numpy
runs element-wise work on one core) over the whole space scored block by block as the search
scores it (``search.block_score``: full-recompute blocks from each layout's fewest recomputed
layers that fit, ``search.recompute_fit``), the wall time and peak RSS of the whole search, and
the best strategy found next to the reference layout as forecast by perfcast. ``--no-bulk``
skips the single-process pass (the largest spaces take minutes per pass).

    python benchmarks/search_speed.py [--moe | --dsv3] [--jobs N] [--framework NAME] [--no-bulk]
                                      [--gpus N]

``--gpus N`` runs the case on N GPUs instead (its reference layout must divide them). The
space printed first is dropped before the search, so the peak RSS is the search's alone (the
script held it through the search before: ~1.6 GiB more for DeepSeek-V3 x 1,024, in the
parent and in every forked worker).

``--framework torchtitan`` searches the framework's larger schedule space (GPipe and ZB-V
beside 1F1B / interleaved, ranked in bulk by the work bound of ``schedule.pipeline``).

The whole search runs first, with ``--jobs`` processes (default: every core, as ``perfcast
search`` does for a space this large) and cold caches, as ``perfcast search`` runs it; its wall
time is the figure the 5 s target of issue 18 is about, printed with its CPU seconds (parent
and workers: the core-seconds a quiet 2-core machine would need). The single-process bulk
pass runs after it, so its warm memos (``memo.ArrayContentMemo``, the layer op graphs) do not
reach the forked workers.
"""

from __future__ import annotations

import resource
import sys
import time

from perfcast.catalog.models import load_model
from perfcast.catalog.systems import load_system
from perfcast.estimate.training import estimate_training
from perfcast.search.block_score import BlockScorer
from perfcast.search.bulk import BulkEvaluator
from perfcast.search.framework_rules import DEFAULT_SEARCH_FRAMEWORK
from perfcast.search.parallel import resolve_jobs
from perfcast.search.rank import Objective
from perfcast.search.run import DEFAULT_TOKEN_BUDGET, search_space, search_strategies
from perfcast.specs import Strategy, Workload

CASES = {
    "dense": ("llama-3.1-405b", 16384, Workload(seq_length=8192, global_batch_size=2048),
              "published TP8 PP16 DP128",
              dict(tp=8, pp=16, sequence_parallel=True, distributed_optimizer=True,
                   recompute="selective")),
    "moe": ("mixtral-8x7b", 64, Workload(seq_length=4096, global_batch_size=256),
            "NeMo TP1 EP8 DP64", dict(ep=8, micro_batch_size=2, distributed_optimizer=True)),
    "dsv3": ("deepseek-v3", 1024, Workload(seq_length=4096, global_batch_size=512),
             "report PP16 EP64 (1F1B)", dict(pp=16, ep=64, distributed_optimizer=True,
                                             recompute="selective")),
}


def main(case: str = "dense", jobs: int | None = None,
         framework: str = DEFAULT_SEARCH_FRAMEWORK, bulk: bool = True,
         gpus: int | None = None) -> None:
    name, num_gpus, workload, reference_name, reference = CASES[case]
    num_gpus = gpus or num_gpus
    model = load_model(name)
    system = load_system("dgx-h100", num_gpus=num_gpus)

    _, space = search_space(model, system, workload, num_gpus, framework=framework)
    print(f"strategies: {len(space)}  distinct (recompute / offload layer count once): "
          f"{space.distinct_without_recompute_layers}  recompute_layer_variants: "
          f"{space.recompute_layer_variants}  blocks: {len(space.blocks)}  "
          f"layer_keys: {len(space.layer_keys)}  invalid_layouts: {space.invalid}")
    jobs = resolve_jobs(jobs, len(space))
    count, distinct = len(space), space.distinct_without_recompute_layers
    del space  # the search builds its own: the peak RSS below is the search's alone
    start, cpu = time.perf_counter(), time.process_time()
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = search_strategies(model, system, workload, num_gpus, top=1, jobs=jobs,
                               framework=framework)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    workers_cpu_s = (after.ru_utime + after.ru_stime) - (children.ru_utime + children.ru_stime)
    wall_s = time.perf_counter() - start
    rss_gib = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                  after.ru_maxrss) / 2**20  # KiB on Linux; largest of this process and a worker
    parent_cpu_s = time.process_time() - cpu
    print(f"search_wall_s: {wall_s:.2f}  jobs: {jobs}  "
          f"search_cpu_s: {parent_cpu_s:.2f} (parent) + {workers_cpu_s:.2f} (workers) = "
          f"{parent_cpu_s + workers_cpu_s:.2f}  peak_rss_GiB: {rss_gib:.2f}  "
          f"(evaluated {result.evaluated}, timed {result.timed}, "
          f"memory_probed {result.memory_probed}, feasible {result.feasible})")
    print(f"search_strategies_per_s_per_core: "
          f"{result.evaluated / (parent_cpu_s + workers_cpu_s):.0f}")

    if bulk:
        _, space = search_space(model, system, workload, num_gpus, framework=framework)
        evaluator = BulkEvaluator.for_space(model, system, workload, space)
        scorer = BlockScorer(evaluator, Objective.THROUGHPUT, num_gpus, DEFAULT_TOKEN_BUDGET,
                             0.0, 1)
        start, cpu = time.perf_counter(), time.process_time()
        summaries = [scorer(i, block) for i, block in enumerate(space.blocks)]
        bulk_s, bulk_cpu_s = time.perf_counter() - start, time.process_time() - cpu
        timed = sum(getattr(s, "timed", 0) for s in summaries)  # 0: before issue 18
        probed = sum(getattr(s, "memory_probed", 0) for s in summaries)
        print(f"bulk_score_s: {bulk_s:.3f}  bulk_score_cpu_s: {bulk_cpu_s:.3f}  timed: {timed}  "
              f"memory_probed: {probed}")
        # numpy runs this element-wise work on one core: CPU seconds of this process =
        # core-seconds (wall seconds overstate it on a shared machine).
        print(f"strategies_per_s_per_core: {count / bulk_cpu_s:.0f}")
        print(f"distinct_strategies_per_s_per_core: "
              f"{distinct / bulk_cpu_s:.0f}  "
              f"(recompute and offload layer counts counted once)")

    published = Strategy(num_gpus=num_gpus, **reference)
    rows = [(reference_name, estimate_training(model, system, published, workload)),
            ("best found", result.best[0].report)]
    print(f"{'layout':28} {'tok/s/GPU':>10} {'MFU':>6} {'step s':>8} {'GiB':>6} fits  strategy")
    for name, r in rows:
        s = r.strategy
        print(f"{name:28} {r.tokens_per_s_per_gpu:10.1f} {r.mfu:6.3f} {r.step_time_s:8.3f} "
              f"{r.memory.peak_bytes / 2**30:6.1f} {str(r.memory.fits):5} tp={s.tp} pp={s.pp} "
              f"vpp={s.vpp} cp={s.cp} dp={s.dp} ep={s.ep} etp={s.expert_tp} "
              f"mbs={s.micro_batch_size} "
              f"recompute={s.recompute} precision={s.precision}")


if __name__ == "__main__":
    args = sys.argv[1:]
    main("moe" if "--moe" in args else "dsv3" if "--dsv3" in args else "dense",
         int(args[args.index("--jobs") + 1]) if "--jobs" in args else None,
         args[args.index("--framework") + 1] if "--framework" in args
         else DEFAULT_SEARCH_FRAMEWORK, "--no-bulk" not in args,
         int(args[args.index("--gpus") + 1]) if "--gpus" in args else None)
