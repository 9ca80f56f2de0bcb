"""Admission at step boundaries (``serving_sim.admission_open``): a request joins only a batch
formed after it arrived; overlap schedulers form batch N+1 while step N runs."""

from __future__ import annotations

from functools import cache

import pytest

from perfcast.catalog.models import load_model
from perfcast.catalog.systems import load_system
from perfcast.estimate.serving import estimate_serving
from perfcast.estimate.serving_sim import admission_open
from perfcast.specs.serving import ServingWorkload
from perfcast.specs.strategy import Strategy


def test_an_idle_engine_admits_an_arrival_at_once():
    assert admission_open(arrival_s=1.0, now_s=1.0, last_step_s=0.5, overlap=True, idle=True)
    assert not admission_open(arrival_s=1.1, now_s=1.0, last_step_s=0.5, overlap=True, idle=True)


def test_without_overlap_the_batch_is_formed_when_its_step_starts():
    assert admission_open(0.99, now_s=1.0, last_step_s=0.01, overlap=False, idle=False)
    # a closed-loop client's next request arrives as the step it finished in ends: too late
    assert not admission_open(1.0, now_s=1.0, last_step_s=0.01, overlap=False, idle=False)


def test_with_overlap_the_batch_was_formed_when_the_previous_step_started():
    assert not admission_open(0.995, now_s=1.0, last_step_s=0.01, overlap=True, idle=False)
    assert admission_open(0.985, now_s=1.0, last_step_s=0.01, overlap=True, idle=False)


@cache
def _serve(concurrency: int, engine: str, version: str | None = None):
    workload = ServingWorkload(mode="concurrency", concurrency=concurrency,
                               num_requests=40 * concurrency, input_len=1024, output_len=256,
                               length_range_ratio=0.8)
    return estimate_serving(load_model("llama-3.1-8b"), load_system("dgx-h100", num_gpus=1),
                            Strategy(num_gpus=1), workload, engine=engine, engine_version=version)


@pytest.mark.parametrize("engine, version, steps", [("sglang", None, 2), ("vllm", None, 2),
                                                    ("vllm", "0.13.0", 1), ("nim", None, 1),
                                                    ("tensorrt-llm", "1.3.0", 2)])
def test_closed_loop_ttft_waits_one_step_per_batch_formed_ahead(engine, version, steps):
    """Closed loop, 8 clients: a new request waits about ``steps`` decode steps (two with an
    overlap scheduler, vLLM async scheduling from 0.14, the TensorRT-LLM PyTorch executor; one
    without: vLLM 0.13, NIM's prebuilt TensorRT engines) before its prefill, so the median
    TTFT is the lone prefill plus that wait (within half a step)."""
    alone, loaded = _serve(1, engine, version), _serve(8, engine, version)
    wait_s = loaded.ttft.median_s - alone.ttft.median_s
    assert wait_s == pytest.approx(steps * loaded.tpot.median_s, abs=0.5 * loaded.tpot.median_s)
