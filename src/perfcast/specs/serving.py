"""Typed, frozen description of a serving benchmark's request stream.

Three client modes, as serving benchmarks run them (vLLM ``benchmarks/benchmark_serving.py``,
SGLang ``bench_serving``, InferenceX ``benchmark_lib.sh``):

* ``concurrency``: closed loop; ``concurrency`` clients each send a request as soon as their
  previous one finished (``--max-concurrency``);
* ``request_rate``: open loop; requests arrive as a Poisson process of ``request_rate_per_s``
  (``--request-rate``, burstiness 1 = exponential gaps);
* ``offline``: every request is queued at t = 0 (``LLM.generate`` / ``trtllm-bench``
  max-throughput).

Lengths are fixed, or sampled uniformly in [ratio·L, L] (vLLM ``RandomDataset``
``--random-range-ratio``, ≤ 0.8 semantics; InferenceX uses 0.8), or drawn from measured
(prompt, output) pairs (``length_samples``: a dataset such as ShareGPT as the benchmark sampled
it, e.g. the ``input_lens``/``output_lens`` lists vLLM ``benchmark_serving.py --save-result``
writes). A finite open-loop run ends when its longest late request finishes, so a long-tailed
stream has a longer drain and a lower tokens/duration throughput than fixed lengths of the
same means; perfcast ships no dataset's shape, the user supplies the measured pairs.

A closed-loop run starts with every client's prompt at t = 0, a queue the steady state never
sees; ``warmup_requests`` leaves the first requests sent out of the latency statistics (a
client measuring the steady state; benchmark_serving and bench_serving leave none out).
"""

from __future__ import annotations

from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

ClientMode = Literal["concurrency", "request_rate", "offline"]
DEFAULT_ARRIVAL_DRAWS: Final[int] = 8
"""Poisson arrival sequences a request-rate forecast averages (``ServingWorkload.arrival_draws``):
near saturation one draw of 1,000 requests moves a mean TTFT by a factor of several (dstack's
Llama-3.1-405B row 787: 0.5-2.6 s over six seeds); averaging 8 draws cuts that spread by
sqrt(8) ~ 2.8x at 8x the simulation time (~0.1 s per draw of 1,000 requests)."""


class LengthSample(BaseModel):
    """One measured request of a dataset: its prompt and generated token counts."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    input_len: int = Field(gt=0, description="Prompt tokens.")
    output_len: int = Field(gt=0, description="Generated tokens.")


class ServingWorkload(BaseModel):
    """The request stream a serving benchmark sends to one deployment."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    mode: ClientMode = Field(description="concurrency (closed loop), request_rate (Poisson), offline.")
    concurrency: int | None = Field(default=None, gt=0, description="Clients in flight (mode concurrency).")
    request_rate_per_s: float | None = Field(
        default=None, gt=0, description="Mean arrivals per second (mode request_rate).")
    num_requests: int = Field(default=1000, gt=0, description="Requests sent in the run.")
    input_len: int = Field(default=1024, gt=0, description="Prompt tokens (largest when sampled).")
    output_len: int = Field(default=1024, gt=0, description="Generated tokens (largest when sampled).")
    length_range_ratio: float = Field(
        default=1.0, gt=0.0, le=1.0,
        description="Lengths uniform in [ratio·L, L]; 1 = fixed lengths.")
    length_samples: tuple[LengthSample, ...] | None = Field(
        default=None, min_length=1,
        description="Measured (prompt, output) pairs each request draws one of, uniformly with "
                    "replacement (seeded); input_len/output_len must then be their largest.")
    seed: int = Field(default=0, description="Seed of sampled lengths and arrivals.")
    arrival_draws: int = Field(
        default=DEFAULT_ARRIVAL_DRAWS, gt=0, le=1000,
        description="Independent Poisson arrival sequences (mode request_rate, seeds seed, "
                    "seed + 1, ...) whose run statistics are averaged: the forecast is the "
                    "expected statistic of one benchmark run, not one draw's.")
    warmup_requests: int = Field(
        default=0, ge=0,
        description="First requests sent whose latencies the statistics leave out (the start-up "
                    "transient); they still load the engine and count in throughput.")

    @model_validator(mode="after")
    def _check(self) -> ServingWorkload:
        if self.mode == "concurrency" and self.concurrency is None:
            raise ValueError("mode='concurrency' needs concurrency")
        if self.mode == "request_rate" and self.request_rate_per_s is None:
            raise ValueError("mode='request_rate' needs request_rate_per_s")
        if self.length_samples is not None:
            if self.length_range_ratio < 1.0:
                raise ValueError("length_samples and length_range_ratio < 1 both set lengths")
            top_in = max(x.input_len for x in self.length_samples)
            top_out = max(x.output_len for x in self.length_samples)
            if (self.input_len, self.output_len) != (top_in, top_out):
                raise ValueError(f"input_len={self.input_len}, output_len={self.output_len} must "
                                 f"be the largest of length_samples ({top_in}, {top_out})")
        if self.warmup_requests >= self.num_requests:
            raise ValueError(f"warmup_requests={self.warmup_requests} leaves none of the "
                             f"num_requests={self.num_requests} measured")
        return self

    @property
    def context_tokens(self) -> int:
        """Largest KV length a request reaches."""
        return self.input_len + self.output_len


def serving_workload(*, concurrency: int | None, request_rate: float | None,
                     num_requests: int | None, input_len: int, output_len: int,
                     length_range_ratio: float = 1.0, warmup_requests: int = 0,
                     arrival_draws: int | None = None,
                     length_samples: tuple[LengthSample, ...] | None = None) -> ServingWorkload:
    """The ``ServingWorkload`` the flags describe (offline when neither concurrency nor rate is
    given); ``--num-requests`` defaults to 10 × concurrency, at least 100. ``infer-search``
    builds its workloads here too, so its numbers are those of ``infer``. Measured
    ``length_samples`` replace ``input_len``/``output_len`` by their largest."""
    if length_samples:
        input_len = max(x.input_len for x in length_samples)
        output_len = max(x.output_len for x in length_samples)
    mode: Literal["concurrency", "request_rate", "offline"] = (
        "concurrency" if concurrency is not None
        else "request_rate" if request_rate is not None else "offline")
    default_requests = max(10 * (concurrency or 10), 100)
    return ServingWorkload(
        mode=mode, concurrency=concurrency, request_rate_per_s=request_rate,
        num_requests=num_requests or default_requests, input_len=input_len,
        output_len=output_len, length_range_ratio=length_range_ratio,
        warmup_requests=warmup_requests,
        arrival_draws=DEFAULT_ARRIVAL_DRAWS if arrival_draws is None else arrival_draws,
        length_samples=length_samples or None)
