"""Incremental detectors shared by the health rules.

Each detector takes the new points of a series in batches and answers, for every new
point, whether its condition holds there. State is bounded (a window, a few bucket
medians), so the cost of a batch is proportional to its size and never to the run's
history, and every detector round-trips through a JSON-able dict for persistence.

Hot paths use C-implemented builtins (list comprehensions, `itertools.accumulate`,
`map`) over whole batches instead of a Python call per point: the engine evaluates
every rule on 100,000 steps in a couple of seconds this way.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections import deque
from functools import lru_cache
from itertools import accumulate, pairwise
from operator import itemgetter, sub, truediv
from typing import Any, Protocol

INF = math.inf


def median(values: list[float]) -> float:
    """Median of a non-empty list (no copy of the caller's order is kept)."""
    s = sorted(values)
    n = len(s)
    mid = n // 2
    return s[mid] if n % 2 else 0.5 * (s[mid - 1] + s[mid])


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
        slopes = [b / a for a, b in zip(dx, dy, strict=True) if a]
    else:
        slopes = list(map(truediv, dy, dx))
    return median(slopes) if slopes else 0.0


def thin(xs: list[float], ys: list[float], most: int) -> tuple[list[float], list[float]]:
    """At most `most` points, each the median of a run of neighbours: keeps Theil–Sen cheap
    when a dense series is compared over a long span."""
    n = len(xs)
    if n <= most:
        return xs, ys
    edges = [n * g // most for g in range(most + 1)]
    return ([median(xs[a:b]) for a, b in pairwise(edges)],
            [median(ys[a:b]) for a, b in pairwise(edges)])


class KOfN:
    """Turns per-point hits into "at least k hits among the last n points"."""

    def __init__(self, k: int, n: int, tail: list[int] | None = None) -> None:
        self.k = max(1, int(k))
        self.n = max(self.k, int(n))
        self.tail = tail or []  # the last n-1 hit flags, carried across batches

    def feed(self, hits: list[int]) -> list[bool]:
        m = len(hits)
        if not m:
            return []
        n, tail = self.n, self.tail
        full = tail + hits if tail else hits
        pref = list(accumulate(full, initial=0))
        t = len(tail)
        # Window ending at new point i spans full[max(0, t+i-n+1) : t+i+1].
        hi = pref[t + 1 : t + 1 + m]
        z = max(0, min(m, n - 1 - t))  # points whose window starts at the beginning
        lo = [0] * z + pref[t + 1 + z - n : t + 1 + m - n] if m > z else [0] * m
        counts = list(map(sub, hi, lo))
        self.tail = full[-(n - 1) :] if n > 1 else []
        return list(map(self.k.__le__, counts))

    def state(self) -> dict[str, Any]:
        return {"tail": self.tail}


class Threshold:
    """Sustained threshold: a value above `above` (or below `below`) on k of the last n points.

    Non-finite values never count as hits (the non-finite rule reports them). Points
    before `min_points` have been seen never trigger, which skips warm-up noise.
    """

    def __init__(
        self,
        above: float | None = None,
        below: float | None = None,
        k: int = 1,
        n: int = 1,
        min_points: int = 0,
        state: dict[str, Any] | None = None,
    ) -> None:
        self.above, self.below = above, below
        st = state or {}
        self.window = KOfN(k, n, st.get("tail"))
        self.seen = int(st.get("seen", 0))
        self.min_points = int(min_points)

    def feed(self, values: list[float]) -> list[bool]:
        a, b = self.above, self.below
        if a is not None and b is not None:
            hits = [1 if (v > a or v < b) and v - v == 0 else 0 for v in values]
        elif a is not None:
            hits = [1 if v > a and v != INF else 0 for v in values]
        elif b is not None:
            hits = [1 if v < b and v != -INF else 0 for v in values]
        else:
            hits = [0] * len(values)
        skip = self.min_points - self.seen
        if skip > 0:
            hits[:skip] = [0] * min(skip, len(hits))
        self.seen += len(values)
        return self.window.feed(hits)

    def state(self) -> dict[str, Any]:
        return {"tail": self.window.tail, "seen": self.seen}


class Spike:
    """A value `factor` times the rolling median of the previous `window` points (or,
    with `drop` < 1, below `drop` times it). The median is refreshed every `BLOCK`
    points, which keeps the per-point cost to one comparison. A spike keeps its finding
    open for `hold` points so that a burst of spikes reads as one finding."""

    BLOCK = 32

    def __init__(
        self,
        factor: float | None = 10.0,
        drop: float | None = None,
        window: int = 200,
        min_history: int = 10,
        floor: float = 0.0,
        hold: int = 5,
        state: dict[str, Any] | None = None,
    ) -> None:
        self.factor, self.drop, self.floor = factor, drop, floor
        self.size, self.min_history = max(1, int(window)), int(min_history)
        st = state or {}
        self.history: list[float] = list(st.get("history", []))  # finite values, oldest first
        self.window = KOfN(1, hold, st.get("tail"))
        # The median in use and the point count at which it is next refreshed: counted
        # over the run, so batches of any size give the same verdicts.
        self.med: float | None = st.get("med")
        self.seen = int(st.get("seen", 0))
        self.refresh_at = int(st.get("at", 0))

    def feed(self, values: list[float]) -> list[bool]:
        hits: list[int] = []
        hist, size = self.history, self.size
        factor, drop, floor = self.factor, self.drop, self.floor
        i, m = 0, len(values)
        while i < m:
            if self.seen >= self.refresh_at:
                self.med = median(hist) if len(hist) >= max(1, self.min_history) else None
                # Short blocks while the history fills, so early spikes are judged against
                # nearly every point before them.
                n = len(hist)
                block_len = self.BLOCK if n >= size else max(1, min(self.BLOCK, n))
                self.refresh_at = self.seen + block_len
            block = values[i : i + self.refresh_at - self.seen]
            i += len(block)
            self.seen += len(block)
            med = self.med
            if med is not None:
                hi = max(factor * med, floor) if factor is not None else INF
                lo = drop * med if drop is not None else -INF
                hits.extend([1 if (v > hi or v < lo) and v - v == 0 else 0 for v in block])
            else:
                hits.extend([0] * len(block))
            try:
                finite = math.isfinite(sum(block))
            except TypeError:
                finite = False
            hist.extend(block if finite else [v for v in block if v - v == 0])
            if len(hist) > size:
                del hist[: len(hist) - size]
        return self.window.feed(hits)

    def reference(self) -> float | None:
        """The current rolling median, for the finding's evidence."""
        return median(self.history) if self.history else None

    def state(self) -> dict[str, Any]:
        return {"history": self.history, "tail": self.window.tail, "med": self.med,
                "seen": self.seen, "at": self.refresh_at}


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
                self._add([px[size // 2]], [py], [i - 1], closed)
                px.clear()
                py.clear()
        end = i + (m - i) // size * size
        if end > i:
            starts = range(i, end, size)
            # Steps arrive in order, so a bucket's middle step is its median step.
            self._add([float(x) for x in steps[i + size // 2 : end : size]],
                      [values[k : k + size] for k in starts],
                      [k + size - 1 for k in starts], closed)
        px.extend(steps[end:])
        py.extend(values[end:])
        return closed

    def upto(self, j: int) -> tuple[list[float], list[float]]:
        """The last `keep` buckets as they stood when the batch's j-th new bucket closed."""
        hi = self.base + j + 1
        lo = max(0, hi - self.keep)
        return self.xs[lo:hi], self.ys[lo:hi]

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
        return {"xs": xs, "ys": ys, "px": self.px, "py": self.py, "n": self.closed,
                "first": self.first}


def effect(xs: list[float], ys: list[float], relative: bool, floor: float) -> float:
    """Change over the window implied by the Theil–Sen slope, absolute or relative to
    the window's median level (never below `floor`, so a series near zero stays sane)."""
    change = theil_sen(xs, ys) * (xs[-1] - xs[0])
    if not relative:
        return change
    return change / max(abs(median(ys)), floor)


class _Judged(Protocol):
    verdict: bool
    stride: int

    def judge(self, j: int) -> bool: ...


def judge(buckets: Buckets, steps: list[int], values: list[float], who: _Judged) -> list[bool]:
    """Per-point verdicts for a bucketed detector: each point carries the verdict of the
    last judgement made at or before it; judgements happen as buckets complete."""
    out: list[bool] = []
    start = 0
    first = buckets.closed
    for j, end in enumerate(buckets.feed(steps, values)):
        if (first + j + 1) % who.stride:
            continue
        out.extend([who.verdict] * (end - start))
        who.verdict = who.judge(j)
        start = end
    out.extend([who.verdict] * (len(values) - start))
    return out


def trend_holds(direction: str, eff: float, min_effect: float, holding: bool = False) -> bool:
    """Whether an effect shows the trend. A trend that already holds is released only
    when the effect clearly leaves it (hysteresis), so noise near the threshold does not
    open and resolve findings over and over."""
    if direction == "flat":
        return abs(eff) < (3.0 * min_effect if holding else min_effect)
    edge = 0.5 * min_effect if holding else min_effect
    return eff >= edge if direction == "up" else eff <= -edge


class Trend:
    """Robust trend over the last `window` points: Theil–Sen on bucket medians, with a
    minimum effect size (the change across the window) before it counts.

    Evaluated when a bucket completes (every window/8 points), so a batch costs one small
    Theil–Sen per bucket; between evaluations each point carries the last verdict."""

    BUCKETS = 8

    def __init__(
        self,
        direction: str,
        window: int = 64,
        min_effect: float = 0.1,
        relative: bool = True,
        floor: float = 1e-6,
        min_buckets: int = 4,
        state: dict[str, Any] | None = None,
    ) -> None:
        self.direction, self.min_effect = direction, min_effect
        self.relative, self.floor = relative, floor
        nb = min(self.BUCKETS, max(2, int(window)))
        self.buckets = Buckets(max(1, int(window) // nb), nb, (state or {}).get("b"))
        self.min_buckets = max(2, min(int(min_buckets), nb))
        # Judged every quarter window: a trend needs a window to show, and this halves
        # the Theil–Sen work on dense series.
        self.stride = max(1, nb // 4)
        self.verdict: bool = bool((state or {}).get("v", False))
        self.last_effect: float = float((state or {}).get("e", 0.0))

    def feed(self, steps: list[int], values: list[float]) -> list[bool]:
        return judge(self.buckets, steps, values, self)

    def judge(self, j: int) -> bool:
        xs, ys = self.buckets.upto(j)
        if len(xs) < self.min_buckets:
            return False
        self.last_effect = effect(xs, ys, self.relative, self.floor)
        return trend_holds(self.direction, self.last_effect, self.min_effect, self.verdict)

    def state(self) -> dict[str, Any]:
        return {"b": self.buckets.state(), "v": self.verdict, "e": self.last_effect}


class NoProgress:
    """A series that has not moved by `min_change` (relative) from where it started,
    judged on bucket medians after `warmup` points: "loss is not falling"."""

    stride = 1

    def __init__(
        self,
        direction: str = "down",
        min_change: float = 0.05,
        warmup: int = 20,
        bucket: int = 5,
        state: dict[str, Any] | None = None,
    ) -> None:
        self.direction, self.min_change = direction, min_change
        st = state or {}
        self.buckets = Buckets(bucket, 2, st.get("b"))
        self.warmup_buckets = max(2, -(-int(warmup) // self.buckets.size))
        self.verdict = bool(st.get("v", False))
        self.last_effect = float(st.get("e", 0.0))

    def feed(self, steps: list[int], values: list[float]) -> list[bool]:
        return judge(self.buckets, steps, values, self)

    def judge(self, j: int) -> bool:
        b = self.buckets
        if b.closed - len(b.xs) + b.base + j + 1 < self.warmup_buckets or b.first is None:
            return False
        first, now = b.first, b.upto(j)[1][-1]
        self.last_effect = (now - first) / max(abs(first), 1e-12)
        if self.direction == "down":
            return self.last_effect > -self.min_change
        return self.last_effect < self.min_change

    def state(self) -> dict[str, Any]:
        return {"b": self.buckets.state(), "v": self.verdict, "e": self.last_effect}


class Divergence:
    """Two series trending against each other over the same steps, e.g. training accuracy
    rising while validation accuracy falls. Judged whenever series `b` (the one the
    finding is about) completes a bucket, using series `a`'s buckets over b's span."""

    def __init__(
        self,
        a_dir: str,
        b_dir: str,
        window: int = 6,
        a_effect: float = 0.05,
        b_effect: float = 0.05,
        a_bucket: int = 5,
        relative: bool = False,
        state: dict[str, Any] | None = None,
    ) -> None:
        st = state or {}
        self.a_dir, self.b_dir = a_dir, b_dir
        self.a_effect, self.b_effect, self.relative = a_effect, b_effect, relative
        nb = min(Trend.BUCKETS, max(2, int(window)))
        self.b = Buckets(max(1, int(window) // nb), nb, st.get("b"))
        self.a = Buckets(a_bucket, 512, st.get("a"))
        self.stride = max(1, nb // 4)
        self.verdict = bool(st.get("v", False))
        self.last = tuple(st.get("e", (0.0, 0.0)))

    def feed_a(self, steps: list[int], values: list[float]) -> None:
        self.a.feed(steps, values)

    def feed(self, steps: list[int], values: list[float]) -> list[bool]:
        return judge(self.b, steps, values, self)

    def judge(self, j: int) -> bool:
        bx, by = self.b.upto(j)
        if len(bx) < 3:
            return False
        eb = effect(bx, by, self.relative, 1e-6)
        self.last = (self.last[0], eb)
        if not trend_holds(self.b_dir, eb, self.b_effect, self.verdict):
            return False  # the judged series alone settles it: skip the reference's trend
        ax, ay = thin(*self.a.between(bx[0], bx[-1]), Trend.BUCKETS)
        if len(ax) < 3:
            return False
        ea = effect(ax, ay, self.relative, 1e-6)
        self.last = (ea, eb)
        return trend_holds(self.a_dir, ea, self.a_effect, self.verdict)

    def state(self) -> dict[str, Any]:
        return {"a": self.a.state(), "b": self.b.state(), "v": self.verdict,
                "e": list(self.last)}


class NonFinite:
    """NaN or ±Infinity. A whole batch is summed first: a finite sum proves every value
    finite, so the common case costs one C-level pass."""

    def __init__(self, state: dict[str, Any] | None = None) -> None:
        del state

    def feed(self, values: list[float]) -> list[bool]:
        try:
            if math.isfinite(sum(values)):
                return [False] * len(values)
        except TypeError:
            pass
        return [v is None or v - v != 0 for v in values]

    def state(self) -> dict[str, Any]:
        return {}


class Stall:
    """A run that stopped reporting: no new point for `factor` times its usual interval
    between steps, and never less than `min_seconds`."""

    def __init__(
        self, factor: float = 10.0, min_seconds: float = 600.0, state: dict[str, Any] | None = None
    ) -> None:
        st = state or {}
        self.factor, self.min_seconds = factor, min_seconds
        self.last_ts: float | None = st.get("last_ts")
        self.last_step: int | None = st.get("last_step")
        self.intervals: deque[float] = deque(st.get("iv", []), maxlen=64)

    def feed(self, steps: list[int], ts: list[float]) -> None:
        # Only the tail of a big batch matters for the typical interval.
        for step, t in zip(steps[-256:], ts[-256:], strict=True):
            last = self.last_ts
            if last is not None and step != self.last_step and t > last:
                self.intervals.append(t - last)
            if self.last_ts is None or t >= self.last_ts:
                self.last_ts, self.last_step = t, step

    def limit(self) -> float:
        typical = median(list(self.intervals)) if self.intervals else 0.0
        return max(self.min_seconds, self.factor * typical)

    def stalled(self, now: float) -> bool:
        return self.last_ts is not None and now - self.last_ts > self.limit()

    def state(self) -> dict[str, Any]:
        return {"last_ts": self.last_ts, "last_step": self.last_step,
                "iv": list(self.intervals)}
