"""The statistics the trend detectors share: Theil-Sen slopes, thinning, bucket medians
(`Buckets`), effects and their noise (the robust spread of point-to-point changes, the
standard error of a difference of medians), how many points a median needs to show a
change beyond that noise, and the judging of a detector at each completed bucket (`judge`,
with `Onsets` keeping when its verdict turned true, and `Buckets.held` the levels of the
window its latest verdict that held looked at).
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections.abc import Iterable
from functools import lru_cache
from itertools import pairwise
from operator import itemgetter, sub, truediv
from typing import Any, Protocol

from runwatch.health.detectors import median, robust_sd

LARGEST = 1.7976931348623157e308  # the largest finite double (sys.float_info.max)


def bounded(x: float) -> float:
    """An effect or level as a finite number: one that overflowed (a series near the
    double's limit, such as 1e308 next to 2) as the largest double of its sign, and NaN
    (∞ − ∞) as 0.0, no move that can be told. A detector's state is kept as JSON, which
    holds no NaN or infinity, and a move that large is judged as the largest there is."""
    if math.isnan(x):
        return 0.0
    return max(-LARGEST, min(LARGEST, x))


def lazy_numpy() -> Any:
    """numpy, imported where a long batch is first judged: a command that only reads
    stored findings (`runwatch runs health`) does not pay for loading it."""
    import numpy

    return numpy


@lru_cache(maxsize=64)
def _pair_getters(n: int) -> tuple[itemgetter[Any], itemgetter[Any]]:
    """Getters of the first and second member of every pair (i < j) of n items."""
    pairs = [(i, j) for i in range(n - 1) for j in range(i + 1, n)]
    return itemgetter(*[p[0] for p in pairs]), itemgetter(*[p[1] for p in pairs])


def theil_sen(xs: list[float], ys: list[float]) -> float:
    """Theil–Sen slope: the median of all pairwise slopes, robust to a few outliers."""
    n = len(xs)
    if n < 3:
        return (ys[1] - ys[0]) / (xs[1] - xs[0]) if n == 2 and xs[1] != xs[0] else 0.0
    first, second = _pair_getters(n)
    dx = list(map(sub, second(xs), first(xs)))
    dy = map(sub, second(ys), first(ys))
    if 0 in dx:  # repeated steps: leave those pairs out
        slopes = sorted([b / a for a, b in zip(dx, dy, strict=True) if a])
    else:
        slopes = sorted(map(truediv, dy, dx))
    k = len(slopes)
    if not k:
        return 0.0
    # The median, inline: this runs tens of thousands of times in a long run.
    return slopes[k // 2] if k % 2 else 0.5 * (slopes[k // 2 - 1] + slopes[k // 2])


@lru_cache(maxsize=16)
def _apart_columns(h: int, t: int) -> tuple[Any, Any, Any]:
    """The columns of the first and second member of every (first group, second group)
    pair of h and t items, and how many places apart the two are within their groups
    (j - i)."""
    np = lazy_numpy()
    pairs = [(i, j) for i in range(h) for j in range(t)]
    return (np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs]),
            np.array([j - i for i, j in pairs]))


@lru_cache(maxsize=16)
def _pair_gaps(n: int) -> list[int]:
    """How many places apart the members of every pair (i < j) of n items are."""
    return [j - i for i in range(n - 1) for j in range(i + 1, n)]


def pair_slopes(ys: list[float]) -> list[float]:
    """The slopes between every pair of `ys` logged at consecutive points, sorted."""
    if len(ys) < 3:
        return [ys[1] - ys[0]] if len(ys) == 2 else []
    first, second = _pair_getters(len(ys))
    return sorted(map(truediv, map(sub, second(ys), first(ys)), _pair_gaps(len(ys))))


def theil_sen_apart(head: list[float], tail: list[float], gap: int,
                    head_slopes: Any) -> float:
    """`theil_sen` of `head` at points 0.. and `tail` at points gap.. (gap at least
    len(head)), given the head's own slopes (`pair_slopes`, as a numpy array: the same
    for every tail): a series' first points against its latest, judged again and again
    as the latest move on. With numpy: the same quotients, so the same median (a zero's
    sign aside: the head's slopes come first)."""
    if len(tail) < 3 or len(head) < 2:
        xs = [float(i) for i in range(len(head))] + [float(gap + j) for j in range(len(tail))]
        return theil_sen(xs, head + tail)
    np = lazy_numpy()
    t, h = np.asarray(tail, dtype=np.float64), np.asarray(head, dtype=np.float64)
    first, second = _pair_columns(len(tail))
    within = (t[second] - t[first]) / (second - first)
    of_head, of_tail, apart = _apart_columns(len(head), len(tail))
    across = (t[of_tail] - h[of_head]) / (apart + gap)
    return _middle(np, np.concatenate((head_slopes, within, across)))


EVEN_LEAST = 16  # fewer points than this are cheaper sorted in Python


def theil_sen_even(ys: list[float]) -> float:
    """`theil_sen` of `ys` at points 0, 1, 2, ..., with numpy from `EVEN_LEAST` points on:
    the same quotients, so the same median (a zero's sign aside), for a slope judged
    again and again as a run goes on."""
    n = len(ys)
    if n < EVEN_LEAST:
        return theil_sen([float(i) for i in range(n)], ys)
    np = lazy_numpy()
    y = np.asarray(ys, dtype=np.float64)
    first, second = _pair_columns(n)
    return _middle(np, (y[second] - y[first]) / (second - first))


def _middle(np: Any, slopes: Any) -> float:
    """The median of a numpy array of slopes, as `theil_sen` takes it."""
    k = len(slopes)
    if k % 2:
        return float(np.partition(slopes, k // 2)[k // 2])
    low, high = np.partition(slopes, (k // 2 - 1, k // 2))[k // 2 - 1 : k // 2 + 1]
    return float(0.5 * (low + high))


def thin(xs: list[float], ys: list[float], most: int) -> tuple[list[float], list[float]]:
    """At most `most` points, each the median of a run of neighbours: keeps Theil–Sen cheap
    when a dense series is compared over a long span."""
    n = len(xs)
    if n <= most:
        return xs, ys
    edges = [n * g // most for g in range(most + 1)]
    return ([median(xs[a:b]) for a, b in pairwise(edges)],
            [median(ys[a:b]) for a, b in pairwise(edges)])


def _small_medians(values: list[float], size: int) -> list[float] | None:
    """The medians of consecutive buckets of one or two points (the median of two is
    their mean, whichever comes first), or None where a value is not finite."""
    try:
        if not math.isfinite(sum(values)):
            return None
    except TypeError:  # a missing value
        return None
    if size == 1:
        return values
    return [0.5 * (a + b) for a, b in zip(values[::2], values[1::2], strict=True)]


class Buckets:
    """Groups a series into buckets of `size` points, keeping each bucket's median step
    and median value for the last `keep` buckets: the trend detectors work on these."""

    def __init__(self, size: int, keep: int, state: dict[str, Any] | None = None) -> None:
        self.size, self.keep = max(1, int(size)), max(2, int(keep))
        st = state or {}
        self.xs: list[float] = list(st.get("xs", []))[-self.keep :]
        self.ys: list[float] = list(st.get("ys", []))[-self.keep :]
        self.px: list[float] = st.get("px", [])
        self.py: list[float] = st.get("py", [])
        self.first: float | None = st.get("first")
        # The window of the latest judgement that held (`window_levels`), taken as the
        # batch that judged it ends: a message states the change it saw between levels,
        # after later batches have dropped the window's first buckets.
        self.held: dict[str, float] | None = st.get("hw")
        self.base = len(self.xs)  # buckets held before the current batch
        self.closed = int(st.get("n", 0))  # buckets completed over the run

    def feed(self, steps: list[int], values: list[float]) -> list[int]:
        """Add points; returns, per completed bucket, the index of the point closing it."""
        closed: list[int] = []
        size, px, py = self.size, self.px, self.py
        if len(self.xs) > self.keep:  # the buckets this batch adds are all kept
            del self.xs[: -self.keep]
            del self.ys[: -self.keep]
        self.base = len(self.xs)
        m, i = len(values), 0
        if px:  # finish the bucket the last batch left open
            i = min(size - len(px), m)
            px.extend(steps[:i])
            py.extend(values[:i])
            if len(px) == size:
                self._add([float(px[size // 2])], [py], [i - 1], closed)
                px.clear()
                py.clear()
        end = i + (m - i) // size * size
        if end > i:
            starts = range(i, end, size)
            # Steps arrive in order, so a bucket's middle step is its median step.
            xs = [float(x) for x in steps[i + size // 2 : end : size]]
            ends = [k + size - 1 for k in starts]
            ys = _small_medians(values[i:end], size) if size <= 2 else None
            if ys is not None:
                self._take(xs, ys, ends, closed)
            else:
                self._add(xs, [values[k : k + size] for k in starts], ends, closed)
        px.extend(steps[end:])
        py.extend(values[end:])
        return closed

    def upto(self, j: int) -> tuple[list[float], list[float]]:
        """The last `keep` buckets as they stood when the batch's j-th new bucket closed."""
        hi = self.base + j + 1
        lo = max(0, hi - self.keep)
        return self.xs[lo:hi], self.ys[lo:hi]

    def hold(self, j: int) -> None:
        """Keep the levels of `upto(j)`'s window, whose judgement held."""
        self.held = window_levels(*self.upto(j))

    def marks(self, closed: list[int], js: Iterable[int]) -> list[tuple[int, float]]:
        """For each j of `js`, the index in the batch of the point that closed its j-th new
        bucket (`closed`) and the first step of `upto(j)`'s window."""
        xs, lo = self.xs, self.base + 1 - self.keep
        return [(closed[j], xs[j + lo if j + lo > 0 else 0]) for j in js]

    def _add(self, xs: list[float], groups: list[list[float]], ends: list[int],
             closed: list[int]) -> None:
        """Append the medians of whole buckets (non-finite values left out)."""
        try:
            finite = math.isfinite(sum(map(sum, groups)))
        except TypeError:
            finite = False
        if not finite:
            kept = [(x, [v for v in g if v is not None and v - v == 0], e)
                    for x, g, e in zip(xs, groups, ends, strict=True)]
            kept = [k for k in kept if k[1]]
            xs, groups, ends = [k[0] for k in kept], [k[1] for k in kept], [k[2] for k in kept]
            ys = [median(g) for g in groups]
        elif self.size == 1:
            ys = [g[0] for g in groups]
        else:
            half = self.size // 2
            srt = list(map(sorted, groups))
            ys = ([q[half] for q in srt] if self.size % 2
                  else [0.5 * (q[half - 1] + q[half]) for q in srt])
        self._take(xs, ys, ends, closed)

    def _take(self, xs: list[float], ys: list[float], ends: list[int],
              closed: list[int]) -> None:
        """Append whole buckets' median steps and values."""
        if ys and self.first is None:
            self.first = ys[0]
        self.xs.extend(xs)
        self.ys.extend(ys)
        self.closed += len(ends)
        closed.extend(ends)

    def recent(self) -> tuple[list[float], list[float]]:
        """The last `keep` buckets' steps and values."""
        return self.xs[-self.keep :], self.ys[-self.keep :]

    def between(self, lo: float, hi: float) -> tuple[list[float], list[float]]:
        a, b = bisect_left(self.xs, lo), bisect_right(self.xs, hi)
        return self.xs[a:b], self.ys[a:b]

    def state(self) -> dict[str, Any]:
        xs, ys = self.recent()
        st = {"xs": xs, "ys": ys, "px": self.px, "py": self.py, "n": self.closed,
              "first": self.first}
        if self.held is not None:
            st["hw"] = self.held
        return st


def window_levels(xs: list[float], ys: list[float]) -> dict[str, float] | None:
    """Where a window of bucket medians (or points) started and ended, and its lowest
    and highest: the levels a message states a change between. Never the decision's
    effect, which is the Theil-Sen change over the window's median level: an entropy
    falling from 0.6 to 0.06 has a median of 0.3, and "fell 107%" of that."""
    if not ys:
        return None
    low = min(range(len(ys)), key=ys.__getitem__)
    high = max(range(len(ys)), key=ys.__getitem__)
    return {"from_step": xs[0], "from": ys[0], "to_step": xs[-1], "to": ys[-1],
            "low_step": xs[low], "low": ys[low], "high_step": xs[high], "high": ys[high]}


def effect(xs: list[float], ys: list[float], relative: bool, floor: float) -> float:
    """Change over the window implied by the Theil–Sen slope, absolute or relative to
    the window's median level (never below `floor`, so a series near zero stays sane).
    A detector decides on it; a message states `window_levels` instead."""
    change = theil_sen(xs, ys) * (xs[-1] - xs[0])
    if not relative:
        return bounded(change)
    return bounded(change / max(abs(median(ys)), floor))


@lru_cache(maxsize=64)
def _pair_columns(n: int) -> tuple[Any, Any]:
    """The columns of the first and second member of every pair (i < j) of n items, in
    `theil_sen`'s order."""
    np = lazy_numpy()
    pairs = [(i, j) for i in range(n - 1) for j in range(i + 1, n)]
    return np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs])


AHEAD_LEAST = 16  # fewer judgements than this (a live batch) are not worth numpy's start


def window_effects(buckets: Buckets, js: list[int], relative: bool,
                   floor: float) -> dict[int, float]:
    """`effect` of each window `buckets.upto(j)` for j in `js`, taken for all of them at
    once with numpy where there are enough (a whole file, a long batch): the same
    differences, quotients and products as `effect`, and stable sorts that keep equal
    slopes in `theil_sen`'s order, so the same floats to the bit. Only whole windows
    without repeated steps are taken; the caller computes the rest itself."""
    keep = buckets.keep
    full = [(j, buckets.base + j + 1 - keep) for j in js if buckets.base + j + 1 >= keep]
    if len(full) < AHEAD_LEAST or keep < 3:
        return {}
    np = lazy_numpy()
    xs = np.asarray(buckets.xs, dtype=np.float64)
    ys = np.asarray(buckets.ys, dtype=np.float64)
    return _row_effects(np, xs, ys, full, keep, relative, floor)


def span_effects(buckets: Buckets, spans: dict[int, tuple[float, float]], relative: bool,
                 floor: float, most: int) -> dict[int, float]:
    """`effect(*thin(*buckets.between(lo, hi), most), relative, floor)` for each (lo, hi)
    of `spans`, taken at once as `window_effects` takes them, where the span holds 3 to
    `most` buckets (none to thin) and the buckets' steps only rise; the caller computes
    the rest itself."""
    if len(spans) < AHEAD_LEAST or len(buckets.xs) < 3:
        return {}
    np = lazy_numpy()
    xs = np.asarray(buckets.xs, dtype=np.float64)
    if not (xs[1:] > xs[:-1]).all():  # a repeated or earlier step: bisect's own answer
        return {}
    ys = np.asarray(buckets.ys, dtype=np.float64)
    keys = list(spans)
    bounds = np.array([spans[j] for j in keys], dtype=np.float64)
    los = np.searchsorted(xs, bounds[:, 0], side="left").tolist()
    widths = (np.searchsorted(xs, bounds[:, 1], side="right") - los).tolist()
    out: dict[int, float] = {}
    for width in set(widths):
        if 3 <= width <= most:
            rows = [(j, lo) for j, lo, w in zip(keys, los, widths, strict=True) if w == width]
            out.update(_row_effects(np, xs, ys, rows, width, relative, floor))
    return out


def _row_effects(np: Any, xs: Any, ys: Any, rows: list[tuple[int, int]], width: int,
                 relative: bool, floor: float) -> dict[int, float]:
    """`effect` of the window xs[start : start + width] (and ys's) of each (key, start) of
    `rows`, by key; a window with a repeated step is left out."""
    at = np.array([start for _, start in rows])[:, None] + np.arange(width)[None, :]
    wx, wy = xs[at], ys[at]
    first, second = _pair_columns(width)
    dx = wx[:, second] - wx[:, first]
    good = (dx != 0).all(axis=1)  # a repeated step drops pairs: left to `effect`
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        slopes = np.sort((wy[:, second] - wy[:, first]) / dx, axis=1, kind="stable")
        k = slopes.shape[1]
        mid = (slopes[:, k // 2] if k % 2
               else 0.5 * (slopes[:, k // 2 - 1] + slopes[:, k // 2]))
        change = mid * (wx[:, -1] - wx[:, 0])
        if relative:
            sy = np.sort(wy, axis=1, kind="stable")
            level = (sy[:, width // 2] if width % 2
                     else 0.5 * (sy[:, width // 2 - 1] + sy[:, width // 2]))
            change = change / np.maximum(np.abs(level), floor)
    return {j: bounded(c) for (j, _), c, ok in zip(rows, change.tolist(), good.tolist(),
                                                    strict=True) if ok}


def window_change_noises(points: list[float], ends: list[int], width: int) -> list[float | None]:
    """`change_noise(points[end - width : end])` for each end of `ends` (at least `width`),
    taken at once with numpy: the same differences and the same medians (the middle
    values themselves), so the same floats. None where the median absolute deviation is
    0, which `change_noise` measures otherwise."""
    if not ends or width < 3:
        return [None] * len(ends)
    np = lazy_numpy()
    rows = np.lib.stride_tricks.sliding_window_view(
        np.asarray(points, dtype=np.float64), width)[np.asarray(ends) - width]
    diffs = rows[:, 1:] - rows[:, :-1]
    center = _row_medians(np, diffs)
    dev = _row_medians(np, np.abs(diffs - center[:, None]))
    return [1.4826 * d / math.sqrt(2) if d > 0 else None for d in dev.tolist()]


def window_point_noises(points: list[float], ends: list[int], width: int) -> list[float]:
    """`point_noise(points[end - width : end])` for each end of `ends` (at least `width`,
    over finite floats), taken at once with numpy: the same differences, medians and
    deviations, summed by Python's own `sum`, so the same floats. Empty where a change
    is not finite (an overflow, whose median numpy orders otherwise)."""
    if not ends or width < 2:
        return []
    np = lazy_numpy()
    rows = np.lib.stride_tricks.sliding_window_view(
        np.asarray(points, dtype=np.float64), width)[np.asarray(ends) - width]
    with np.errstate(over="ignore", invalid="ignore"):
        changes = rows[:, 1:] - rows[:, :-1]
    if not np.isfinite(changes).all():
        return []
    dev = np.abs(changes - _row_medians(np, changes)[:, None])
    root2, n = math.sqrt(2), width - 1
    return [max(1.4826 * m, 1.2533 * sum(d) / n) / root2
            for m, d in zip(_row_medians(np, dev).tolist(), dev.tolist(), strict=True)]


def window_medians(values: list[float], width: int) -> Any:
    """The median of each run of `width` consecutive `values` (finite floats), as `median`
    takes it (the middle values themselves, or 0.5 * their sum), as a numpy array."""
    np = lazy_numpy()
    rows = np.lib.stride_tricks.sliding_window_view(np.asarray(values, dtype=np.float64),
                                                    width)
    return _row_medians(np, rows)


def only_floats(*lists: list[Any]) -> bool:
    """Whether every item of `lists` is a float: numpy then computes what Python does."""
    return all(set(map(type, items)) <= {float} for items in lists)


def _row_medians(np: Any, rows: Any) -> Any:
    """The median of each row, as `median` takes it."""
    n = rows.shape[1]
    if n % 2:
        return np.partition(rows, n // 2, axis=1)[:, n // 2]
    part = np.partition(rows, (n // 2 - 1, n // 2), axis=1)
    return 0.5 * (part[:, n // 2 - 1] + part[:, n // 2])


def change_noise(ys: list[float]) -> float:
    """The noise of a point of `ys`: the spread of its point-to-point changes around the
    typical one (a steady trend is no noise) over the square root of 2 (each change
    holds two points' noise). By the median absolute deviation alone, so a collapse in
    one step (a validation score 0.70 -> 0.64 -> 0.0) is the fall, not noise; by the
    mean one only where that is 0 (a two-valued series)."""
    diffs = [b - a for a, b in pairwise(ys)]
    if not diffs:
        return 0.0
    center = median(diffs)
    dev = median([abs(x - center) for x in diffs])
    return (1.4826 * dev if dev > 0 else robust_sd(diffs, center)) / math.sqrt(2)


def beyond_noise(ys: list[float], change: float, z: float, relative: bool,
                 floor: float, noise: float | None = None) -> bool:
    """Whether a window's `change` (as `effect` gives it) exceeds `z` standard errors of
    such a change in its points' own noise (`change_noise` of `ys`, or `noise` where the
    caller measured it on the points the window's medians stand for). A straight line's
    change over n evenly spaced points has a standard error of that noise times
    (n - 1) * sqrt(12 / (n (n^2 - 1))), 1.2 of it over 6 points. A held-out score
    averaged over a few samples jumps by a fifth between validations; a fall of two
    such jumps over six validations is no fall. 0 judges nothing."""
    if z <= 0 or len(ys) < 3:
        return True
    return abs(change) >= z * change_error(ys, relative, floor, noise)


def change_error(ys: list[float], relative: bool, floor: float,
                 noise: float | None = None) -> float:
    """The standard error of a window's change (as `effect` gives it) in its points' own
    noise (`change_noise` of `ys` unless given): see `beyond_noise`."""
    n = len(ys)
    if n < 3:
        return 0.0
    if noise is None:
        noise = change_noise(ys)
    error = noise * (n - 1) * math.sqrt(12.0 / (n * (n * n - 1)))
    return error / max(abs(median(ys)), floor) if relative else error


def point_noise(points: list[float]) -> float:
    """A series' noise per point: the robust spread of its point-to-point changes around
    the typical one (a steady trend is no noise) over the square root of 2 (each change
    holds two points' noise)."""
    changes = [b - a for a, b in pairwise(points)]
    return robust_sd(changes, median(changes)) / math.sqrt(2) if changes else 0.0


def median_gap_error(noise: float, k: int) -> float:
    """The standard error of a difference of two `k`-point medians of a series whose
    points carry `noise`: a median's error is 1.2533 times a mean's."""
    return 1.2533 * noise * math.sqrt(2 / max(1, k))


MOST_MEDIAN = 16  # the most points a flat-loss rule's median takes; noisier is not judged


def mean_gap(first: list[float], latest: list[float]) -> tuple[float, float]:
    """The latest points' mean minus the first's, and the standard error of that
    difference with each side's error from its own spread (Welch's): a series of mostly
    one value (a reward of 0 on most steps) has next to no point-to-point noise, but its
    halves' spreads say how far their means may differ by chance."""
    def mean_var(xs: list[float]) -> tuple[float, float]:
        m = sum(xs) / len(xs)
        return m, sum((x - m) ** 2 for x in xs) / max(1, len(xs) - 1)
    (ma, va), (mb, vb) = mean_var(first), mean_var(latest)
    return mb - ma, math.sqrt(va / len(first) + vb / len(latest))


def median_points(noise: float, change: float, z: float, least: int) -> int | None:
    """How many points two medians need for their difference to show `change` (in the
    series' units) at `z` standard errors when each point carries `noise`: `least` at
    least; None where that takes more than MOST_MEDIAN (too noisy to judge), as where the
    noise or the change is no number (a spread of values near the double's limit, such
    as 1e308 next to 2, overflows)."""
    error = median_gap_error(noise, 1)  # of two single points
    need = (z * error / max(change, 1e-12)) ** 2
    if not math.isfinite(need) or need > MOST_MEDIAN:
        return None
    k = max(least, math.ceil(need))
    return k if k <= MOST_MEDIAN else None


class _Judged(Protocol):
    verdict: bool
    stride: int
    marks: list[tuple[int, float]]

    def judge(self, j: int) -> bool: ...


class Onsets:
    """Remembers, for the judgements of the last batch, the first step of the window
    each one looked at: a trend finding starts where its window does."""

    marks: list[tuple[int, float]]

    def onset(self, i: int) -> int | None:
        for index, first_step in reversed(self.marks):
            if index <= i:
                return int(first_step)
        return None


def judge(buckets: Buckets, steps: list[int], values: list[float], who: _Judged) -> list[bool]:
    """Per-point verdicts for a bucketed detector: each point carries the verdict of the
    last judgement made at or before it; judgements happen as buckets complete."""
    out: list[bool] = []
    start = 0
    first = buckets.closed
    take = getattr(who, "take_upto", None)  # a detector that also keeps the points
    closed = buckets.feed(steps, values)
    # the buckets judged: every stride-th over the run
    js = range((-first - 1) % who.stride, len(closed), who.stride)
    look = getattr(who, "look_ahead", None)  # a detector that takes the batch's windows
    if look is not None:  # at once
        look(list(js), closed)
    # the judgements the look ahead found to hold nothing, and to change nothing it does
    # not note itself: they are not made
    idle = getattr(who, "idle", ())
    held = None  # the latest judgement that held
    for j in js:
        end = closed[j]
        out += [who.verdict] * (end - start)
        start = end
        if j in idle:
            who.verdict = False
            continue
        if take is not None:  # the points up to here (cumulative: those skipped too)
            take(end)
        who.verdict = who.judge(j)
        if who.verdict:
            held = j
    out += [who.verdict] * (len(values) - start)
    who.marks = buckets.marks(closed, js)
    if held is not None:  # the batch's buckets are all still there
        buckets.hold(held)
    return out
