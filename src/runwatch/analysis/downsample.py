"""Bucketed downsampling of metric series: per bucket min, max and last value.

Every series in one request shares the same bucket edges, so runs drawn together
line up step for step. A series with no more points in range than the budget is
returned at full resolution.

Over a whole series the edges are aligned (`aligned_edges`): the bucket width is a power
of two steps and the first edge a multiple of it, so a bucket is exactly one bucket of
the index's step summaries (runwatch.store.summaries) and a series can be reduced from
those instead of from every point, with the same result (`reduce_units`).
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
    ts: FloatArray | None = None  # the wall time of each bucket's last point


@dataclass(frozen=True)
class Units:
    """A series in step order as units that each hold `n` points: single points (n = 1,
    min = max = last) or buckets already reduced (the index's summaries). `step` and `ts`
    are those of each unit's last point."""

    step: IntArray
    n: IntArray
    min: FloatArray
    max: FloatArray
    last: FloatArray
    ts: FloatArray

    @property
    def count(self) -> int:
        return int(self.n.sum())


def shared_edges(ranges: list[tuple[int, int]], buckets: int) -> Edges:
    """Edges covering every (first, last) step range given, split into `buckets` buckets."""
    if not ranges:
        return Edges(0.0, 0.0, max(buckets, 1))
    lo = min(r[0] for r in ranges)
    hi = max(r[1] for r in ranges)
    return Edges(float(lo), float(hi), max(buckets, 1))


def aligned_edges(ranges: list[tuple[int, int]], buckets: int) -> Edges:
    """Edges covering every (first, last) step range given in at most `buckets` buckets
    whose width is the smallest power of two that allows it, starting at a multiple of
    that width (so more than half the budget is used)."""
    if not ranges:
        return Edges(0.0, 0.0, max(buckets, 1))
    lo = min(r[0] for r in ranges)
    hi = max(r[1] for r in ranges)
    shift = 0
    while (hi >> shift) - (lo >> shift) + 1 > max(buckets, 1):
        shift += 1
    n = (hi >> shift) - (lo >> shift) + 1
    first = (lo >> shift) << shift
    return Edges(float(first), float(first + (n << shift)), n)


def width_shift(edges: Edges) -> int | None:
    """log2 of the edges' bucket width when they are aligned edges (see `aligned_edges`)."""
    width = edges.width
    if width < 1 or width != int(width) or int(width) & (int(width) - 1):
        return None
    shift = int(width).bit_length() - 1
    return shift if edges.lo == (int(edges.lo) >> shift) << shift else None


def window(steps: IntArray, lo: float | None, hi: float | None) -> tuple[int, int]:
    """Index range [a, b) of the sorted `steps` that fall inside [lo, hi]."""
    a = 0 if lo is None else int(np.searchsorted(steps, lo, side="left"))
    b = len(steps) if hi is None else int(np.searchsorted(steps, hi, side="right"))
    return a, max(a, b)


def downsample(steps: IntArray, values: FloatArray, edges: Edges, budget: int,
               ts: FloatArray | None = None) -> Downsampled:
    """Reduce sorted (steps, values) to at most `edges.buckets` buckets.

    When the series has no more points than `budget` it is returned unchanged
    (`full=True`). NaN values are ignored by min and max; `last` keeps them, so a
    NaN at the end of a bucket stays visible as a gap.
    """
    n = len(steps)
    if n <= budget:
        return Downsampled(True, n, steps, values, values, values, ts)
    return _reduce(steps, values, values, values, ts, edges, n)


def reduce_units(units: Units, edges: Edges) -> Downsampled:
    """Reduce a series given as units (points and buckets) to the buckets of `edges`.

    With edges aligned to the units' buckets the result is what `downsample` gives for
    the points themselves over a series larger than its budget.
    """
    return _reduce(units.step, units.last, units.min, units.max, units.ts, edges, units.count)


def _reduce(steps: IntArray, last: FloatArray, mins: FloatArray, maxs: FloatArray,
            ts: FloatArray | None, edges: Edges, count: int) -> Downsampled:
    n = len(steps)
    # steps are sorted, so each bucket is one contiguous run of indices: find where each
    # bucket starts with a binary search instead of classifying every point
    bounds = edges.lo + edges.width * np.arange(1, edges.buckets)
    cuts = np.searchsorted(steps, bounds, side="left")
    starts = np.unique(np.concatenate(([0], cuts)))
    starts = starts[starts < n]
    ends = np.append(starts[1:], n) - 1
    with np.errstate(invalid="ignore"):
        lo_v = np.fmin.reduceat(mins, starts)
        hi_v = np.fmax.reduceat(maxs, starts)
    return Downsampled(False, count, steps[ends], last[ends], lo_v, hi_v,
                       None if ts is None else ts[ends])
