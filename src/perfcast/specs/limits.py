"""Bounds on input sizes, in one place, each with the reason it is where it is.

Inputs beyond these bounds cannot describe a real run, or would make a forecast run for minutes
or allocate gigabytes before saying anything useful (a pipeline simulation is one event per
pass; a divisor search is one trial per candidate). Every check names its bound:
``check_at_most("num_gpus", 2**70, MAX_GPUS)`` raises ``InputError`` with
"num_gpus=... exceeds MAX_GPUS=1048576 (...reason...)". Pydantic fields use the same numbers
(``Field(le=MAX_GPUS)``) so the Python API and the CLI refuse the same inputs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from perfcast.errors import InputError


@dataclass(frozen=True)
class Bound:
    """An upper bound on one kind of input, with why it is there."""

    name: str
    value: int | float
    reason: str


MAX_GPUS = Bound("MAX_GPUS", 2**20, "about 10x the largest GPU clusters announced (~100k GPUs); "
                 "bounds divisor searches over the GPU count")
MAX_PARALLEL_SIZE = Bound("MAX_PARALLEL_SIZE", 2**20, "a parallel group cannot exceed MAX_GPUS")
MAX_SEQ_LENGTH = Bound("MAX_SEQ_LENGTH", 2**24, "16M tokens, above the longest published context "
                       "(10M, Llama 4 Scout)")
MAX_BATCH_SEQUENCES = Bound("MAX_BATCH_SEQUENCES", 2**24, "16M sequences per step or batch, "
                            "~1000x the largest published global batches")
MAX_MICRO_BATCH_SIZE = Bound("MAX_MICRO_BATCH_SIZE", 2**12, "micro-batches beyond 4096 sequences "
                             "do not fit any GPU; the search tries every size up to it")
MAX_GENERATED_TOKENS = Bound("MAX_GENERATED_TOKENS", 2**24, "output tokens per sequence; decode "
                             "is integrated step by step, so time grows with it")
MAX_GEMM_DIM = Bound("MAX_GEMM_DIM", 2**32, "4G rows/columns: above any LLM GEMM (tokens x "
                     "hidden); keeps FLOP and byte counts exact in float64")
MAX_HEADS = Bound("MAX_HEADS", 2**16, "attention heads per layer (largest published: 160)")
MAX_HEAD_DIM = Bound("MAX_HEAD_DIM", 2**16, "dimension of one attention head (largest: 576, MLA)")
MAX_SEARCH_MICRO_BATCH_SIZE = Bound("MAX_SEARCH_MICRO_BATCH_SIZE", 256, "the search evaluates "
                                    "every micro-batch size up to it for every layout")
MAX_SIMULATED_STAGE_PASSES = Bound("MAX_SIMULATED_STAGE_PASSES", 2**18, "stages x micro-batches "
                                   "x chunks that train simulates for zero-bubble/DualPipe "
                                   "schedules (128 x 4096 x 4 took 38 s)")
MAX_PIPELINE_PASSES = Bound("MAX_PIPELINE_PASSES", 30_000, "stages x micro-batches x chunks of a "
                            "schedule study, simulated one event each (~1e4 passes/s)")
MAX_PIPELINE_PASS_STAGES = Bound("MAX_PIPELINE_PASS_STAGES", 2_000_000, "passes x stages of a "
                                 "schedule study: each event scans every device (O(passes x "
                                 "devices)); beyond this a study takes more than a few seconds")
MAX_HARDWARE_FACTOR = Bound("MAX_HARDWARE_FACTOR", 1e3, "--vary scales one hardware parameter; "
                            "1000x is beyond any hardware generation step")
MAX_MESSAGE_BYTES = Bound("MAX_MESSAGE_BYTES", 2.0**50, "1 PiB in one collective, beyond the "
                          "memory of any GPU group")
MAX_TIME_S = Bound("MAX_TIME_S", 1e6, "per-pass times of a schedule study (11 days per pass)")
MAX_MOE_LOAD_IMBALANCE = Bound("MAX_MOE_LOAD_IMBALANCE", 2**12, "the busiest of ep ranks holds at "
                               "most ep x the mean load; ep is at most a few thousand ranks")
MAX_TOKEN_BUDGET = Bound("MAX_TOKEN_BUDGET", 1e18, "1e18 tokens, ~30000x the largest published "
                         "training runs (36T tokens)")
MAX_PRICE_PER_GPU_HOUR = Bound("MAX_PRICE_PER_GPU_HOUR", 1e6, "dollars per GPU-hour")
MAX_SERVING_SEARCH_GPUS = Bound("MAX_SERVING_SEARCH_GPUS", 4096, "infer-search pairs every "
                                "prefill and decode layout over every pool split of the GPUs; "
                                "serving deployments of one model span at most a few racks")
MAX_SEARCH_TOP = Bound("MAX_SEARCH_TOP", 10_000, "ranked deployments shown; each is re-scored "
                       "by a request-stream simulation")
MAX_TOKEN_RATE = Bound("MAX_TOKEN_RATE", 1e9, "tokens/s per user; no decoder emits a token "
                       "faster than a nanosecond")
MAX_SEARCH_JOBS = Bound("MAX_SEARCH_JOBS", 1024, "worker processes of one search: above the "
                        "cores of any single machine (2 x 192-core sockets with SMT = 768)")


def check_at_most(field: str, value: int | float, bound: Bound) -> None:
    """Raise ``InputError`` naming ``field``, ``value`` and ``bound`` if value > bound."""
    if value > bound.value:
        shown = f"{bound.value:,}" if isinstance(bound.value, int) else f"{bound.value:g}"
        raise InputError(field, value, f"exceeds {bound.name}={shown} ({bound.reason})")


def check_positive(field: str, value: int | float, bound: Bound | None = None) -> None:
    """Raise ``InputError`` unless 0 < value (finite, and at most ``bound`` when given)."""
    check_finite(field, value)
    if not value > 0:
        raise InputError(field, value, "must be > 0")
    if bound is not None:
        check_at_most(field, value, bound)


def check_non_negative(field: str, value: int | float, bound: Bound | None = None) -> None:
    """Raise ``InputError`` unless 0 <= value (finite, and at most ``bound`` when given)."""
    check_finite(field, value)
    if not value >= 0:
        raise InputError(field, value, "must be >= 0")
    if bound is not None:
        check_at_most(field, value, bound)


def check_request_lengths(input_len: int, output_len: int) -> None:
    """The prompt and generated lengths of a serving request: each positive and bounded, and
    together within ``MAX_SEQ_LENGTH`` (infer, infer-search and serving sweeps)."""
    check_positive("input_len", input_len, MAX_SEQ_LENGTH)
    check_positive("output_len", output_len, MAX_GENERATED_TOKENS)
    check_at_most("input_len+output_len", input_len + output_len, MAX_SEQ_LENGTH)


def check_finite(field: str, value: int | float) -> None:
    """Raise ``InputError`` for NaN or infinite ``value``."""
    if isinstance(value, float) and not math.isfinite(value):
        raise InputError(field, value, "must be a finite number")
