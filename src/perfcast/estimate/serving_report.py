"""Typed, immutable report of a simulated serving run, and the statistics of its requests.

Definitions follow vLLM ``benchmarks/benchmark_serving.py`` (and SGLang ``bench_serving``):
TTFT = first token − arrival; TPOT = (e2e − TTFT)/(output − 1) per request (requests of one
output token excluded); ITL = gaps between consecutive tokens of a request, pooled over all
tokens; e2e = finish − arrival; throughput = tokens / benchmark duration (first arrival to
last finish).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from perfcast.estimate.serving_memory import ServingMemory
from perfcast.estimate.serving_sim import SimulatedRun
from perfcast.specs.serving import ServingWorkload
from perfcast.specs.strategy import Strategy

PERCENTILES = (("median", 50.0), ("p90", 90.0), ("p99", 99.0))


def weighted_percentile(values: np.ndarray, weights: np.ndarray, q: float) -> float:
    """The q-th percentile of ``values`` each repeated ``weights`` times."""
    if len(values) == 0:
        return float("nan")
    order = np.argsort(values)
    v, c = values[order], np.cumsum(weights[order])
    return float(v[min(np.searchsorted(c, q / 100.0 * c[-1]), len(v) - 1)])


@dataclass(frozen=True)
class LatencyStats:
    """Mean, median, p90 and p99 of one latency, seconds."""

    mean_s: float
    median_s: float
    p90_s: float
    p99_s: float

    @classmethod
    def of(cls, values: np.ndarray, weights: np.ndarray | None = None) -> LatencyStats:
        w = np.ones_like(values, dtype=float) if weights is None else weights
        if len(values) == 0:
            nan = float("nan")
            return cls(nan, nan, nan, nan)
        q = [weighted_percentile(values, w, p) for _, p in PERCENTILES]
        return cls(float(np.average(values, weights=w)), *q)

    @classmethod
    def mean_of(cls, stats: Sequence[LatencyStats]) -> LatencyStats:
        """Each statistic averaged over independent runs (its expectation over draws)."""
        return cls(*(float(np.mean([getattr(s, f.name) for s in stats])) for f in fields(cls)))

    def percentiles(self) -> dict[str, float]:
        return {"median": self.median_s, "p90": self.p90_s, "p99": self.p99_s}


@dataclass(frozen=True)
class RunStatistics:
    """Latencies and token counts of a simulated run (module docstring definitions): the
    part of a ``ServingReport`` the simulation sets (``run_statistics``)."""

    ttft: LatencyStats
    tpot: LatencyStats
    itl: LatencyStats
    e2e_latency: LatencyStats
    duration_s: float
    output_tokens: float
    input_tokens: float
    num_requests: int
    num_steps: int

    @classmethod
    def not_run(cls) -> RunStatistics:
        """The statistics of a deployment that does not fit: nothing simulated."""
        nan = LatencyStats(*(float("nan"),) * 4)
        return cls(ttft=nan, tpot=nan, itl=nan, e2e_latency=nan, duration_s=float("nan"),
                   output_tokens=0.0, input_tokens=0.0, num_requests=0, num_steps=0)

    @classmethod
    def mean_of(cls, runs: Sequence[RunStatistics]) -> RunStatistics:
        """The expected statistics of one run, estimated from independent draws of the same
        stochastic workload (Poisson arrivals): latency statistics and token counts averaged
        over the draws, and the duration that makes output tokens / duration the mean of the
        draws' throughputs (a benchmark reports one run; its mean TTFT under near-saturating
        arrivals varies by a factor of several between draws of 1,000 requests)."""
        if len(runs) == 1:
            return runs[0]
        latency = {name: LatencyStats.mean_of([getattr(r, name) for r in runs])
                   for name in ("ttft", "tpot", "itl", "e2e_latency")}
        output_tokens = float(np.mean([r.output_tokens for r in runs]))
        throughput = float(np.mean([r.output_tokens / r.duration_s for r in runs]))
        return cls(**latency, duration_s=output_tokens / throughput,
                   output_tokens=output_tokens,
                   input_tokens=float(np.mean([r.input_tokens for r in runs])),
                   num_requests=runs[0].num_requests,
                   num_steps=round(float(np.mean([r.num_steps for r in runs]))))

    def field_values(self) -> dict[str, Any]:
        """Each field's value by name (shallow: the ``LatencyStats`` stay objects), to build
        the ``ServingReport`` that extends these statistics."""
        return {f.name: getattr(self, f.name) for f in fields(RunStatistics)}


@dataclass(frozen=True)
class ServingReport(RunStatistics):
    """Forecast of a serving benchmark: the run's statistics (``RunStatistics``: latencies per
    request, token counts) with the deployment that produced them, throughput, memory and fit."""

    model: str
    system: str
    gpu: str
    engine: str
    engine_version: str | None
    strategy: Strategy
    workload: ServingWorkload
    replicas: int
    concurrency_per_replica: int | None
    memory: ServingMemory
    fits: bool
    max_concurrent_seqs: int
    """Sequences of the workload's full length the KV pool holds at once (per replica)."""

    @property
    def num_gpus(self) -> int:
        return self.strategy.num_gpus

    @property
    def output_tokens_per_s(self) -> float:
        return self.replicas * self.output_tokens / self.duration_s if self.fits else 0.0

    @property
    def total_tokens_per_s(self) -> float:
        return self.replicas * (self.output_tokens + self.input_tokens) / self.duration_s \
            if self.fits else 0.0

    @property
    def requests_per_s(self) -> float:
        return self.replicas * self.num_requests / self.duration_s if self.fits else 0.0

    def to_dict(self) -> dict:
        lat = {"ttft_s": self.ttft, "tpot_s": self.tpot, "itl_s": self.itl,
               "e2e_latency_s": self.e2e_latency}
        return {
            "fits": self.fits,
            "model": self.model, "system": self.system, "gpu": self.gpu,
            "engine": self.engine, "engine_version": self.engine_version,
            "num_gpus": self.num_gpus, "replicas": self.replicas,
            "strategy": {"tp": self.strategy.tp, "pp": self.strategy.pp, "ep": self.strategy.ep},
            "workload": self.workload.model_dump(),
            "concurrency_per_replica": self.concurrency_per_replica,
            **{name: s.mean_s for name, s in lat.items()},
            "percentiles": {name: s.percentiles() for name, s in lat.items()},
            "output_tokens_per_s": self.output_tokens_per_s,
            "output_tokens_per_s_per_gpu": self.output_tokens_per_s / self.num_gpus,
            "total_tokens_per_s": self.total_tokens_per_s,
            "total_tokens_per_s_per_gpu": self.total_tokens_per_s / self.num_gpus,
            "requests_per_s": self.requests_per_s,
            "max_concurrent_seqs": self.max_concurrent_seqs,
            "peak_memory_bytes": self.memory.resident_bytes,
            "memory": self.memory.to_dict(),
            "duration_s": self.duration_s, "num_steps": self.num_steps,
        }


def run_statistics(run: SimulatedRun, warmup_requests: int = 0) -> RunStatistics:
    """Latency statistics and token counts of a simulated run (module docstring definitions).
    TTFT, TPOT and e2e leave out the first ``warmup_requests`` requests sent
    (``ServingWorkload.warmup_requests``: the start-up queue of a closed loop); the pooled ITL,
    the token counts and the duration cover the whole run."""
    kept = slice(warmup_requests, None)
    ttft = (run.first_token_s - run.arrival_s)[kept]
    e2e = (run.finish_s - run.arrival_s)[kept]
    out = run.output_len[kept]
    many = out > 1
    tpot = (e2e[many] - ttft[many]) / (out[many] - 1)
    duration = float(run.finish_s.max() - run.arrival_s.min())
    return RunStatistics(
        ttft=LatencyStats.of(ttft), tpot=LatencyStats.of(tpot),
        itl=LatencyStats.of(run.gap_s, run.gap_weight), e2e_latency=LatencyStats.of(e2e),
        duration_s=duration, output_tokens=float(run.output_len.sum()),
        input_tokens=float(run.input_len.sum()), num_requests=len(run.output_len),
        num_steps=run.num_steps)
