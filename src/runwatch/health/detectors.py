"""Incremental point detectors shared by the health rules: k-of-n thresholds, a value
pinned at its floor or ceiling, a stretch repeating an earlier one, non-finite values and
stalls (a point departing from its series' past is in jumps.py, excursions.py and
against.py; trends live in trends.py, progress.py and improvement.py).

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
from bisect import bisect_right
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
    if n % 2:
        return s[mid]
    middle = 0.5 * (s[mid - 1] + s[mid])
    # two values near the double's limit overflow their sum: halve them first
    return middle if middle - middle == 0 else 0.5 * s[mid - 1] + 0.5 * s[mid]


def mad_sd(values: list[float], center: float) -> float:
    """The standard deviation of `values` around `center`, as estimated by their median
    absolute deviation alone: outliers, however many short of half, barely move it."""
    return 1.4826 * median([abs(x - center) for x in values])


def robust_sd(values: list[float], center: float) -> float:
    """The standard deviation of `values` around `center`, as estimated by their median
    absolute deviation, or by their mean one where that is larger (a two-valued series
    has a median absolute deviation of 0); both are little moved by one outlier."""
    dev = [abs(x - center) for x in values]
    return max(1.4826 * median(dev), 1.2533 * sum(dev) / len(dev))


class Waiting:
    """A paired rule's training points waiting for the validations of their batch (a
    validation comes in the batch that holds its step), so that a batch read whole judges
    each validation with the training points logged up to it; only one batch's points
    wait. `take(upto)` hands over those logged up to step `upto`, oldest first, as their
    steps and their values (kept apart: most are taken whole at the next batch, and only
    the state pairs them)."""

    def __init__(self, state: list[list[float]] | None = None) -> None:
        self.steps: list[float] = [p[0] for p in state or []]
        self.values: list[float] = [p[1] for p in state or []]

    def add(self, steps: list[int], values: list[float]) -> None:
        at = finite_at(values)
        if len(at) == len(values):
            self.steps += map(float, steps)
            self.values += values
        else:
            self.steps += [float(steps[i]) for i in at]
            self.values += [values[i] for i in at]

    def drop_before(self, step: float) -> tuple[list[float], list[float]]:
        """Drop the points logged before `step`, and hand them back, oldest first."""
        early = [s < step for s in self.steps]
        dropped = ([s for s, e in zip(self.steps, early, strict=True) if e],
                   [v for v, e in zip(self.values, early, strict=True) if e])
        self.steps = [s for s, e in zip(self.steps, early, strict=True) if not e]
        self.values = [v for v, e in zip(self.values, early, strict=True) if not e]
        return dropped

    def take(self, upto: float) -> tuple[list[float], list[float]]:
        k = len(self.steps)  # all of them, at the batch's end (`upto` infinite)
        if upto < math.inf:
            k = 0
            while k < len(self.steps) and self.steps[k] <= upto:
                k += 1
        taken = self.steps[:k], self.values[:k]
        del self.steps[:k], self.values[:k]
        return taken

    @property
    def points(self) -> list[list[float]]:
        """The waiting points as [step, value], oldest first."""
        return [[s, v] for s, v in zip(self.steps, self.values, strict=True)]

    def state(self) -> list[list[float]]:
        return self.points


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
        # The batch at once, its windows as C-level passes: each finite point's repr is
        # taken once and each window's name joins those of its points; once `KEEP`
        # windows are remembered no more are, and the windows are only looked up. Whether
        # a window's values differ is asked only of one remembered or to remember, and
        # the smallest change up to a window only of one that repeats (`_grids`).
        size, seen, recent = self.length, self.seen, self.recent
        at = finite_at(values)
        hits = [0] * len(values)
        if not at:
            self.hits = hits
            return self.window.feed(hits)
        before = len(recent)
        vals = [p[1] for p in recent] + (values if len(at) == len(values)
                                         else [values[i] for i in at])
        first = max(before, size - 1) - size + 1  # where the first window judged starts
        floats = set(map(type, vals)) == {float}
        keys = list(map(repr, vals))
        names = list(map(",".join, zip(*(keys[first + d :] for d in range(size)),
                                       strict=False)))

        def step(i: int) -> float:  # of point i of `vals`
            return recent[i][0] if i < before else float(steps[at[i - before]])

        def differ(w: int) -> bool:  # whether window w's values differ from one another
            window = vals[first + w : first + w + size]
            # floats that differ have a difference that is not 0; an int and a float
            # may not (2**53 + 1 and 2.0**53)
            return len(set(window)) == size if floats else _differ(window)

        found: list[tuple[int, float, int]] = []  # window, its first step, memory
        w = 0
        while w < len(names) and len(seen) < self.KEEP:
            # a window may repeat one remembered earlier in the same batch
            if differ(w):
                was = seen.get(names[w])
                if was is None:
                    seen[names[w]] = step(first + w)
                else:
                    found.append((w, was, len(seen)))
            w += 1
        found += [(k, was, len(seen)) for k, was in enumerate(map(seen.get, names[w:]), w)
                  if was is not None and differ(k)]
        grids = self._grids(vals, before) if found else []
        for k, was, remembered in found:
            lo = first + k
            window = [[step(i), vals[i]] for i in range(lo, lo + size)]
            hits[at[lo + size - 1 - before]] = self._repeat(window, was, remembered,
                                                            grids[lo + size - 1])
        tail = vals[max(0, before - 1) :]
        changes = (list(filter(None, map(abs, map(sub, tail[1:], tail[:-1])))) if floats
                   else [abs(b - a) for a, b in pairwise(tail) if b != a])
        if changes:
            least = min(changes)  # the first of equal ones, as min() one by one keeps
            self.grid = least if self.grid is None else min(self.grid, least)
        self.recent = [recent[i] if i < before else [step(i), vals[i]]
                       for i in range(max(0, len(vals) - size), len(vals))]
        self.hits = hits
        return self.window.feed(hits)

    def _grids(self, vals: list[float], before: int) -> list[float | None]:
        """The smallest change that is not 0 up to each of `vals` (the `before` points
        kept from earlier batches, then this batch's)."""
        grid = self.grid
        out = [grid] * len(vals)
        for q in range(max(1, before), len(vals)):
            a, b = vals[q - 1], vals[q]
            if b != a:
                change = abs(b - a)
                grid = change if grid is None else min(grid, change)
            out[q] = grid
        return out

    def _repeat(self, recent: list[list[float]], was: float, remembered: int,
                grid: float | None) -> int:
        """Whether the stretch `recent`, first logged from step `was`, repeats it not by
        chance (1) or not (0), `remembered` stretches being remembered then."""
        vals = sorted(v for _, v in recent)
        start, end = recent[0][0], recent[-1][0]
        assert grid is not None  # values that differ have changed
        levels = (vals[-1] - vals[0]) / grid
        if was >= start or remembered > self.chance * levels ** self.length:
            return 0
        if self.held.get("to") == recent[-2][0]:
            self.held["to"] = end  # the repeat goes on: one stretch, from where it began
        else:
            self.held = {"was": was, "from": start, "to": end}
        return 1

    def state(self) -> dict[str, Any]:
        return {"r": self.recent, "s": self.seen, "held": self.held, "tail": self.window.tail,
                "g": self.grid}


def finite_at(values: list[float]) -> list[int] | range:
    """The indices of the finite values (None, a missing one, is not): all of them where
    their sum is finite (one C-level pass, the usual case)."""
    try:
        if math.isfinite(sum(values)):
            return range(len(values))
    except TypeError:  # a missing value
        pass
    return [i for i, v in enumerate(values) if v is not None and v - v == 0]


def count_upto(at: list[int] | range, end: int) -> int:
    """How many of the indices `at` (rising, as `finite_at` gives them) are at most `end`."""
    if isinstance(at, range):  # every value finite
        return max(0, min(end + 1, len(at)))
    return bisect_right(at, end)


def _differ(values: list[float]) -> bool:
    """Whether no two of `values` are the same number (their differences are not 0)."""
    ordered = sorted(values)
    return min(b - a for a, b in pairwise(ordered)) > 0


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
