"""Downsampling: min/max/last per bucket, shared edges, full resolution under the budget."""

from __future__ import annotations

import numpy as np

from runwatch.analysis.downsample import downsample, shared_edges, window


def test_under_budget_is_returned_whole() -> None:
    steps = np.arange(50, dtype=np.int64)
    values = np.linspace(0, 1, 50)
    d = downsample(steps, values, shared_edges([(0, 49)], 100), 100)
    assert d.full and d.count == 50
    assert np.array_equal(d.step, steps) and np.array_equal(d.last, values)


def test_buckets_keep_min_max_and_last() -> None:
    steps = np.arange(1000, dtype=np.int64)
    values = np.sin(steps / 7.0)
    edges = shared_edges([(0, 999)], 10)
    d = downsample(steps, values, edges, 10)
    assert not d.full and len(d.step) == 10
    for i in range(10):
        chunk = values[i * 100 : (i + 1) * 100]
        assert d.min[i] == chunk.min() and d.max[i] == chunk.max()
        assert d.last[i] == chunk[-1] and d.step[i] == i * 100 + 99


def test_nan_is_ignored_by_min_max_but_kept_as_last() -> None:
    steps = np.arange(40, dtype=np.int64)
    values = np.ones(40)
    values[9] = np.nan
    values[10] = 5.0
    d = downsample(steps, values, shared_edges([(0, 39)], 4), 4)
    assert np.isnan(d.last[0]) and d.max[0] == 1.0
    assert d.max[1] == 5.0


def test_edges_are_shared_across_series() -> None:
    a = np.arange(0, 1000, dtype=np.int64)
    b = np.arange(500, 2000, dtype=np.int64)
    edges = shared_edges([(0, 999), (500, 1999)], 20)
    da = downsample(a, np.zeros(a.size), edges, 20)
    db = downsample(b, np.zeros(b.size), edges, 20)
    width = edges.width
    # every bucket's last step lies in the same bucket grid for both runs
    for d in (da, db):
        idx = np.floor((d.step - edges.lo) / width)
        assert len(set(idx.tolist())) == len(d.step)
    assert edges.lo == 0 and edges.hi == 1999


def test_window_selects_steps_in_range() -> None:
    steps = np.array([0, 5, 10, 15, 20], dtype=np.int64)
    assert window(steps, 5, 15) == (1, 4)
    assert window(steps, None, None) == (0, 5)
    assert window(steps, 21, None) == (5, 5)
