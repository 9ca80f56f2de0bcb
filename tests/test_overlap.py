"""Communication/compute overlap: exposed seconds, the SM-sharing slowdown and the fitted share
of stream-overlapped collectives (data-parallel, context-parallel; schedule/overlap.py,
calibration/comm_overlap.yaml)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfcast.calibration.bundle import load_calibration
from perfcast.calibration.comm_overlap import load_comm_overlap
from perfcast.catalog.gpus import list_gpus
from perfcast.catalog.models import load_model
from perfcast.catalog.systems import load_system
from perfcast.estimate.training import estimate_training
from perfcast.schedule.overlap import compute_slowdown, exposed_comm_s, stream_overlap_slowdown
from perfcast.specs.strategy import Strategy
from perfcast.specs.workload import Workload

seconds = st.floats(min_value=0.0, max_value=10.0)
shares = st.floats(min_value=0.0, max_value=1.0)


def test_exposed_comm_identities():
    assert exposed_comm_s(3.0, 1.0, 0.0) == pytest.approx(2.0)
    assert exposed_comm_s(1.0, 3.0, 0.0) == 0.0
    assert exposed_comm_s(1.0, 3.0, 0.1) == pytest.approx(0.1)      # compute slowed while hiding
    assert exposed_comm_s(1.0, 3.0, 0.0, 0.3) == pytest.approx(0.7)  # only 30% hideable
    np.testing.assert_allclose(exposed_comm_s(np.array([1.0, 4.0]), 2.0, 0.0), [0.0, 2.0])


def test_comm_bound_overlap_hides_the_compute_slowdown():
    """The slower stream sets the time: with comm 3 s beside compute 2 s slowed by 0.5 s/s,
    compute (2 + 0.5·2 = 3 s) still ends with the comm, so only c − w = 1 s is exposed; with
    a 0.8 s/s slowdown compute ends at 3.6 s and 1.6 s is exposed."""
    assert exposed_comm_s(3.0, 2.0, 0.5) == pytest.approx(1.0)
    assert exposed_comm_s(3.0, 2.0, 0.8) == pytest.approx(1.6)
    assert exposed_comm_s(1.0, 2.0, 0.8) == pytest.approx(0.8)   # compute-bound: s·c


@given(c=seconds, w=seconds, s=shares, h=shares)
def test_exposed_between_no_overlap_and_serial(c, w, s, h):
    """Overlap never costs more than running the collective after the compute, nor less than
    the part that outlasts the compute window."""
    exposed = exposed_comm_s(c, w, s, h)
    assert max(0.0, c - w) - 1e-12 <= exposed <= c + 1e-12


@given(c=seconds, extra=st.floats(min_value=0.0, max_value=5.0), w=seconds, s=shares)
def test_exposed_never_falls_with_more_communication(c, extra, w, s):
    assert exposed_comm_s(c + extra, w, s) >= exposed_comm_s(c, w, s) - 1e-12


def test_stream_overlap_share_is_physical():
    """The fitted stream-overlap share lies between the SM-sharing slowdown of every catalog GPU
    (a collective holds SMs while it hides) and 1 (no worse than no overlap at all)."""
    share = stream_overlap_slowdown()
    assert share <= 1.0
    for gpu in list_gpus():
        system = load_system("dgx-h100").model_copy(update={"gpu": gpu})
        assert compute_slowdown(system) <= share, gpu.name


def _with_share(share: float):
    """The shipped calibration with the stream-overlap share set to ``share``."""
    cal = load_comm_overlap()
    overlap = cal.model_copy(update={"stream_overlap_exposed_fraction": cal
                                     .stream_overlap_exposed_fraction.model_copy(
                                         update={"value": share})})
    return load_calibration().replace(comm_overlap=overlap)


def test_stream_overlap_share_moves_only_data_parallel_exposure():
    """MPT-7B with FSDP on 64 H100s: a larger share exposes more DP communication and leaves
    the per-micro-batch compute and TP parts alone."""
    model, system = load_model("mpt-7b"), load_system("dgx-h100")
    strategy = Strategy(num_gpus=64, fsdp=True, micro_batch_size=4)
    workload = Workload(seq_length=2048, global_batch_size=512)
    low, high = (estimate_training(model, system, strategy, workload, calibration=_with_share(s))
                 for s in (0.1, 0.9))
    assert high.breakdown.dp_comm_s > low.breakdown.dp_comm_s
    assert high.step_time_s > low.step_time_s
    assert high.breakdown.compute_gemm_s == low.breakdown.compute_gemm_s
    assert high.breakdown.tp_comm_s == low.breakdown.tp_comm_s


def test_stream_overlap_share_applies_to_the_context_parallel_ring():
    """Llama-3 8B at 64k tokens with CP 8 on one DGX H100: the K/V ring hides under attention,
    so its exposed seconds are the share times the ring's seconds and grow with the share."""
    model, system = load_model("llama3-8b"), load_system("dgx-h100")
    strategy = Strategy(num_gpus=8, cp=8)
    workload = Workload(seq_length=65536, global_batch_size=8)
    low, high = (estimate_training(model, system, strategy, workload, calibration=_with_share(s))
                 for s in (0.2, 0.8))
    assert high.breakdown.cp_comm_s == pytest.approx(4 * low.breakdown.cp_comm_s, rel=1e-9)
    assert high.breakdown.compute_attention_s == low.breakdown.compute_attention_s
