"""Bucketed downsampling of metric series: per bucket min, max and last value.

Every series in one request shares the same bucket edges, so runs drawn together
line up step for step. A series with no more points in range than the budget is
returned at full resolution.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Edges:
    """Bucket edges over the step range [lo, hi]: bucket i is [lo + i*width, lo + (i+1)*width)."""

    lo: float
    hi: float
    buckets: int

    @property
    def width(self) -> float:
        return max(self.hi - self.lo, 1.0) / self.buckets

    def as_dict(self) -> dict[str, float | int]:
        return {"lo": self.lo, "hi": self.hi, "buckets": self.buckets, "width": self.width}


@dataclass(frozen=True)
class Downsampled:
    """One series reduced to buckets, or passed through when it fits the budget."""

    full: bool
    count: int
    step: IntArray
    last: FloatArray
    min: FloatArray
    max: FloatArray


def shared_edges(ranges: list[tuple[int, int]], buckets: int) -> Edges:
    """Edges covering every (first, last) step range given, split into `buckets` buckets."""
    if not ranges:
        return Edges(0.0, 0.0, max(buckets, 1))
    lo = min(r[0] for r in ranges)
    hi = max(r[1] for r in ranges)
    return Edges(float(lo), float(hi), max(buckets, 1))


def window(steps: IntArray, lo: float | None, hi: float | None) -> tuple[int, int]:
    """Index range [a, b) of the sorted `steps` that fall inside [lo, hi]."""
    a = 0 if lo is None else int(np.searchsorted(steps, lo, side="left"))
    b = len(steps) if hi is None else int(np.searchsorted(steps, hi, side="right"))
    return a, max(a, b)


def downsample(steps: IntArray, values: FloatArray, edges: Edges, budget: int) -> Downsampled:
    """Reduce sorted (steps, values) to at most `edges.buckets` buckets.

    When the series has no more points than `budget` it is returned unchanged
    (`full=True`). NaN values are ignored by min and max; `last` keeps them, so a
    NaN at the end of a bucket stays visible as a gap.
    """
    n = len(steps)
    if n <= budget:
        return Downsampled(True, n, steps, values, values, values)
    # steps are sorted, so each bucket is one contiguous run of indices: find where each
    # bucket starts with a binary search instead of classifying every point
    bounds = edges.lo + edges.width * np.arange(1, edges.buckets)
    cuts = np.searchsorted(steps, bounds, side="left")
    starts = np.unique(np.concatenate(([0], cuts)))
    starts = starts[starts < n]
    ends = np.append(starts[1:], n) - 1
    with np.errstate(invalid="ignore"):
        lo_v = np.fmin.reduceat(values, starts)
        hi_v = np.fmax.reduceat(values, starts)
    return Downsampled(False, n, steps[ends], values[ends], lo_v, hi_v)
