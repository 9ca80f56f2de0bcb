"""Print the warm time of one ``estimate_training`` call (target: <= 1 ms, issue 18).

Llama-3.1-405B on 16,384 H100s: TP 8, PP 16, VPP 1, CP 1, DP 128, 8K sequence, GBS 2048;
with ``--moe``, DeepSeek-V3 on 1,024 H100s: TP 2, PP 8, EP 64, 4K sequence, GBS 1024.

    python benchmarks/estimate_speed.py [--moe] [--kernel-backend=NAME]   (default: the estimator's)
"""

from __future__ import annotations

import statistics
import sys
import time

from perfcast.catalog.models import load_model
from perfcast.catalog.systems import load_system
from perfcast.estimate.training import estimate_training
from perfcast.kernels.backend import DEFAULT_KERNEL_BACKEND
from perfcast.specs import Strategy, Workload


def main(kernel_backend: str, moe: bool = False, repeats: int = 50) -> None:
    if moe:
        model = load_model("deepseek-v3")
        system = load_system("dgx-h100", num_gpus=1024)
        strategy = Strategy(num_gpus=1024, tp=2, pp=8, ep=64, sequence_parallel=True,
                            distributed_optimizer=True)
        workload = Workload(seq_length=4096, global_batch_size=1024)
    else:
        model = load_model("llama-3.1-405b")
        system = load_system("dgx-h100", num_gpus=16384)
        strategy = Strategy(num_gpus=16384, tp=8, pp=16, sequence_parallel=True,
                            recompute="selective", distributed_optimizer=True)
        workload = Workload(seq_length=8192, global_batch_size=2048)
    print(f"model: {model.name}")
    start = time.perf_counter()
    estimate_training(model, system, strategy, workload, kernel_backend=kernel_backend)
    print(f"kernel_backend: {kernel_backend}  first_call_ms: {(time.perf_counter() - start) * 1e3:.1f}")
    timings = []
    for _ in range(repeats):
        start = time.perf_counter()
        report = estimate_training(model, system, strategy, workload, kernel_backend=kernel_backend)
        timings.append(time.perf_counter() - start)
    print(f"estimate_training_ms_median: {statistics.median(timings) * 1e3:.2f}")
    print(f"estimate_training_ms_min: {min(timings) * 1e3:.2f}")
    print(f"tokens_per_s_per_gpu: {report.tokens_per_s_per_gpu:.0f}  mfu: {report.mfu:.3f}")


if __name__ == "__main__":
    names = [a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("--kernel-backend=")]
    main(names[-1] if names else DEFAULT_KERNEL_BACKEND.value, moe="--moe" in sys.argv[1:])
