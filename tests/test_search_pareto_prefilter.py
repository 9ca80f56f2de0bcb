"""``rank.pareto_front`` on large point sets drops the points a sample's front beats before
its sort (issue 18): the same indices in the same order as sorting every point, ties
included."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from perfcast.search import rank


@settings(max_examples=25, deadline=None)
@given(n=st.integers(rank.PREFILTER_MIN_POINTS, 60_000), levels=st.sampled_from([3, 40, 0]),
       seed=st.integers(0, 2**32 - 1), shape=st.sampled_from(["cloud", "tradeoff"]))
def test_prefiltered_front_equals_the_full_sort(n, levels, seed, shape):
    rng = np.random.default_rng(seed)
    if levels:  # few distinct values: many identical points and ties in x or y
        x, y = rng.integers(0, levels, n).astype(float), rng.integers(0, levels, n).astype(float)
    else:
        x, y = rng.random(n), rng.random(n)
    if shape == "tradeoff":  # a long front, as tokens/s/GPU vs memory headroom gives
        y = y - 3.0 * x
    kept = rank._unbeaten_by_sample(x, y)
    assert len(kept) < n  # the filter drops points
    assert rank.pareto_front(x, y).tolist() == rank._pareto_front(x, y).tolist()


def test_non_finite_points_skip_the_filter():
    x = np.linspace(0.0, 1.0, rank.PREFILTER_MIN_POINTS)
    y = x[::-1].copy()
    y[7] = np.nan
    assert rank.pareto_front(x, y).tolist() == rank._pareto_front(x, y).tolist()
