"""One-line fit verdicts for the text reports of train, memory and infer.

A configuration that does not fit is a result (DESIGN.md): the verdict comes first and names
the cheapest change that would fit, as found by ``perfcast.search.fit_advice`` (every memory
lever and pair of levers estimated, the fitting one with the shortest forecast step wins).
"""

from __future__ import annotations

from typing import Any

from perfcast.memory.report import MemoryReport


def fit_verdict(report: MemoryReport, advice: Any | None) -> str:
    """One line: 'fits: ...' or 'does NOT fit: ...; cheapest change that fits: ...'
    (``advice``: a ``search.fit_advice.FitAdvice`` or None)."""
    gib = 2**30
    peak, capacity = report.peak_bytes / gib, report.capacity_bytes / gib
    if report.fits:
        return (f"fits: peak {peak:,.1f} GiB of {capacity:,.1f} GiB per GPU "
                f"({report.peak_bytes / report.capacity_bytes:.0%}, stage {report.peak_stage})")
    line = (f"does NOT fit: needs {peak:,.1f} GiB per GPU (stage {report.peak_stage}), "
            f"HBM holds {capacity:,.1f} GiB")
    if advice is None:
        return line + "; no single change or pair of memory levers fits"
    return (line + f"; cheapest change that fits: {' '.join(advice.flags)} "
            f"({advice.peak_bytes / gib:,.1f} GiB)")


def inference_fit_verdict(report) -> str:
    """One line for ``perfcast infer``: does the batch fit (weights + KV cache + activations per
    GPU), and if not, the largest batch that does (``InferenceReport.max_batch_size``)."""
    gib = 2**30
    memory = report.memory
    used, capacity = memory.total_bytes / gib, memory.capacity_bytes / gib
    if memory.fits:
        return (f"fits: {used:,.1f} GiB of {capacity:,.1f} GiB per GPU; largest batch that "
                f"fits: {report.max_batch_size:,}")
    line = f"does NOT fit: needs {used:,.1f} GiB per GPU, HBM holds {capacity:,.1f} GiB"
    if report.max_batch_size >= 1:
        return line + f"; cheapest change that fits: --batch-size {report.max_batch_size:,}"
    return line + "; even batch 1 does not fit: more --tp/--pp, or lower --weight-precision"
