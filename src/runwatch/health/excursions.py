"""Detectors of a departure found only once the series has gone on (`_FoundLater`): an
excursion to a new level that comes back, an isolated point that comes straight back, and
a loss that turns up from its low. Split from jumps.py (spikes, new highs, jumps and
steps); the conventions are detectors.py's. Long batches are taken with numpy where only a
few points can pass a rule's first test (GATED_LEAST)."""

from __future__ import annotations

import math
from itertools import pairwise
from typing import Any

from runwatch.health.detectors import (
    KOfN,
    finite_at,
    median,
    robust_sd,
)
from runwatch.health.jumps import GATED_LEAST, Jump
from runwatch.health.trendstats import (
    change_error,
    change_noise,
    lazy_numpy,
    only_floats,
    theil_sen_even,
    window_medians,
)


class _FoundLater:
    """A detector that finds an event at a later point (a spike once the point after it
    comes back, an excursion once it ends): each hit's finding starts at the event's own
    step (`onset`). Subclasses take a finite point (`_step`, 1 for a hit) and say where
    the event they last found began (`_began`)."""

    window: KOfN
    onsets: list[int | None]
    hits: list[int]

    def _step(self, step: int, v: float) -> int:
        raise NotImplementedError

    def _began(self) -> int:
        raise NotImplementedError

    def _steady(self) -> bool:
        """Whether the detector waits for an event with its windows full: the state in
        which `_gates` tells the points that need `_step`."""
        return False

    def _gates(self, values: list[float]) -> list[int]:
        """Of finite float `values` about to be taken from a steady state, the places
        where one may start or find an event, taken with numpy; at the others `_step`
        only keeps the point (`_quietly`), as long as the state stays steady."""
        raise NotImplementedError

    def _quietly(self, values: list[float]) -> None:
        """Keep finite `values` as `_step` keeps points that start nothing."""
        raise NotImplementedError

    def _kept(self) -> list[float]:
        """The points the detector keeps (floats, for `_gates` to be exact)."""
        return []

    def feed(self, values: list[float], steps: list[int]) -> list[bool]:
        # A steady detector's quiet stretches are taken at once: only the points its
        # gates name are stepped through, so each point gets the verdict it got one by one.
        hits = [0] * len(values)
        self.onsets = [None] * len(values)
        at = finite_at(values)
        gated = len(at) >= GATED_LEAST and only_floats([values[i] for i in at], self._kept())
        k = 0
        while k < len(at):
            if not (gated and self._steady()):
                self._one(at[k], steps, values, hits)
                k += 1
                continue
            rest = [values[i] for i in at[k:]]
            done = 0
            for g in self._gates(rest):
                self._quietly(rest[done:g])
                self._one(at[k + g], steps, values, hits)
                done = g + 1
                if not self._steady():
                    break
            else:
                self._quietly(rest[done:])
                done = len(rest)
            k += done
        self.hits = hits
        return self.window.feed(hits)

    def _one(self, i: int, steps: list[int], values: list[float], hits: list[int]) -> None:
        hit = hits[i] = self._step(steps[i], values[i])
        if hit:
            self.onsets[i] = self._began()

    def onset(self, i: int) -> int | None:
        """The step the event began, for the hit at point i."""
        return self.onsets[i] if i < len(self.onsets) else None


class Excursion(_FoundLater):
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

    def _began(self) -> int:
        return int(self.excursion[2])

    def _steady(self) -> bool:
        return self.out is None and len(self.points) >= self.size and len(self.recent) >= 2

    def _kept(self) -> list[float]:
        return self.points + self.recent

    def _gates(self, values: list[float]) -> list[int]:
        # a point may leave the level only where the median of the last 3 rises by
        # min_rel above the median of the window before it
        level = window_medians(self.points[-self.size:] + values[:-1], self.size)
        now = window_medians(self.recent[-2:] + values, 3)
        np = lazy_numpy()
        return np.flatnonzero(now - level > self.min_rel * np.abs(level)).tolist()

    def _quietly(self, values: list[float]) -> None:
        self.recent = (self.recent + values)[-3:]
        self.points = (self.points + values)[-self.size:]

    def _step(self, step: int, v: float) -> int:
        self.recent = [*self.recent[-2:], v]
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
            least = self.min_rel * abs(level)
            # short of min_rel, the noise need not be measured
            if now - level > least and now - level > max(
                    least, self.z * robust_sd(self.points, level)):
                self.out = [level, float(step), now, 1.0]
                return 0
        self.points.append(v)
        del self.points[: -self.size]
        return 0

    def state(self) -> dict[str, Any]:
        return {"p": self.points, "r": self.recent, "out": self.out, "exc": self.excursion,
                "tail": self.window.tail}


class Isolated(_FoundLater):
    """An isolated spike: a value `factor` times the median of the up to `window` finite
    points before it (at least `min_history` of them), and the point after it back within
    `back` times that median. This is how a reader tells a spike: several times its
    neighbours, then back. No estimate of the noise is needed, so a run of a few points
    or one logged sparsely is judged too, where a jump against the noise of
    its recent changes (`Jump`) has no history yet or is hidden by that noise. It is found
    at the point that comes back, and the finding starts at the spike's step (`onset`).

    Nor a rise smaller than `OF_START` of the series' first value, as for `Jump`: a
    loss at the logger's rounding (a memorised set) moves by multiples of itself at no
    cost. A hit keeps its finding open `hold` points."""

    OF_START = Jump.OF_START

    def __init__(self, factor: float = 3.0, window: int = 5, min_history: int = 3,
                 back: float = 1.5, hold: int = 5,
                 state: dict[str, Any] | None = None) -> None:
        self.factor, self.back = float(factor), float(back)
        self.size, self.min_history = max(1, int(window)), max(1, int(min_history))
        st = state or {}
        self.points: list[float] = list(st.get("p", []))  # the latest finite points
        self.first: float | None = st.get("first")
        # the point waiting for the next: [step, value, the median before it]
        self.pending: list[float] | None = st.get("w")
        # whether the latest point stood `factor` times its median: a point after it that
        # does so too is a stretch of high values, no isolated spike
        self.high = bool(st.get("h", False))
        self.spike: list[float] = list(st.get("s", []))  # the last: [step, value, median,
        #                                                  the point after]
        self.window = KOfN(1, hold, st.get("tail"))
        self.onsets: list[int | None] = []
        self.hits: list[int] = []

    def _began(self) -> int:
        return int(self.spike[0])

    def _steady(self) -> bool:
        return (self.pending is None and not self.high and self.first is not None
                and len(self.points) >= max(self.size, self.min_history))

    def _kept(self) -> list[float]:
        return self.points

    def _gates(self, values: list[float]) -> list[int]:
        # a point may stand high only where it is `factor` times the median before it
        med = window_medians(self.points[-self.size:] + values[:-1], self.size)
        np = lazy_numpy()
        return np.flatnonzero(np.asarray(values) >= self.factor * med).tolist()

    def _quietly(self, values: list[float]) -> None:
        self.points = (self.points + values)[-self.size:]

    def _step(self, step: int, v: float) -> int:
        if self.first is None:
            self.first = v
        hit = 0
        waiting = self.pending
        if waiting is not None:
            self.pending = None
            if v <= self.back * waiting[2]:
                self.spike = [waiting[0], waiting[1], waiting[2], v]
                hit = 1
        pts = self.points
        high = False
        if len(pts) >= self.min_history:
            med = median(pts)
            least = self.OF_START * abs(self.first or 0.0)
            high = med > 0 and v >= self.factor * med and v - med > least
            if high and not self.high:
                self.pending = [float(step), v, med]
        self.high = high
        pts.append(v)
        del pts[: -self.size]
        return hit

    def state(self) -> dict[str, Any]:
        return {"p": self.points, "first": self.first, "w": self.pending, "h": self.high,
                "s": self.spike, "tail": self.window.tail}


class Upturn:
    """A series that has turned up from its lowest point and keeps rising: the median of
    its latest 3 points stands `min_rel` (relative) above its lowest median of 3, at least
    `min_points` points have been logged from that low on (the low included), and the
    Theil-Sen trend through them (the latest `window` at most) rises by `z` standard
    errors of such a rise in the series' own point-to-point noise (`change_noise` of its
    latest `window` changes, and no less than the smallest change it logged: the
    logger's last digit). A loss that has settled wanders about its low with
    no trend; one that turns back up rises steadily, however little (an LSTM's per-epoch
    loss 0.9% above its low over its last 16 epochs rises 6 standard errors). Judged at
    every point of a run's first `DENSE` points, then every `STRIDE` points."""

    DENSE = 200
    STRIDE = 8

    def __init__(self, min_rel: float = 0.005, min_points: int = 8, z: float = 5.0,
                 window: int = 40, state: dict[str, Any] | None = None) -> None:
        self.min_rel, self.z = min_rel, z
        self.min_points, self.size = max(3, int(min_points)), max(4, int(window))
        st = state or {}
        self.tail: list[float] = list(st.get("t", []))  # the latest window + 1 values
        self.since: list[float] = list(st.get("s", []))  # the values since the low
        self.low: list[float] | None = st.get("lo")  # [step, lowest median of 3]
        self.prev: int | None = st.get("p")  # the step of the latest finite point
        self.count = int(st.get("n", 0))
        self.verdict = bool(st.get("v", False))
        self.held: dict[str, float] = dict(st.get("held", {}))

    def feed(self, values: list[float], steps: list[int]) -> list[bool]:
        at = finite_at(values)
        kept = [values[i] for i in at]
        if (len(at) < GATED_LEAST or len(self.tail) < 2
                or not only_floats(kept, self.tail, self.since, self.low[1:] if self.low else [])):
            out = []
            for step, v in zip(steps, values, strict=True):
                if v - v == 0:
                    self._take(step, v)
                    if self.count < self.DENSE or self.count % self.STRIDE == 0:
                        self.verdict = self._judge()
                out.append(self.verdict)
            return out
        # A long batch: the points whose judgement may hold are found at once (`_gates`);
        # the others are taken together (`_advance`), each judgement of them failing.
        start = self.verdict
        batch = _UpturnBatch(kept, steps, at, self.tail[-2:], self.prev, self.count,
                             self._lows(kept))
        verdicts: list[bool] = []  # the verdict after each finite point
        done = 0
        for g in [*self._gates(batch), len(kept)]:
            verdicts += self._advance(batch, done, g)
            if g == len(kept):
                break
            self._take(steps[at[g]], kept[g])
            self.verdict = self._judge()
            verdicts.append(self.verdict)
            done = g + 1
        if len(at) == len(values):
            return verdicts
        out, k = [], 0  # a point that is not finite carries the verdict before it
        for i in range(len(values)):
            if k < len(at) and at[k] == i:
                start = verdicts[k]
                k += 1
            out.append(start)
        return out

    def _lows(self, kept: list[float]) -> tuple[Any, Any]:
        """For each of a batch's finite float points `kept`: the median of the latest 3
        and the place of the latest new low up to it (-1: none in the batch), as numpy
        arrays."""
        np = lazy_numpy()
        med = window_medians(self.tail[-2:] + kept, 3)
        low = self.low[1] if self.low is not None else math.inf
        before = np.minimum.accumulate(np.concatenate(([low], med[:-1])))
        return med, np.maximum.accumulate(np.where(med < before, np.arange(len(kept)), -1))

    def _gates(self, batch: _UpturnBatch) -> list[int]:
        """The places of a batch's finite points judged with enough points since the low
        and the latest 3 points' median `min_rel` above it: only there may a judgement
        hold."""
        np = lazy_numpy()
        med, last = batch.lows
        at = np.arange(len(batch.kept))
        count = self.count + at + 1
        judged = (count < self.DENSE) | (count % self.STRIDE == 0)
        level = np.where(last >= 0, med[np.maximum(last, 0)],
                         self.low[1] if self.low is not None else 0.0)
        since = np.minimum(self.size, np.where(last >= 0, at - last + 2,
                                               len(self.since) + at + 1))
        rel = (med - level) / np.maximum(np.abs(level), 1e-12)
        return np.flatnonzero(judged & (since >= self.min_points)
                              & ~(rel < self.min_rel)).tolist()

    def _advance(self, batch: _UpturnBatch, a: int, b: int) -> list[bool]:
        """Take the batch's finite points a to b (not included), none of whose
        judgements holds; the verdict after each."""
        if b <= a:
            return []
        kept, size = batch.kept, self.size
        self.tail = (self.tail + kept[a:b])[-(size + 1):]
        low = int(batch.lows[1][b - 1])
        if low >= a:  # a new low: the middle of its three points, and since it
            three = (batch.head + kept[max(0, low - 2) : low + 1])[-3:]
            prev = batch.step(low - 1) if low else batch.prev
            self.low = [float(prev if prev is not None else batch.step(low)), median(three)]
            self.since = (three[1:] + kept[low + 1 : b])[-size:]
        else:
            self.since = (self.since + kept[a:b])[-size:]
        self.count += b - a
        self.prev = batch.step(b - 1)
        # the first judged of them (`feed`): from there on the verdict is False
        count = batch.count + a + 1
        first = a if count < self.DENSE else a + (-count) % self.STRIDE
        if first >= b:
            return [self.verdict] * (b - a)
        out = [self.verdict] * (first - a) + [False] * (b - first)
        self.verdict = False
        return out

    def _take(self, step: int, v: float) -> None:
        tail = self.tail
        tail.append(v)
        del tail[: -(self.size + 1)]
        self.count += 1
        self.since.append(v)
        if len(tail) >= 3:
            m = median(tail[-3:])
            if self.low is None or m < self.low[1]:
                # the low is the middle of its three points; what follows it is since
                self.low = [float(self.prev if self.prev is not None else step), m]
                self.since = tail[-2:]
        del self.since[: -self.size]
        self.prev = step

    def _judge(self) -> bool:
        low, since = self.low, self.since
        if low is None or len(since) < self.min_points:
            return False
        now = median(self.tail[-3:])
        rel = (now - low[1]) / max(abs(low[1]), 1e-12)
        if rel < self.min_rel:
            return False
        rise = theil_sen_even(since) * (len(since) - 1)
        # Never below the logger's own step, the smallest change it logged: a loss
        # written to 2 or 4 decimals that sits still has a measured noise of about 0, and
        # one step of its last digit would be a rise of very many standard errors.
        step = min((abs(b - a) for a, b in pairwise(self.tail) if b != a), default=0.0)
        noise = max(change_noise(self.tail), step)
        if rise <= self.z * change_error(since, False, 0.0, noise):
            return False
        self.held = {"low": low[1], "low_step": low[0], "now": now, "rise": rel,
                     "points": float(len(since))}
        return True

    def state(self) -> dict[str, Any]:
        return {"t": self.tail, "s": self.since, "lo": self.low, "p": self.prev,
                "n": self.count, "v": self.verdict, "held": self.held}


class _UpturnBatch:
    """A batch `Upturn` takes at once: its finite points (`kept`, at indices `at` of its
    `steps`), the detector's last 2 values, latest step and count before it, and the
    medians of 3 and latest lows of its points (`Upturn._lows`)."""

    def __init__(self, kept: list[float], steps: list[int], at: list[int] | range,
                 head: list[float], prev: int | None, count: int,
                 lows: tuple[Any, Any]) -> None:
        self.kept, self.steps, self.at, self.head = kept, steps, at, head
        self.prev, self.count, self.lows = prev, count, lows

    def step(self, k: int) -> int:
        """The step of finite point k."""
        return self.steps[self.at[k]]
