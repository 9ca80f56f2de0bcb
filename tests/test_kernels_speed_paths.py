"""The analytical backend's fast paths give the numbers of its plain formulas, to 1e-12.

* ``gemm_time_s`` (scalar calls memoized per backend, array calls vectorized over the tile
  candidates, min of totals without choosing a plan) against a slow reference that evaluates
  ``gemm_candidate_times`` one (tile, split-K) candidate at a time, as the tile model defines
  the choice: the fastest allowed candidate plus the launch overhead;
* memoized scalar attention and GEMM calls (computed, then from the memo, with int, float or
  numpy scalars) against the same shapes as numpy arrays;
* the CLI's default backend against the estimator's.
"""

from __future__ import annotations

import itertools
import pickle

import numpy as np
import pytest

from perfcast.catalog.gpus import load_gpu
from perfcast.cli.options import DEFAULT_KERNEL_BACKEND_OPT
from perfcast.kernels import get_backend
from perfcast.kernels.analytical import AnalyticalBackend
from perfcast.kernels.analytical_gemm import GemmRates, gemm_candidate_times
from perfcast.kernels.backend import DEFAULT_KERNEL_BACKEND
from perfcast.kernels.tiles import num_tiles
from perfcast.op_counts import gemm_bytes

BACKEND = get_backend("analytical")
GPUS = [load_gpu(name) for name in ("h100-sxm", "a100-80gb", "b200", "mi300x")]
DIMS = (1, 100, 1000, 4096, 28672)
SHAPES = [(m, n, k, b) for m, n, k, b in itertools.product(DIMS, DIMS[1:], (64, 4096, 16384), (1, 8))]


def reference_gemm_time_s(gpu, m, n, k, batch, precision) -> float:
    """Slow reference: every (tile, split-K) candidate on its own; the fastest allowed one
    (split-K only while its units fit in one wave) plus the launch overhead."""
    model = BACKEND.params(gpu).gemm
    roofline = BACKEND.roofline.params(gpu)
    rates = GemmRates.of(gpu, precision, model, roofline.hbm_efficiency.value)
    best = np.inf
    for tile, split in itertools.product(model.tiles, model.split_k):
        tile_m, tile_n = float(tile.tile_m), float(tile.tile_n)
        times = gemm_candidate_times(rates, num_tiles(m, n, tile_m, tile_n, batch),
                                     gemm_bytes(m, n, k, batch, precision), k, tile_m, tile_n,
                                     float(tile.sms), float(split))
        if split == 1 or times.units <= times.slots:
            best = min(best, float(times.total_s))
    return best + roofline.launch_overhead_s.value


@pytest.mark.parametrize("gpu", GPUS, ids=lambda g: g.name)
@pytest.mark.parametrize("precision", ["bf16", "fp8"])
def test_gemm_fast_paths_equal_the_candidate_by_candidate_reference(gpu, precision):
    if not gpu.supports(precision):
        pytest.skip(f"{gpu.name} has no {precision}")
    reference = np.array([reference_gemm_time_s(gpu, *shape, precision) for shape in SHAPES])
    scalar = np.array([float(BACKEND.gemm_time_s(gpu, *shape, precision)) for shape in SHAPES])
    again = np.array([float(BACKEND.gemm_time_s(gpu, *shape, precision)) for shape in SHAPES])
    m, n, k, b = (np.array(column, dtype=float) for column in zip(*SHAPES, strict=True))
    array = BACKEND.gemm_time_s(gpu, m, n, k, b, precision)
    plan = BACKEND.plan_gemm(gpu, m, n, k, b, precision).time_s
    for fast in (scalar, again, array, plan):
        np.testing.assert_allclose(fast, reference, rtol=1e-12, atol=0)


def test_memoized_scalars_equal_arrays_for_attention():
    gpu = GPUS[0]
    grid = list(itertools.product((1, 4), (8, 64), (1, 512, 8192), (192, 128), (False, True)))
    for backward in (False, True):
        columns = [np.array(c, dtype=float) for c in zip(*grid, strict=True)]
        batch, heads, seq_q, d_qk, causal = columns
        array = BACKEND.attention_time_s(gpu, batch, heads, seq_q, 8192, d_qk, 128,
                                         causal.astype(bool), backward, num_kv_heads=8)
        for i, (b, h, s, d, c) in enumerate(grid):
            for _ in range(2):  # computed, then memoized
                scalar = BACKEND.attention_time_s(gpu, b, h, s, 8192, d, 128, c, backward,
                                                  num_kv_heads=8)
                assert scalar == pytest.approx(array[i], rel=1e-12, abs=0)
            assert BACKEND.attention_time_s(gpu, float(b), np.int64(h), s, 8192.0, d, 128,
                                            np.bool_(c), backward, num_kv_heads=8) == scalar


def test_memo_key_is_the_value_not_the_type():
    gpu = GPUS[0]
    values = {float(BACKEND.gemm_time_s(gpu, *shape)) for shape in
              [(1000, 4096, 4096, 1), (1000.0, 4096.0, 4096.0, 1.0),
               (np.int64(1000), np.float64(4096), 4096, np.int64(1))]}
    assert len(values) == 1
    zero_d = BACKEND.gemm_time_s(gpu, np.array(1000.0), 4096, 4096)
    assert float(zero_d) in values


def test_backend_pickles_with_a_fresh_memo():
    backend = AnalyticalBackend()
    before = backend.gemm_time_s(GPUS[0], 512, 4096, 4096)
    copy = pickle.loads(pickle.dumps(backend))
    assert copy == backend
    assert copy.gemm_time_s(GPUS[0], 512, 4096, 4096) == before


def test_cli_default_backend_is_the_estimators():
    assert DEFAULT_KERNEL_BACKEND_OPT.value == DEFAULT_KERNEL_BACKEND.value
