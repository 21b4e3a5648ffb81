"""Incremental point detectors shared by the health rules: k-of-n thresholds, spikes
against a rolling median, non-finite values and stalls (trends live in trends.py and progress.py).

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
from collections import deque
from itertools import accumulate, pairwise
from operator import sub
from typing import Any

INF = math.inf


def median(values: list[float]) -> float:
    """Median of a non-empty list (no copy of the caller's order is kept)."""
    s = sorted(values)
    n = len(s)
    mid = n // 2
    return s[mid] if n % 2 else 0.5 * (s[mid - 1] + s[mid])


def robust_sd(values: list[float], center: float) -> float:
    """The standard deviation of `values` around `center`, as estimated by their median
    absolute deviation, or by their mean one where that is larger (a two-valued series
    has a median absolute deviation of 0); both are little moved by one outlier."""
    dev = [abs(x - center) for x in values]
    return max(1.4826 * median(dev), 1.2533 * sum(dev) / len(dev))


class KOfN:
    """Turns per-point hits into "at least k hits among the last n points".

    Once that holds it keeps holding until fewer than `release` (about k/2) of the last
    n points are hits: hysteresis, so a condition hovering near k does not open and
    resolve a finding every few steps.
    """

    def __init__(self, k: int, n: int, tail: list[int] | None = None,
                 holding: bool = False) -> None:
        self.k = max(1, int(k))
        self.n = max(self.k, int(n))
        self.release = max(1, (self.k + 1) // 2)
        self.tail = tail or []  # the last n-1 hit flags, carried across batches
        self.holding = holding

    def feed(self, hits: list[int]) -> list[bool]:
        m = len(hits)
        if not m:
            return []
        n, tail = self.n, self.tail
        full = tail + hits if tail else hits
        if not self.holding and sum(full) < self.k:
            # Too few hits for any window to reach k: the usual case on a healthy run.
            self.tail = full[-(n - 1) :] if n > 1 else []
            return [False] * m
        pref = list(accumulate(full, initial=0))
        t = len(tail)
        # Window ending at new point i spans full[max(0, t+i-n+1) : t+i+1].
        hi = pref[t + 1 : t + 1 + m]
        z = max(0, min(m, n - 1 - t))  # points whose window starts at the beginning
        lo = [0] * z + pref[t + 1 + z - n : t + 1 + m - n] if m > z else [0] * m
        counts = list(map(sub, hi, lo))
        self.tail = full[-(n - 1) :] if n > 1 else []
        opens = list(map(self.k.__le__, counts))
        if self.release >= self.k or (not self.holding and True not in opens):
            self.holding = opens[-1]
            return opens  # the common, healthy case: one C-level scan
        holds = list(map(self.release.__le__, counts))
        # A verdict starts where k is reached (or continues from the last batch) and
        # lasts to the end of that stretch of at least `release` hits.
        out = [False] * m
        pos = 0
        if self.holding:
            pos = _index(holds, False, 0, m)
            out[:pos] = [True] * pos
        while pos < m:
            start = _index(opens, True, pos, m)
            if start == m:
                break
            pos = _index(holds, False, start, m)
            out[start:pos] = [True] * (pos - start)
        self.holding = out[-1]
        return out

    def state(self) -> dict[str, Any]:
        return {"tail": self.tail, "holding": self.holding}


def _index(flags: list[bool], value: bool, start: int, end: int) -> int:
    """Index of the first `value` in flags[start:], or `end` if there is none."""
    try:
        return flags.index(value, start)
    except ValueError:
        return end


class Threshold:
    """Sustained threshold: a value above `above` (or below `below`) on k of the last n points.

    Non-finite values never count as hits (the non-finite rule reports them). Points
    before `min_points` have been seen never trigger, which skips warm-up noise. With
    `k_binary`, a series that has taken no value but exactly 0 and 1 needs that many hits
    instead of k (a share of one group a step is that group's verdict, so a hit there is
    one group, not a whole step's); from the batch that logs another value on, k.
    """

    def __init__(
        self,
        above: float | None = None,
        below: float | None = None,
        k: int = 1,
        n: int = 1,
        min_points: int = 0,
        k_binary: int | None = None,
        state: dict[str, Any] | None = None,
    ) -> None:
        self.above, self.below = above, below
        st = state or {}
        self.k = k
        # Whether every value so far was exactly 0 or 1 (only tracked with k_binary).
        self.binary = k_binary is not None and bool(st.get("binary", True))
        self.window = KOfN(k_binary if self.binary and k_binary is not None else k, n,
                           st.get("tail"), bool(st.get("holding", False)))
        self.seen = int(st.get("seen", 0))
        self.min_points = int(min_points)
        self.hits: list[int] = []
        # Steps of the window's tail, so a finding can start at the window's first hit.
        self.tail_steps: list[int] = list(st.get("steps", []))
        self._prev: tuple[list[int], list[int]] = ([], [])
        self._steps: list[int] = []
        # The last point (counted from the first) whose verdict held, before the last
        # batch and after it: a finding that opens counts no hit of the one before it.
        self.last_true = int(st.get("last_true", -1))
        self._last_true_before = self.last_true
        self._verdicts: list[bool] = []

    def feed(self, values: list[float], steps: list[int] | None = None) -> list[bool]:
        if self.binary and any(v != 0.0 and v != 1.0 for v in values):
            self.binary = False
            self.window = KOfN(self.k, self.window.n, self.window.tail, self.window.holding)
        a, b = self.above, self.below
        if a is not None and b is not None:
            hits = [1 if (v > a or v < b) and v - v == 0 else 0 for v in values]
        elif a is not None:
            # float.__lt__ over the batch is one C-level pass; infinities are rare.
            hits = list(map(a.__lt__, values))
            if INF in values:
                hits = [h if v != INF else 0 for h, v in zip(hits, values, strict=True)]
        elif b is not None:
            hits = list(map(b.__gt__, values))
            if -INF in values:
                hits = [h if v != -INF else 0 for h, v in zip(hits, values, strict=True)]
        else:
            hits = [0] * len(values)
        return self._window(hits, steps, len(values))

    def _window(self, hits: list[int], steps: list[int] | None, m: int) -> list[bool]:
        """The k-of-n verdicts of a batch's hits (none counted before `min_points`)."""
        skip = self.min_points - self.seen
        if skip > 0:
            hits[:skip] = [0] * min(skip, len(hits))
        self.seen += m
        self.hits = hits  # which points crossed the limit: the finding's evidence
        if steps is not None:
            self._prev = (self.window.tail, self.tail_steps)
            self._steps = steps
            keep = self.window.n - 1
            self.tail_steps = (self.tail_steps + steps)[-keep:] if keep else []
        verdicts = self.window.feed(hits)
        self._verdicts = verdicts
        self._last_true_before = self.last_true
        if True in verdicts:
            self.last_true = self.seen - 1 - verdicts[::-1].index(True)
        return verdicts

    def _first_own(self, i: int, lo: int) -> int:
        """The first index of the window (prev tail + batch) that point i's finding may
        count: after the last point whose verdict held before i. A k-of-n finding that
        closes and reopens within one window would otherwise count the earlier one's hits
        again and start inside its span."""
        try:
            held = i - 1 - self._verdicts[i - 1 :: -1].index(True) if i else -1
        except ValueError:
            held = -1
        start = self.seen - len(self._verdicts)  # the batch's first point, counted
        last = start + held if held >= 0 else self._last_true_before
        return max(lo, last - (start - len(self._prev[0])) + 1)

    def in_window(self) -> int:
        """Hits among the last n points: what "k of the last n" counted at the latest."""
        return sum((self._prev[0] + self.hits)[-self.window.n:])

    def window_counts(self) -> list[int]:
        """Hits among the n points up to each point of the last batch."""
        hits = self._prev[0] + self.hits
        pref = list(accumulate(hits, initial=0))
        t, n = len(self._prev[0]), self.window.n
        return [pref[i + 1] - pref[max(0, i + 1 - n)] for i in range(t, len(hits))]

    def onset(self, i: int) -> int | None:
        """The step of the first hit in the window that made point i of the last batch
        reach k: where the trouble started, a few points before the finding opened."""
        prev_hits, prev_steps = self._prev
        hits = prev_hits + self.hits[: i + 1]
        steps = prev_steps + self._steps[: i + 1]
        lo = self._first_own(i, max(0, len(hits) - self.window.n))
        try:
            return steps[hits.index(True, lo)]
        except (ValueError, IndexError):
            return None

    def hits_before(self, i: int) -> int:
        """The hits in the window of point i of the last batch before that point: those
        a finding opening at i already holds (it starts at the first of them, `onset`)."""
        prev_hits = self._prev[0]
        hits = prev_hits + self.hits[: i + 1]
        lo = self._first_own(i, max(0, len(hits) - self.window.n))
        return sum(hits[lo:-1])

    def state(self) -> dict[str, Any]:
        return {"tail": self.window.tail, "holding": self.window.holding, "seen": self.seen,
                "steps": self.tail_steps, "last_true": self.last_true, "binary": self.binary}


class Pinned(Threshold):
    """A value exactly equal to the lowest the series has taken, taken before, on k of
    the last n points: a batch's mean reward that returns to exactly its floor has every
    sample at that floor (all wrong, or a penalty every completion earns), so no group
    differs within itself. A new low is no hit (a falling reward's every point), nor is a
    value repeated above the floor (a mean of eight 0/1 rewards takes only nine values,
    and a rising one repeats its best)."""

    def __init__(self, k: int = 1, n: int = 1, min_points: int = 0,
                 state: dict[str, Any] | None = None) -> None:
        super().__init__(None, None, k, n, min_points, state=state)
        # The lowest value so far and how many points took it.
        self.floor: list[float] = list((state or {}).get("floor", []))

    def feed(self, values: list[float], steps: list[int] | None = None) -> list[bool]:
        hits = []
        floor = self.floor
        for v in values:
            hit = 0
            if v - v == 0:
                if not floor or v < floor[0]:
                    floor[:] = [v, 1]
                elif v == floor[0]:
                    floor[1] += 1
                    hit = 1
            hits.append(hit)
        return self._window(hits, steps, len(values))

    def state(self) -> dict[str, Any]:
        return {**super().state(), "floor": self.floor}


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
        min_median: float = 0.0,
    ) -> None:
        self.factor, self.drop, self.floor = factor, drop, floor
        # The least median a rise is measured against: a series that starts at 0 by
        # construction (a KL to the reference) rises from it once, and that is no spike.
        self.min_median = min_median
        self.size, self.min_history = max(1, int(window)), int(min_history)
        st = state or {}
        self.history: list[float] = list(st.get("history", []))  # finite values, oldest first
        self.window = KOfN(1, hold, st.get("tail"))
        self.hits: list[int] = []
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
                hi = (max(factor * max(med, self.min_median), floor)
                      if factor is not None else INF)
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
        self.hits = hits
        return self.window.feed(hits)

    def reference(self) -> float | None:
        """The current rolling median, for the finding's evidence."""
        return median(self.history) if self.history else None

    def state(self) -> dict[str, Any]:
        return {"history": self.history, "tail": self.window.tail, "med": self.med,
                "seen": self.seen, "at": self.refresh_at}


class AboveMax:
    """A value above `factor` times the highest finite value the series logged before it,
    from `min_history` points on and only while that highest value is above 0: a jump no
    estimate of the series' noise is needed to see, so it is judged on a run's first
    points too. A hit keeps its finding open `hold` points, so a burst reads as one."""

    def __init__(self, factor: float = 2.0, min_history: int = 3, hold: int = 5,
                 state: dict[str, Any] | None = None) -> None:
        st = state or {}
        self.factor, self.min_history = float(factor), int(min_history)
        self.top: float | None = st.get("top")  # the highest finite value so far
        self.seen = int(st.get("seen", 0))  # finite values so far
        self.window = KOfN(1, hold, st.get("tail"))
        self.hits: list[int] = []
        self.jump: list[float] = list(st.get("jump", []))  # the latest: [highest before, value]

    def feed(self, values: list[float]) -> list[bool]:
        hits: list[int] = []
        for v in values:
            hit = 0
            if v - v == 0:
                top = self.top
                if (top is not None and top > 0 and self.seen >= self.min_history
                        and v > self.factor * top):
                    hit = 1
                    self.jump = [top, v]
                self.top = v if top is None else max(top, v)
                self.seen += 1
            hits.append(hit)
        self.hits = hits
        return self.window.feed(hits)

    def state(self) -> dict[str, Any]:
        return {"top": self.top, "seen": self.seen, "tail": self.window.tail, "jump": self.jump}


class Jump:
    """A value above the one before it by more than `z` robust standard deviations of the
    series' recent step-to-step changes (less their median: a falling loss falls by about
    the same each step), and by at least `min_rel` of its level: a loss spike, judged
    against the run's own noise so a noisy loss does not raise it. The noise is measured
    on the last `window` changes (after 200 points, refreshed every `BLOCK`), less the
    jumps found and the change after each (its fall back); a jump keeps its finding open
    `hold` points, so repeated jumps read as one finding. With `both`, a drop as far below
    the point before counts too (a policy loss, whose sign means nothing).

    Nor a jump smaller than `OF_START` of the series' first value: a loss that has fallen
    to the logger's rounding (0.0000-0.0004, a memorised set) has no noise left to measure
    a jump against, and a rise of 0.001 there is invisible beside where the run started
    (5.2) and costs it nothing.

    Nor is its noise taken below `RESOLUTION`, the last of the 4 decimals a trainer logs: a
    series logged as 0.0 step after step (a GRPO loss, β times a KL that is 0 until the
    policy leaves the reference) has a measured noise of 0, and its first move off 0
    (0.0001, then 0.0014) would be infinitely many standard deviations; a noise below the
    logger's last digit is its rounding, not a measurement."""

    BLOCK = 8
    OF_START = 0.01
    RESOLUTION = 1e-4

    def __init__(self, z: float = 6.0, min_rel: float = 0.05, window: int = 20,
                 min_history: int = 10, hold: int = 10, both: bool = False,
                 state: dict[str, Any] | None = None) -> None:
        self.z, self.min_rel, self.both = z, min_rel, both
        self.size, self.min_history = max(2, int(window)), max(2, int(min_history))
        st = state or {}
        self.diffs: list[float] = list(st.get("diffs", []))  # recent step-to-step changes
        self.prev: float | None = st.get("prev")
        self.noise: list[float] | None = st.get("noise")  # [median change, robust sd]
        self.seen = int(st.get("seen", 0))
        self.refresh_at = int(st.get("at", 0))
        self.window = KOfN(1, hold, st.get("tail"))
        self.hits: list[int] = []
        self.jump: list[float] = list(st.get("jump", []))  # the latest: [from, to, noise sd]
        # The change after a jump (its fall back) is left out of the noise as the jump is:
        # a spike in the window would widen the noise and hide the next one.
        self.skip = bool(st.get("skip", False))
        self.first: float | None = st.get("first")  # the first finite value

    def feed(self, values: list[float]) -> list[bool]:
        hits = []
        z, min_rel = self.z, self.min_rel
        if self.first is None:
            self.first = next((v for v in values if v - v == 0), None)
        least = self.OF_START * abs(self.first or 0.0)
        for v in values:
            if self.seen >= self.refresh_at:
                self._refresh()
            self.seen += 1
            prev = self.prev
            if v - v != 0:
                hits.append(0)
                continue
            hit = 0
            if prev is not None:
                change = v - prev
                if self.noise is not None:
                    med, sd = self.noise
                    rise = change - med
                    if rise > z * sd and change > max(min_rel * abs(prev), least):
                        hit = 1
                        self.jump = [prev, v, sd]
                    elif (self.both and -rise > z * sd
                          and -change > max(min_rel * abs(prev), least)):
                        hit = 1  # a drop as far, where the series has no sign to keep
                        self.jump = [prev, v, sd]
                if hit or self.skip:
                    self.skip = bool(hit)
                else:
                    self.diffs.append(change)
                    if len(self.diffs) > self.size:
                        del self.diffs[0]
            self.prev = v
            hits.append(hit)
        self.hits = hits
        return self.window.feed(hits)

    def _refresh(self) -> None:
        d = self.diffs
        if len(d) + 1 < self.min_history:
            self.noise = None
        else:
            med = median(d)
            self.noise = [med, max(robust_sd(d, med), self.RESOLUTION)]
        # Every point while the run is young (its changes shrink fast as a loss settles),
        # then every BLOCK points, which keeps a long run's cost to a few operations a point.
        self.refresh_at = self.seen + (1 if self.seen < 200 else self.BLOCK)

    def state(self) -> dict[str, Any]:
        return {"diffs": self.diffs, "prev": self.prev, "noise": self.noise, "seen": self.seen,
                "at": self.refresh_at, "tail": self.window.tail, "jump": self.jump,
                "skip": self.skip, "first": self.first}


class Shift:
    """A value that jumped above the level before it and stayed there: the last `stay`
    points all lie above the level just before them (the median of the last 3 of the
    `window` points before) by `min_rel` of it and by `z` robust standard deviations of
    those `window` points' step-to-step changes (less their median, the trend). A spike
    comes back; a shifted loss does not (a restart from a worse checkpoint, a changed
    data mix, a learning rate too high mid-run). It holds while the series stays above
    the old level by half of `min_rel`. A step that goes back (a run resumed from a
    checkpoint logs its steps again) refills the window with the points logged up to that
    step (a thinned history of `HISTORY` of them): the loss comes back to what it was at
    that checkpoint, above where the first attempt had got to, and that is no shift."""

    HISTORY = 128

    def __init__(self, z: float = 6.0, min_rel: float = 0.2, window: int = 10,
                 stay: int = 3, state: dict[str, Any] | None = None) -> None:
        self.z, self.min_rel = z, min_rel
        self.window, self.stay = max(3, int(window)), max(1, int(stay))
        st = state or {}
        self.points: list[float] = list(st.get("p", []))  # the last window + stay values
        self.level: float | None = st.get("level")  # the old level while a shift holds
        self.shift: list[float] = list(st.get("shift", []))  # [old level, new value]
        self.last_step: int | None = st.get("last")  # the last point's step
        self.hist: list[list[float]] = [list(h) for h in st.get("hist", [])]  # [step, value]

    def feed(self, values: list[float], steps: list[int] | None = None) -> list[bool]:
        out = []
        keep = self.window + self.stay
        for i, v in enumerate(values):
            if steps is not None:
                step = steps[i]
                if self.last_step is not None and step <= self.last_step:
                    self.hist = [h for h in self.hist if h[0] <= step]
                    self.points = [h[1] for h in self.hist[-self.window:]]
                    self.level = None
                self.last_step = step
            if v - v != 0:
                out.append(self.level is not None)
                continue
            self.points.append(v)
            if len(self.points) > keep:
                del self.points[0]
            if steps is not None:
                self.hist.append([steps[i], v])
                if len(self.hist) > self.HISTORY:  # thin the older half
                    half = self.HISTORY // 2
                    self.hist = self.hist[:half:2] + self.hist[half:]
            if self.level is not None:
                if v > self.level + 0.5 * self.min_rel * abs(self.level):
                    out.append(True)
                    continue
                self.level = None
            out.append(self._shifted())
        return out

    def _shifted(self) -> bool:
        if len(self.points) < self.window + self.stay:
            return False
        before, after = self.points[: self.window], self.points[self.window :]
        # The level just before: a loss still falling sits below its window's median.
        level = median(before[-3:])
        diffs = [b - a for a, b in pairwise(before)]
        center = median(diffs)
        rise = min(after) - level
        if rise > max(self.min_rel * abs(level), self.z * robust_sd(diffs, center)):
            self.level, self.shift = level, [level, after[-1]]
            return True
        return False

    def state(self) -> dict[str, Any]:
        return {"p": self.points, "level": self.level, "shift": self.shift,
                "last": self.last_step, "hist": self.hist}


class Excursion:
    """A long excursion that came back: the median of the last 3 points rose above the
    level before (the median of the `window` points before it) by `min_rel` of it and by
    `z` robust standard deviations of those points, stayed out `stay` points or more,
    and has come back to within `back` of the level. A jump of one point is a spike
    (`Jump`) and a rise that stays is a shift or a trend; this is the stretch between,
    found when it ends. A hit keeps its finding open `hold` points."""

    def __init__(self, min_rel: float = 0.5, z: float = 3.0, window: int = 20,
                 stay: int = 5, back: float = 0.2, hold: int = 5,
                 state: dict[str, Any] | None = None) -> None:
        self.min_rel, self.z, self.back = min_rel, z, back
        self.size, self.stay = max(5, int(window)), max(1, int(stay))
        st = state or {}
        self.points: list[float] = list(st.get("p", []))  # the level's points
        self.recent: list[float] = list(st.get("r", []))  # the last 3 points
        # While out: [level, first step out, highest median, points out]
        self.out: list[float] | None = st.get("out")
        self.excursion: list[float] = list(st.get("exc", []))  # the last: [level, peak,
        #                                                          first step, points out]
        self.window = KOfN(1, hold, st.get("tail"))
        self.onsets: list[int | None] = []
        self.hits: list[int] = []

    def feed(self, values: list[float], steps: list[int]) -> list[bool]:
        hits = []
        self.onsets = []
        for step, v in zip(steps, values, strict=True):
            hit = 0
            if v - v == 0:
                self.recent = [*self.recent[-2:], v]
                hit = self._step(step, v)
            hits.append(hit)
            self.onsets.append(int(self.excursion[2]) if hit else None)
        self.hits = hits
        return self.window.feed(hits)

    def _step(self, step: int, v: float) -> int:
        now = median(self.recent)
        if self.out is not None:
            level = self.out[0]
            self.out[2] = max(self.out[2], now)
            self.out[3] += 1
            if now > level + self.back * abs(level):
                return 0
            long_enough = self.out[3] >= self.stay
            self.excursion = [level, self.out[2], self.out[1], self.out[3]]
            self.out = None
            self.points = list(self.recent)
            return int(long_enough)
        if len(self.points) >= self.size and len(self.recent) == 3:
            level = median(self.points)
            if now - level > max(self.min_rel * abs(level),
                                 self.z * robust_sd(self.points, level)):
                self.out = [level, float(step), now, 1.0]
                return 0
        self.points.append(v)
        del self.points[: -self.size]
        return 0

    def onset(self, i: int) -> int | None:
        """The step the excursion left its level, for the hit at point i."""
        return self.onsets[i] if i < len(self.onsets) else None

    def state(self) -> dict[str, Any]:
        return {"p": self.points, "r": self.recent, "out": self.out, "exc": self.excursion,
                "tail": self.window.tail}


class AboveBest:
    """A value that lies above its best so far (the running minimum of the points
    before it) by `min_rel` of that best on the last `k` points in a row, or by `single`
    on one point, once `min_points` points are in: a validation loss turning up from its
    minimum (an early sign of overfitting, before a trend over several validations
    shows). It holds while the series stays above the best by half of `min_rel`.

    A rise smaller than `RESOLUTION` is no rise: trainers log a loss to 4 decimals (the
    HF Trainer rounds there), and a loss below that resolution, a held-out set predicted
    all but perfectly (a DPO loss of 3e-7 at a margin of 15), moves by its own
    floating-point rounding, a tenth of itself from one validation to the next."""

    RESOLUTION = 1e-4

    def __init__(self, min_rel: float = 0.01, k: int = 2, single: float = 0.05,
                 min_points: int = 3, state: dict[str, Any] | None = None) -> None:
        self.min_rel, self.single = min_rel, single
        self.k, self.min_points = max(1, int(k)), max(2, int(min_points))
        st = state or {}
        self.best: float | None = st.get("best")
        self.count = int(st.get("n", 0))  # finite points seen
        self.above = int(st.get("above", 0))  # points in a row above the best by min_rel
        self.held = bool(st.get("held", False))
        self.rise: list[float] = list(st.get("rise", []))  # [best, value]

    def feed(self, values: list[float]) -> list[bool]:
        out = []
        for v in values:
            if v - v != 0:
                out.append(self.held)
                continue
            self.count += 1
            best = self.best
            if best is None or v <= best:
                self.best, self.above, self.held = v, 0, False
                out.append(False)
                continue
            rel = (v - best) / max(abs(best), 1e-12) if v - best >= self.RESOLUTION else 0.0
            self.above = self.above + 1 if rel >= self.min_rel else 0
            if self.held:
                self.held = rel >= 0.5 * self.min_rel
            elif self.count >= self.min_points and (
                    self.above >= self.k or (self.single > 0 and rel >= self.single)):
                self.held = True
            if self.held:
                self.rise = [best, v]
            out.append(self.held)
        return out

    def state(self) -> dict[str, Any]:
        return {"best": self.best, "n": self.count, "above": self.above, "held": self.held,
                "rise": self.rise}


def spike_steps(steps: list[int], values: list[float], factor: float = 10.0) -> list[int]:
    """Steps whose value is more than `factor` times the median of the whole series: the
    after-the-fact form of `Spike` (what `runs compare --spike-factor` lists)."""
    finite = [v for v in values if v is not None and v - v == 0]
    if not finite:
        return []
    limit = factor * median(finite)
    return [s for s, v in zip(steps, values, strict=True)
            if v is not None and v - v == 0 and v > limit]


class Repeats:
    """The latest `length` finite values equal, value for value and in order, `length`
    values logged from an earlier step: the same batches through unchanged weights give
    the same loss (a second epoch repeating the first, the optimizer never stepping).

    Not by chance: the values must differ from one another, and a match by chance of one
    of the W stretches remembered, each value one of L levels (the stretch's range over
    the series' grid, its smallest step-to-step change that is not 0), must be less
    likely than `chance` (W / L**length): a flat loss at its logger's rounding (46.5,
    45.75, 46.0 in bf16, L = 3) repeats by chance over a long run. A stretch logged again
    at the same steps (a resumed run replaying its last steps) is no repeat. The
    stretches of the first `KEEP` points are remembered, so a repeat of a longer epoch is
    not seen. A hit keeps its finding open `length` points."""

    KEEP = 2048

    def __init__(self, length: int = 4, chance: float = 1e-3,
                 state: dict[str, Any] | None = None) -> None:
        st = state or {}
        self.length, self.chance = max(2, int(length)), float(chance)
        self.grid: float | None = st.get("g")  # the smallest change that is not 0
        self.recent: list[list[float]] = list(st.get("r", []))  # latest [step, value]
        self.seen: dict[str, float] = dict(st.get("s", {}))  # window -> its first step
        self.held: dict[str, float] = dict(st.get("held", {}))
        self.window = KOfN(1, self.length, st.get("tail"))
        self.hits: list[int] = []

    def feed(self, values: list[float], steps: list[int]) -> list[bool]:
        hits = []
        for step, v in zip(steps, values, strict=True):
            hit = 0
            if v - v == 0:
                if self.recent and v != self.recent[-1][1]:
                    change = abs(v - self.recent[-1][1])
                    self.grid = change if self.grid is None else min(self.grid, change)
                self.recent.append([float(step), v])
                del self.recent[:-self.length]
                if len(self.recent) == self.length:
                    hit = self._judge()
            hits.append(hit)
        self.hits = hits
        return self.window.feed(hits)

    def _judge(self) -> int:
        vals = sorted(v for _, v in self.recent)
        if min(b - a for a, b in pairwise(vals)) <= 0:
            return 0
        key = ",".join(repr(v) for _, v in self.recent)
        start, end = self.recent[0][0], self.recent[-1][0]
        was = self.seen.get(key)
        if was is None:
            if len(self.seen) < self.KEEP:
                self.seen[key] = start
            return 0
        assert self.grid is not None  # values that differ have changed
        levels = (vals[-1] - vals[0]) / self.grid
        if was >= start or len(self.seen) > self.chance * levels ** self.length:
            return 0
        if self.held.get("to") == self.recent[-2][0]:
            self.held["to"] = end  # the repeat goes on: one stretch, from where it began
        else:
            self.held = {"was": was, "from": start, "to": end}
        return 1

    def state(self) -> dict[str, Any]:
        return {"r": self.recent, "s": self.seen, "held": self.held, "tail": self.window.tail,
                "g": self.grid}


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
