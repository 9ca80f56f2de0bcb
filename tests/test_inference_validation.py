"""Inference forecasts against ../shared/ground_truth/inference.csv (bounds just above what is
measured; see tools/fit_inference_overheads.py for the calibration)."""

from __future__ import annotations

from functools import cache

import pytest

from perfcast.validate.inference_compare import validate_inference

from conftest import shared_path

SOURCE_BOUNDS = {
    "fastertransformer-docs-gpt-guide-md-performance-section": 0.13,
    "pytorch-labs-gpt-fast-readme-benchmarks": 0.16,
    "tensorrt-llm-docs-performance-md": 0.12,
    "kipply-transformer-inference-arithmetic-real-fastertransformer": 0.18,
    "tensorrt-llm-blog-h100-has-4-6x-a100": 0.11,
    "tensorrt-llm-blog-h200-achieves-nearly-12": 0.10,
    "tensorrt-llm-blog-falcon-180b-on-a-single": 0.40,
}
BATCH1_DECODE = ("decode_tokens_per_s_per_user", "decode_latency_per_token")


@cache
def _report():
    return validate_inference(shared_path("ground_truth", "inference.csv"))


def test_overall_mape():
    report = _report()
    assert report.summary.overall.count >= 450
    assert report.summary.overall.mape <= 0.13


@pytest.mark.parametrize("source, bound", sorted(SOURCE_BOUNDS.items()))
def test_mape_per_source(source, bound):
    stats = _report().summary.source(source)
    assert stats is not None and stats.count > 0
    assert stats.mape <= bound


def test_batch1_decode_mape():
    rows = [r for r in _report().rows if r.metric in BATCH1_DECODE]
    assert len(rows) >= 30
    assert sum(abs(r.error) for r in rows) / len(rows) <= 0.155


def test_measured_memory_rows():
    stats = dict(_report().by_metric)["gpu_memory_usage"]
    assert stats.count == 42 and stats.mape <= 0.03


def test_skips_are_explained():
    reasons = {s.reason for s in _report().skipped}
    assert any("L40S" in r for r in reasons)
    assert all(r for r in reasons)
