"""Detectors of a point that departs from its series' own past: a spike against the
rolling median, a new high, a jump against the recent noise and a step to a new level
(the loss rules' detectors; excursions that come back and upturns are in excursions.py,
a validation series against training and its best in against.py; thresholds, repeats,
non-finite values and stalls are in detectors.py, trends in trends.py and progress.py).

Like every detector (detectors.py says how), each takes the new points of a series in
batches, answers for every new point whether its condition holds there, keeps bounded
state and round-trips through a JSON-able dict.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from itertools import pairwise
from operator import lt
from typing import Any

from runwatch.health.detectors import (
    INF,
    KOfN,
    finite_at,
    mad_sd,
    median,
    robust_sd,
)
from runwatch.health.trendstats import (
    bounded,
    lazy_numpy,
    only_floats,
    window_medians,
)

# The last of the 4 decimals trainers log a loss to (the HF Trainer rounds there): a change
# or a noise below it is the logger's rounding, not a measurement.
RESOLUTION = 1e-4
# Fewer finite points than this in a batch (a live one) are stepped through one by one:
# numpy's start costs more than the points.
GATED_LEAST = 32


class Spike:
    """A value `factor` times the rolling median of the previous `window` points (or,
    with `drop` < 1, below `drop` times it). The median is refreshed every `BLOCK`
    points, which keeps the per-point cost to one comparison. A spike keeps its finding
    open for `hold` points so that a burst of spikes reads as one finding.

    With `noise_k`, a rise must also stand `noise_k` robust standard deviations of the
    window (its median absolute deviation, which earlier spikes barely move) above its
    median, refreshed with it: a series whose spread is of the order of its median (a KL
    estimated as the mean log-ratio of a few samples, negative on a third of its steps)
    reaches `factor` times that median by noise alone."""

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
        noise_k: float = 0.0,
    ) -> None:
        self.factor, self.drop, self.floor = factor, drop, floor
        self.noise_k = noise_k
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
        self.spread = float(st.get("spread", 0.0))  # noise_k MAD-sds of the window
        self.seen = int(st.get("seen", 0))
        self.refresh_at = int(st.get("at", 0))
        # how many of the latest points in a row stood past the limit: a series that
        # stepped up and stays there, which a message tells from spikes that repeat
        self.row = int(st.get("row", 0))

    def feed(self, values: list[float]) -> list[bool]:
        hits: list[int] = []
        hist, size = self.history, self.size
        factor, drop, floor = self.factor, self.drop, self.floor
        i, m = 0, len(values)
        while i < m:
            if self.seen >= self.refresh_at:
                self.med = median(hist) if len(hist) >= max(1, self.min_history) else None
                # The median absolute deviation alone (not robust_sd): the mean one would
                # let the window's earlier spikes raise the bar for the next ones.
                self.spread = (bounded(self.noise_k * mad_sd(hist, self.med))
                               if self.noise_k and self.med is not None else 0.0)
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
                hi = (max(factor * max(med, self.min_median), floor, med + self.spread)
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
        for hit in hits:
            self.row = self.row + 1 if hit else 0
        return self.window.feed(hits)

    def reference(self) -> float | None:
        """The current rolling median, for the finding's evidence."""
        return median(self.history) if self.history else None

    def state(self) -> dict[str, Any]:
        return {"history": self.history, "tail": self.window.tail, "med": self.med,
                "seen": self.seen, "at": self.refresh_at, "spread": self.spread,
                "row": self.row}


class AboveMax:
    """A value above `factor` times the highest finite value the series logged before it,
    from `min_history` points on and only while that highest value is above 0: a jump no
    estimate of the series' noise is needed to see, so it is judged on a run's first
    points too. A hit keeps its finding open `hold` points, so a burst reads as one.

    With `magnitude`, values are compared by their size whatever their sign (a policy
    loss, which sits near 0 on either side), and only while the largest earlier size is
    at least `floor`: below it a loss is β times a KL near 0, which grows by orders of
    magnitude as the policy leaves its reference."""

    def __init__(self, factor: float = 2.0, min_history: int = 3, hold: int = 5,
                 magnitude: bool = False, floor: float = 0.0,
                 state: dict[str, Any] | None = None) -> None:
        st = state or {}
        self.factor, self.min_history = float(factor), int(min_history)
        self.magnitude, self.floor = magnitude, max(0.0, float(floor))
        self.top: float | None = st.get("top")  # the highest finite value so far
        self.seen = int(st.get("seen", 0))  # finite values so far
        self.window = KOfN(1, hold, st.get("tail"))
        self.hits: list[int] = []
        self.jump: list[float] = list(st.get("jump", []))  # the latest: [highest before, value]

    def feed(self, values: list[float]) -> list[bool]:
        hits: list[int] = []
        for value in values:
            hit = 0
            if value - value == 0:
                v = abs(value) if self.magnitude else value
                top = self.top
                if (top is not None and top > 0 and top >= self.floor
                        and self.seen >= self.min_history and v > self.factor * top):
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
            self.noise = [med, max(robust_sd(d, med), RESOLUTION)]
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
        # At steps that rise, the quiet stretches of a steady detector (no shift held, its
        # window full) are taken at once: only the points its gates name are stepped
        # through, so each point gets the verdict it got one by one.
        out = [False] * len(values)
        at = finite_at(values)
        gated = (steps is not None and len(at) >= GATED_LEAST
                 and (self.last_step is None or steps[0] > self.last_step)
                 and all(map(lt, steps, steps[1:]))
                 and only_floats([values[i] for i in at], self.points))
        i = 0
        while i < len(values):
            if not (gated and self._steady()):
                out[i] = self._point(i, values, steps)
                i += 1
                continue
            assert steps is not None
            idx = at[bisect_left(at, i):]
            done = i
            for g in self._gates([values[j] for j in idx]):
                self._quietly(values, steps, at, done, idx[g])
                out[idx[g]] = self._point(idx[g], values, steps)
                done = idx[g] + 1
                if not self._steady():
                    break
            else:
                self._quietly(values, steps, at, done, len(values))
                done = len(values)
            i = done
        return out

    def _point(self, i: int, values: list[float], steps: list[int] | None) -> bool:
        """Take point i of the batch; whether a shift holds there."""
        v = values[i]
        if steps is not None:
            step = steps[i]
            if self.last_step is not None and step <= self.last_step:
                self.hist = [h for h in self.hist if h[0] <= step]
                self.points = [h[1] for h in self.hist[-self.window:]]
                self.level = None
            self.last_step = step
        if v - v != 0:
            return self.level is not None
        self.points.append(v)
        if len(self.points) > self.window + self.stay:
            del self.points[0]
        if steps is not None:
            self._remember([[steps[i], v]])
        if self.level is not None:
            if v > self.level + 0.5 * self.min_rel * abs(self.level):
                return True
            self.level = None
        return self._shifted()

    def _remember(self, points: list[Any]) -> None:
        """Add [step, value] points to the history, thinning its older half each time
        it grows past HISTORY."""
        done = 0
        while done < len(points):
            room = self.HISTORY + 1 - len(self.hist)
            self.hist += points[done : done + room]
            done += room
            if len(self.hist) > self.HISTORY:  # thin the older half
                half = self.HISTORY // 2
                self.hist = self.hist[:half:2] + self.hist[half:]

    def _steady(self) -> bool:
        """Whether no shift holds and each point fills the window (`_gates`)."""
        return self.level is None and len(self.points) >= self.window + self.stay - 1

    def _gates(self, values: list[float]) -> list[int]:
        """Of finite float `values` about to be taken from a steady state, those whose
        last `stay` points may stand `min_rel` above the level before (taken with numpy);
        the others shift nothing."""
        np = lazy_numpy()
        series = self.points + values
        at, stay, m = len(self.points) - self.stay, self.stay, len(values)
        level = window_medians(series, 3)[at - 2 : at - 2 + m]
        low = np.lib.stride_tricks.sliding_window_view(
            np.asarray(series, dtype=np.float64), stay).min(axis=1)[at + 1 : at + 1 + m]
        return np.flatnonzero(low - level > self.min_rel * np.abs(level)).tolist()

    def _quietly(self, values: list[float], steps: list[int], at: list[int] | range,
                 lo: int, hi: int) -> None:
        """Take points lo to hi (not included) of a steady batch, none of them a shift."""
        kept = at[bisect_left(at, lo) : bisect_left(at, hi)]
        if kept:
            self.points = (self.points + [values[j] for j in kept])[-(self.window + self.stay):]
            # thinned by their places, and only those kept made [step, value]
            self._remember(list(kept))
            self.hist = [h if isinstance(h, list) else [steps[h], values[h]]
                         for h in self.hist]
        if hi > lo:
            self.last_step = steps[hi - 1]

    def _shifted(self) -> bool:
        if len(self.points) < self.window + self.stay:
            return False
        before, after = self.points[: self.window], self.points[self.window :]
        # The level just before: a loss still falling sits below its window's median.
        level = median(before[-3:])
        rise = min(after) - level
        least = self.min_rel * abs(level)
        if not rise > least:
            return False  # short of min_rel: the noise need not be measured
        diffs = [b - a for a, b in pairwise(before)]
        center = median(diffs)
        if rise > max(least, self.z * robust_sd(diffs, center)):
            self.level, self.shift = level, [level, after[-1]]
            return True
        return False

    def state(self) -> dict[str, Any]:
        return {"p": self.points, "level": self.level, "shift": self.shift,
                "last": self.last_step, "hist": self.hist}
