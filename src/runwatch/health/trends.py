"""Trend detectors shared by the health rules: Theil–Sen slopes on bucket medians, "has
not moved since the start", and two series diverging.

A series is grouped into buckets of a few points; each completed bucket contributes
its median step and value, and the detectors judge on those, so a batch costs one
small Theil–Sen per bucket whatever the run's length.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from functools import lru_cache
from itertools import pairwise
from operator import itemgetter, sub, truediv
from typing import Any, Protocol

from runwatch.health.detectors import median, robust_sd


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


def thin(xs: list[float], ys: list[float], most: int) -> tuple[list[float], list[float]]:
    """At most `most` points, each the median of a run of neighbours: keeps Theil–Sen cheap
    when a dense series is compared over a long span."""
    n = len(xs)
    if n <= most:
        return xs, ys
    edges = [n * g // most for g in range(most + 1)]
    return ([median(xs[a:b]) for a, b in pairwise(edges)],
            [median(ys[a:b]) for a, b in pairwise(edges)])


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


def median_points(noise: float, change: float, z: float, least: int) -> int | None:
    """How many points two medians need for their difference to show `change` (in the
    series' units) at `z` standard errors when each point carries `noise`: `least` at
    least; None where that takes more than MOST_MEDIAN (too noisy to judge)."""
    error = median_gap_error(noise, 1)  # of two single points
    k = max(least, math.ceil((z * error / max(change, 1e-12)) ** 2))
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
    who.marks = []
    take = getattr(who, "take_upto", None)  # a detector that also keeps the points
    for j, end in enumerate(buckets.feed(steps, values)):
        if take is not None:
            take(end)
        if (first + j + 1) % who.stride:
            continue
        out.extend([who.verdict] * (end - start))
        who.verdict = who.judge(j)
        window = buckets.upto(j)[0]
        if window:
            who.marks.append((end, window[0]))
        start = end
    out.extend([who.verdict] * (len(values) - start))
    return out


def trend_holds(direction: str, eff: float, min_effect: float, holding: bool = False) -> bool:
    """Whether an effect shows the trend. A trend that already holds is released only
    when the effect clearly leaves it (hysteresis), so noise near the threshold does not
    open and resolve findings over and over."""
    if direction == "flat":
        return abs(eff) < (3.0 * min_effect if holding else min_effect)
    if direction == "not_up":  # flat or falling: has not risen by min_effect
        return eff < (3.0 * min_effect if holding else min_effect)
    edge = 0.5 * min_effect if holding else min_effect
    return eff >= edge if direction == "up" else eff <= -edge


class Trend(Onsets):
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
        recent_z: float = 0.0,
        noise_z: float = 0.0,
        state: dict[str, Any] | None = None,
    ) -> None:
        self.direction, self.min_effect = direction, min_effect
        # With noise_z, a rise or fall holds only beyond noise_z widths of the window's
        # point-to-point noise (beyond_noise): where a bucket holds several points, the
        # noise is measured on the points themselves (a window's few medians measure it
        # badly: seven changes can all be small by chance) and scaled to a bucket's median.
        self.noise_z = noise_z
        self.relative, self.floor = relative, floor
        nb = min(self.BUCKETS, max(2, int(window)))
        self.buckets = Buckets(max(1, int(window) // nb), nb, (state or {}).get("b"))
        # With recent_z, a trend holds only while the latest half of the window still
        # moves its way (by half the rate and by recent_z noise widths): a series that
        # rose once and settled (a KL held by its penalty) has stopped trending.
        self.recent_z = recent_z
        self.keeps = bool(recent_z or (noise_z and self.buckets.size > 1))
        self.size = nb * self.buckets.size
        self.points: list[list[float]] = [list(p) for p in (state or {}).get("p", [])]
        self._pending: tuple[list[int], list[float]] = ([], [])
        self._fed = 0
        self.min_buckets = max(2, min(int(min_buckets), nb))
        # Judged every quarter window: a trend needs a window to show, and this halves
        # the Theil–Sen work on dense series.
        self.stride = max(1, nb // 4)
        self.verdict: bool = bool((state or {}).get("v", False))
        self.marks: list[tuple[int, float]] = []
        self.last_effect: float = float((state or {}).get("e", 0.0))
        # The effect of the last judgement that held: what a finding reports, also
        # after the trend has gone (a resolved finding describes what held, not what ended it).
        self.held_effect: float = float((state or {}).get("h", self.last_effect))

    def feed(self, steps: list[int], values: list[float]) -> list[bool]:
        if not self.keeps:
            return judge(self.buckets, steps, values, self)
        # The points are kept to judge the latest half of each window (and its noise),
        # taken up to each closing bucket's last point, so a batch is judged as if fed a
        # point at a time.
        self._pending = (steps, values)
        self._fed = 0
        out = judge(self.buckets, steps, values, self)
        self.take_upto(len(values) - 1)
        return out

    def take_upto(self, end: int) -> None:
        """Keep the batch's points up to index `end` (the closing point of a bucket)."""
        if not self.keeps:
            return
        steps, values = self._pending
        for i in range(self._fed, end + 1):
            v = values[i]
            if v is not None and v - v == 0:
                self.points.append([float(steps[i]), v])
        self._fed = max(self._fed, end + 1)
        if len(self.points) > self.size:
            del self.points[: len(self.points) - self.size]

    def still_moving(self, holding: bool) -> bool:
        """Whether the latest half of the window still moves the trend's way by a quarter
        of the effect (half its rate) and by `recent_z` widths of the series' point-to-point
        noise."""
        pts = self.points
        half = pts[len(pts) // 2 :]
        if len(half) < 4:
            return False
        xs, ys = thin([p[0] for p in half], [p[1] for p in half], 16)
        change = theil_sen(xs, ys) * (half[-1][0] - half[0][0])
        if self.relative:
            change /= max(abs(median(ys)), self.floor)
        diffs = [b[1] - a[1] for a, b in pairwise(pts)]
        noise = robust_sd(diffs, median(diffs)) / math.sqrt(2)
        if self.relative:
            noise /= max(abs(median(ys)), self.floor)
        sign = 1.0 if self.direction == "up" else -1.0
        scale = 0.5 if holding else 1.0
        return sign * change >= scale * max(0.25 * self.min_effect, self.recent_z * noise)

    def judge(self, j: int) -> bool:
        xs, ys = self.buckets.upto(j)
        if len(xs) < self.min_buckets:
            return False
        self.last_effect = effect(xs, ys, self.relative, self.floor)
        holds = trend_holds(self.direction, self.last_effect, self.min_effect, self.verdict)
        if holds and self.direction != "flat":
            noise = None
            if self.keeps and self.buckets.size > 1 and len(self.points) > 2:
                # a median of k points has about 1/sqrt(k) of a point's noise
                noise = change_noise([p[1] for p in self.points]) / math.sqrt(
                    self.buckets.size)
            holds = beyond_noise(ys, self.last_effect, self.noise_z, self.relative,
                                 self.floor, noise)
        if holds and self.recent_z and self.direction != "flat":
            holds = self.still_moving(self.verdict)
        if holds:
            self.held_effect = self.last_effect
        return holds

    def state(self) -> dict[str, Any]:
        st = {"b": self.buckets.state(), "v": self.verdict, "e": self.last_effect,
              "h": self.held_effect}
        if self.keeps:
            st["p"] = self.points
        return st


class NoProgress:
    """A series that has not moved by `min_change` (relative) from where it started:
    "loss is not falling". Judged on bucket medians, and only after `warmup` points, so
    the noisy first steps of a run (learning-rate warm-up, DPO's loss sitting at log 2)
    cannot raise it.

    Where it started is the higher (for `down`; lower for `up`) of the first value and
    the first bucket's median: a loss that dropped fast in its first few points and then
    drifts down slowly has fallen, though its first bucket's median already sits low.

    With `noise_z`, "has not moved" holds only while the change is short of `min_change`
    by `noise_z` standard errors of the two medians' difference in the series' own
    point-to-point noise, and a noisy series is compared by medians of as many points as
    show a move of `min_change` in that noise (`median_points`: the bucket's at least,
    `MOST_MEDIAN` at most, else it is not judged), its first ones against its latest
    ones, once it has twice that many. A single batch's loss that swings by a third
    between steps cannot show a fall of 5% in a median of 5 points: its start, one such
    median, may sit a tenth below the loss's level, and of the hundred judgements of a
    long run one latest median then sits above it by chance."""

    stride = 1
    TAIL = 64  # the latest points the noise is measured on

    def __init__(
        self,
        direction: str = "down",
        min_change: float = 0.05,
        warmup: int = 30,
        bucket: int = 5,
        warmup_steps: int = 0,
        min_points: int = 0,
        moved: bool = False,
        max_spread: float = 0.0,
        noise_z: float = 0.0,
        state: dict[str, Any] | None = None,
    ) -> None:
        self.direction, self.min_change = direction, min_change
        self.noise_z = noise_z
        # With `max_spread`, it holds only while every point so far lies within that
        # fraction of the start (a loss with no noise at all: nothing is being learned,
        # the weights do not move, or it sits at chance).
        self.max_spread = max_spread
        self._pending: list[float] = []
        self._fed = 0
        # With `moved`, it holds the other way: the series *has* moved by min_change
        # from where it started (an entropy fallen to a fraction of its start).
        self.moved = moved
        st = state or {}
        self.buckets = Buckets(bucket, 2, st.get("b"))
        self.warmup_buckets = max(2, -(-int(warmup) // self.buckets.size))
        # A sparsely logged run ends its warm-up after `warmup_steps` training steps, once
        # it has `min_points` logged points: 30 points logged every 50 steps are 1,500
        # steps, far past any learning-rate warm-up.
        self.warmup_steps = int(warmup_steps)
        self.min_buckets = max(2, -(-int(min_points or warmup) // self.buckets.size))
        self.verdict = bool(st.get("v", False))
        self.marks: list[tuple[int, float]] = []
        self.last_effect = float(st.get("e", 0.0))
        self.first: list[float] | None = st.get("first")  # the first finite (step, value)
        # The last judgement that held: effect, start value, value now, steps between.
        self.held: dict[str, float] = dict(st.get("held", {}))
        self.extent: list[float] | None = st.get("extent")  # lowest, highest point so far
        self.tail: list[float] = list(st.get("t", []))  # the latest TAIL points (noise_z)
        self.head: list[float] = list(st.get("h", []))  # the first MOST_MEDIAN (noise_z)
        self.count = int(st.get("c", 0))  # finite points so far (noise_z)

    def feed(self, steps: list[int], values: list[float]) -> list[bool]:
        if self.first is None:
            at = next((i for i, v in enumerate(values) if v - v == 0), None)
            if at is not None:
                self.first = [float(steps[at]), values[at]]
        self._pending, self._fed = values, 0
        out = judge(self.buckets, steps, values, self)
        self.take_upto(len(values) - 1)
        return out

    def take_upto(self, end: int) -> None:
        """Widen the lowest-to-highest extent by the batch's points up to index `end`, and
        keep the latest of them for the noise."""
        if not self.max_spread and not self.noise_z:
            return
        finite = [v for v in self._pending[self._fed:end + 1] if v - v == 0]
        self._fed = max(self._fed, end + 1)
        if self.noise_z:
            self.head.extend(finite[: MOST_MEDIAN - len(self.head)])
            self.tail.extend(finite)
            del self.tail[: -self.TAIL]
            self.count += len(finite)
        if finite and self.max_spread:
            lo, hi = min(finite), max(finite)
            self.extent = [lo, hi] if self.extent is None else [min(self.extent[0], lo),
                                                                max(self.extent[1], hi)]

    def judge(self, j: int) -> bool:
        b = self.buckets
        closed = b.closed - len(b.xs) + b.base + j + 1
        if closed < self.min_buckets or b.first is None or self.first is None:
            return False
        xs, ys = b.upto(j)
        if closed < self.warmup_buckets and (
                not self.warmup_steps or xs[-1] - self.first[0] < self.warmup_steps):
            return False
        # "not moved": the kinder of the first value and the first bucket's median; "moved"
        # (a fall that is the finding) from the median alone, so one high first point of a
        # flat series is no fall
        pick = max if self.direction == "down" else min
        first, now, k = b.first, ys[-1], self.buckets.size
        noise = 0.0
        if self.noise_z and not self.moved:
            noise = point_noise(self.tail)
            needed = median_points(noise, self.min_change * abs(median(self.head)),
                                   self.noise_z, k)
            if needed is None or (needed > k and self.count < 2 * needed):
                return False
            if needed > k:
                k, first, now = needed, median(self.head[:needed]), median(self.tail[-needed:])
        start = b.first if self.moved else pick(self.first[1], first)
        self.last_effect = (now - start) / max(abs(start), 1e-12)
        # A fall that is the finding, once held, is released only when two thirds of it
        # are gone (hysteresis): an entropy hovering at a quarter of its start would open
        # and resolve a finding on every other judgement.
        edge = self.min_change * (2 / 3 if self.moved and self.verdict else 1)
        if self.noise_z and not self.moved:
            edge -= self.noise_z * median_gap_error(noise, k) / max(abs(start), 1e-12)
        holds = self.last_effect > -edge if self.direction == "down" else self.last_effect < edge
        if self.moved:
            holds = not holds
        if holds and self.max_spread:
            holds = (self.extent is not None
                     and self.extent[1] - self.extent[0] <= self.max_spread * abs(start))
        if holds:
            self.held = {"effect": self.last_effect, "start": start, "now": now,
                         "span": xs[-1] - self.first[0]}
        return holds

    def state(self) -> dict[str, Any]:
        st = {"b": self.buckets.state(), "v": self.verdict, "e": self.last_effect,
              "first": self.first, "held": self.held}
        if self.extent is not None:
            st["extent"] = self.extent
        if self.noise_z:
            st.update(t=self.tail, h=self.head, c=self.count)
        return st


def keep(head: list[float], tail: list[float], size: int, v: float) -> None:
    """Note `v` among a series' first `size` values (`head`) and its latest (`tail`)."""
    if len(head) < size:
        head.append(v)
    tail.append(v)
    if len(tail) > size:
        del tail[0]


class NoImprovement:
    """A series that should rise (reward) and has not risen beyond its noise since the
    start: the median of its latest k points against the median of its first k
    (k = half the points so far, at most `head`), with the noise the robust standard
    deviation of its recent point-to-point changes. It holds when the gain is under `z`
    standard errors of that difference (a flat or falling reward), after `min_points`;
    once it holds, it is released at twice that gain on `CONFIRM` judgements in a row.

    From `early_points` until `min_points` (a short run, or a long one's first points) the
    noise cannot be measured yet, and the verdict is stricter: the series has not gained
    at all (once that holds, it holds until `min_points`). At `min_points` the verdict is
    judged afresh, without the early one's hysteresis, so from there on an early finding
    changes nothing."""

    CONFIRM = 6

    def __init__(self, direction: str = "up", z: float = 1.0, min_points: int = 10,
                 head: int = 25, early_points: int = 0,
                 state: dict[str, Any] | None = None) -> None:
        st = state or {}
        self.sign = 1.0 if direction == "up" else -1.0
        self.z, self.min_points, self.size = z, max(4, int(min_points)), max(2, int(head))
        self.early = min(self.min_points, max(4, int(early_points or self.min_points)))
        self.head: list[float] = list(st.get("head", []))  # the first `head` values
        self.tail: list[float] = list(st.get("tail", []))  # the latest `head` values
        self.count = int(st.get("n", 0))
        self.first_step: int | None = st.get("fs")
        self.held: dict[str, float] = dict(st.get("held", {}))
        self.verdict = bool(st.get("v", False))
        self.streak = int(st.get("s", 0))  # judgements in a row that would release it

    def feed(self, steps: list[int], values: list[float]) -> list[bool]:
        out = []
        for step, v in zip(steps, values, strict=True):
            if v - v == 0:
                if self.first_step is None:
                    self.first_step = step
                keep(self.head, self.tail, self.size, v)
                self.count += 1
                # A long run is judged every 10 points: the verdict moves slowly there.
                if self.count < self.min_points:
                    if self.count >= self.early:
                        self.verdict = self._judge_early(step)
                elif self.count < 100 or self.count % 10 == 0:
                    if self.count == self.min_points:
                        self.verdict, self.streak = False, 0
                    self.verdict = self._judge(step)
            out.append(self.verdict)
        return out

    def _judge_early(self, step: int) -> bool:
        """Too few points to measure noise: holds while the series has not gained at all,
        by three measures (a pair of medians alone flickers on a noisy rise): the median
        of the latest half against the first half's, the Theil–Sen slope of all points,
        and the latest point against the first half's median."""
        if self.verdict:
            # Held until judged on its noise at min_points: a flat series that wobbles
            # is one finding, not one per wobble.
            return True
        k = self.count // 2
        start, now = median(self.head[:k]), median(self.tail[-k:])
        pts = self.tail[-self.count:]
        slope = theil_sen([float(i) for i in range(len(pts))], pts)
        if (self.sign * (now - start) > 0 or self.sign * slope > 0
                or self.sign * (pts[-1] - start) > 0):
            return False
        self.held = {"start": start, "now": now, "effect": now - start,
                     "noise": point_noise(self.tail),
                     "points": self.count, "span": step - (self.first_step or 0)}
        return True

    def _judge(self, step: int) -> bool:
        k = min(self.count // 2, self.size)
        start, now = median(self.head[:k]), median(self.tail[-k:])
        noise = point_noise(self.tail)
        error = median_gap_error(noise, k)
        gain = self.sign * (now - start)
        # Once it holds, it takes twice the gain on CONFIRM judgements in a row to
        # release: a reward hovering near the limit does not resolve and reopen a finding
        # every few points (it opens at once: that is what a user waits for).
        holds = gain <= (2 if self.verdict else 1) * self.z * error
        if holds:
            self.streak = 0
            # What the finding reports (and the point count its severity grows with) is
            # taken only where the opening condition itself holds: a reward rising slowly
            # that sits between one and two standard errors keeps an open finding, but
            # does not turn it into a warning.
            if gain <= self.z * error or not self.held:
                self.held = {"start": start, "now": now, "effect": now - start,
                             "noise": noise, "points": self.count,
                             "span": step - (self.first_step or 0)}
            return True
        self.streak = self.streak + 1 if self.verdict else 0
        if self.verdict and self.streak < self.CONFIRM:
            return True
        self.streak = 0
        return False

    def state(self) -> dict[str, Any]:
        return {"head": self.head, "tail": self.tail, "n": self.count, "fs": self.first_step,
                "held": self.held, "v": self.verdict, "s": self.streak}


class Learning:
    """Whether a metric that rises as a run learns (a reward, a DPO margin) has risen
    beyond its noise: the mean of its latest k points (k = half the points so far, at
    most `head`) lies above `level` (a known chance level: a DPO margin is 0 while the
    policy is the reference) or, without one, above the mean of its first k points, by
    `z` standard errors, the noise being the robust spread of its point-to-point changes.
    Judged afresh at every point from `min_points` on: it only lowers a severity, so it
    needs no hysteresis."""

    def __init__(self, z: float, min_points: int, head: int, level: float | None = None,
                 state: dict[str, Any] | None = None) -> None:
        st = state or {}
        self.z, self.min_points, self.size, self.level = z, int(min_points), int(head), level
        self.head: list[float] = list(st.get("head", []))  # the first `head` values
        self.tail: list[float] = list(st.get("tail", []))  # the latest `head` values
        self.count = int(st.get("n", 0))
        self.rising = bool(st.get("r", False))

    def feed(self, values: list[float]) -> None:
        for v in values:
            if v - v != 0:
                continue
            keep(self.head, self.tail, self.size, v)
            self.count += 1
        if self.count >= self.min_points and values:
            self.rising = self._judge()

    def _judge(self) -> bool:
        k = min(self.count // 2, self.size)
        now = sum(self.tail[-k:]) / k
        noise = point_noise(self.tail)
        if self.level is not None:
            return now - self.level > self.z * noise / math.sqrt(k)
        start = sum(self.head[:k]) / k
        return now - start > self.z * noise * math.sqrt(2 / k)

    def state(self) -> dict[str, Any]:
        return {"head": self.head, "tail": self.tail, "n": self.count, "r": self.rising}


class Divergence(Onsets):
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
        noise_z: float = 0.0,
        a_noise_z: float = 0.0,
        state: dict[str, Any] | None = None,
    ) -> None:
        st = state or {}
        self.a_dir, self.b_dir = a_dir, b_dir
        # The judged series' move must pass its noise (beyond_noise); one that has not
        # risen (`not_up`) must fall short of b_effect by noise_z standard errors. With
        # a_noise_z, the reference series' move must pass its own noise too, and both
        # noises are measured on the series' history (a window of a dense series, six
        # points, measures it badly: five changes can all be small by chance).
        self.noise_z, self.a_noise_z = noise_z, a_noise_z
        self.b_tail: list[float] = list(st.get("t", []))  # the judged series' latest points
        self._pending: list[float] = []
        self._fed = 0
        self.a_effect, self.b_effect, self.relative = a_effect, b_effect, relative
        nb = min(Trend.BUCKETS, max(2, int(window)))
        self.b = Buckets(max(1, int(window) // nb), nb, st.get("b"))
        self.a = Buckets(a_bucket, 256, st.get("a"))
        self.stride = max(1, nb // 4)
        self.verdict = bool(st.get("v", False))
        self.marks: list[tuple[int, float]] = []
        self.last = tuple(st.get("e", (0.0, 0.0)))
        self.held = tuple(st.get("h", self.last))  # (a, b) effects when it last held

    def feed_a(self, steps: list[int], values: list[float]) -> None:
        self.a.feed(steps, values)

    def feed(self, steps: list[int], values: list[float]) -> list[bool]:
        self._pending, self._fed = values, 0
        out = judge(self.b, steps, values, self)
        self.take_upto(len(values) - 1)
        return out

    def take_upto(self, end: int) -> None:
        """Keep the judged series' points up to index `end` for its noise (a_noise_z)."""
        if not self.a_noise_z:
            return
        self.b_tail.extend(v for v in self._pending[self._fed:end + 1] if v - v == 0)
        self._fed = max(self._fed, end + 1)
        del self.b_tail[: -NoProgress.TAIL]

    def judge(self, j: int) -> bool:
        bx, by = self.b.upto(j)
        if len(bx) < 3:
            return False
        eb = effect(bx, by, self.relative, 1e-6)
        self.last = (self.last[0], eb)
        if self.b_dir == "not_up":
            # flat, or short of a rise by noise_z standard errors over a whole window (a
            # noisy score's Theil-Sen trend dips below a small rise by chance)
            b_holds = trend_holds("flat", eb, self.b_effect, self.verdict) or (
                len(bx) == self.b.keep and trend_holds(
                    "not_up", eb + self.noise_z * change_error(by, self.relative, 1e-6),
                    self.b_effect, self.verdict))
        else:
            b_noise = None
            if self.a_noise_z and len(self.b_tail) > len(by):
                b_noise = change_noise(self.b_tail) / math.sqrt(self.b.size)
            b_holds = trend_holds(self.b_dir, eb, self.b_effect, self.verdict) and (
                self.b_dir == "flat"
                or beyond_noise(by, eb, self.noise_z, self.relative, 1e-6, b_noise))
        if not b_holds:
            return False  # the judged series alone settles it: skip the reference's trend
        span = self.a.between(bx[0], bx[-1])
        ax, ay = thin(*span, Trend.BUCKETS)
        if len(ax) < 3:
            return False
        ea = effect(ax, ay, self.relative, 1e-6)
        self.last = (ea, eb)
        holds = trend_holds(self.a_dir, ea, self.a_effect, self.verdict)
        if holds and self.a_noise_z and self.a_dir in ("up", "down"):
            holds = self._a_beyond_noise(span, ea) and self._a_beyond_noise(
                (span[0][:-1], span[1][:-1]), None)
        if holds:
            self.held = self.last
        return holds

    def _a_beyond_noise(self, span: tuple[list[float], list[float]],
                        ea: float | None) -> bool:
        """Whether the reference's move over `span` (`ea`, or its own trend) passes
        a_noise_z standard errors of its noise, measured on all of its history kept (a
        window's few points measure it badly), a jump counted as noise (point_noise),
        scaled to the medians it was thinned to. Judged again without the window's latest
        point: a reward that leaps once, at its newest point, has not trended."""
        ax, ay = thin(*span, Trend.BUCKETS)
        if len(ax) < 3:
            return False
        if ea is None:
            ea = effect(ax, ay, self.relative, 1e-6)
            if not trend_holds(self.a_dir, ea, self.a_effect, self.verdict):
                return False
        noise = point_noise(self.a.ys) / math.sqrt(len(span[1]) / len(ay))
        return beyond_noise(ay, ea, self.a_noise_z, self.relative, 1e-6, noise)

    def state(self) -> dict[str, Any]:
        st = {"a": self.a.state(), "b": self.b.state(), "v": self.verdict,
              "e": list(self.last), "h": list(self.held)}
        if self.a_noise_z:
            st["t"] = self.b_tail
        return st




class FlatSince(Onsets):
    """A training loss and its validation loss that have both moved less than
    `min_change` (relative) since the first validation: judged at each validation from
    the `min_points`-th on. The validation loss is compared with its first value; the
    training loss logged since that step, by its latest `HALF` points' median against
    the higher of its first point and its first `HALF` points' median (half of its
    points each while it has fewer), once `MIN_TRAIN` were logged. A run that learned
    before its first validation and converged later has fallen since; one that never
    learned has not.

    Training points wait until the validations of their batch up to their step are
    judged, so a batch read whole judges each validation with the training points logged
    up to it.

    With `noise_z`, the training loss is compared by medians of as many points as show a
    fall of `min_change` in its own point-to-point noise (the error of the two medians'
    difference at most `min_change` / `noise_z` of its level; `HALF` at least,
    `MOST_MEDIAN` at most), and judged only once it has twice that many: a single batch's
    loss that swings by a tenth between steps, over a run of hard batches, moves a
    5-point median by more than the fall the rule looks for. A loss too noisy for
    `MOST_MEDIAN` points is not judged flat. The validation loss, averaged over a whole
    set, is judged as it is."""

    HALF = 5
    MIN_TRAIN = 8  # training points since the first validation before a verdict
    TAIL = 64  # the latest training points kept

    def __init__(self, min_change: float = 0.04, min_points: int = 3, noise_z: float = 0.0,
                 state: dict[str, Any] | None = None) -> None:
        st = state or {}
        self.min_change, self.min_points = min_change, max(2, int(min_points))
        self.noise_z = noise_z
        self.first: list[float] | None = st.get("first")  # the first validation (step, value)
        self.count = int(st.get("n", 0))  # validations so far
        self.early: list[list[float]] = [list(p) for p in st.get("early", [])]  # since first
        self.recent: list[list[float]] = [list(p) for p in st.get("recent", [])]
        self.waiting: list[list[float]] = [list(p) for p in st.get("wait", [])]
        self.verdict = bool(st.get("v", False))
        self.held: dict[str, float] = dict(st.get("held", {}))
        self.marks: list[tuple[int, float]] = []

    def feed_a(self, steps: list[int], values: list[float]) -> None:
        """Training points: they wait for the validations of their batch (a validation
        comes in the batch that holds its step), so only one batch's points wait."""
        if self.first is not None:
            self._place(math.inf)
        elif steps:
            # Only points from the first validation on count, and it comes no earlier
            # than the batch that holds it: earlier batches' points are dropped.
            self.waiting = [p for p in self.waiting if p[0] >= steps[0]]
        self.waiting.extend([float(s), v] for s, v in zip(steps, values, strict=True)
                            if v - v == 0)

    def _place(self, upto: float) -> None:
        """Move the waiting training points logged up to step `upto` into the span."""
        assert self.first is not None
        k = 0
        for step, v in self.waiting:
            if step > upto:
                break
            k += 1
            if step < self.first[0]:
                continue
            if len(self.early) < 2 * MOST_MEDIAN:
                self.early.append([step, v])
            self.recent.append([step, v])
        del self.waiting[:k]
        del self.recent[: -self.TAIL]

    def feed(self, steps: list[int], values: list[float]) -> list[bool]:
        out = []
        self.marks = []
        for i, (step, v) in enumerate(zip(steps, values, strict=True)):
            if v - v == 0:
                if self.first is None:
                    self.first = [float(step), v]
                self._place(float(step))
                self.count += 1
                if self.count >= self.min_points:
                    self.verdict = self._judge(v)
                    if self.verdict:
                        self.marks.append((i, self.first[0]))
            out.append(self.verdict)
        if self.first is not None:
            self._place(math.inf)
        return out

    def _judge(self, v: float) -> bool:
        assert self.first is not None
        train = [p[1] for p in self.recent]
        if len(train) < self.MIN_TRAIN:
            return False
        early = [p[1] for p in self.early]
        k = self.HALF
        if self.noise_z:
            needed = self._half_needed(train, early)
            if needed is None or (needed > self.HALF and len(train) < 2 * needed):
                return False
            k = needed
        if len(early) < 2 * k:
            half = len(early) // 2
            head, tail = max(early[0], median(early[:half])), median(early[-half:])
        else:
            head, tail = max(early[0], median(early[:k])), median(train[-k:])
        val_fall = (self.first[1] - v) / max(abs(self.first[1]), 1e-12)
        train_fall = (head - tail) / max(abs(head), 1e-12)
        edge = self.min_change * (1.5 if self.verdict else 1.0)
        holds = max(val_fall, train_fall) < edge
        if holds:
            self.held = {"val_effect": -val_fall, "train_effect": -train_fall,
                         "since": self.first[0], "points": self.count}
        return holds

    def _half_needed(self, train: list[float], early: list[float]) -> int | None:
        """The points a median needs for two of them to show a fall of `min_change` in the
        training loss's noise (None: more than MOST_MEDIAN)."""
        return median_points(point_noise(train), self.min_change * abs(median(early)),
                             self.noise_z, self.HALF)

    def state(self) -> dict[str, Any]:
        return {"first": self.first, "n": self.count, "early": self.early,
                "recent": self.recent, "wait": self.waiting, "v": self.verdict,
                "held": self.held}
