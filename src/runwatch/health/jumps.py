"""Detectors of a point that departs from its series' own past: a spike against the
rolling median, a new high, a jump against the recent noise, a step to a new level, an
excursion that comes back, and a rise above the best value so far (the loss and
validation rules' detectors; thresholds, repeats, non-finite values and stalls are in
detectors.py, trends in trends.py and progress.py).

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
    Waiting,
    finite_at,
    mad_sd,
    median,
    robust_sd,
)
from runwatch.health.trendstats import (
    change_error,
    change_noise,
    lazy_numpy,
    only_floats,
    theil_sen_even,
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
                self.spread = (self.noise_k * mad_sd(hist, self.med)
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


class _AgainstTraining:
    """A validation series judged against the training loss logged up to its step.

    Series `a` is the training loss, fed first (`feed_a`); its points wait for the
    validations of their batch (`Waiting`), so a validation reads only the training points
    logged at or before its own step. A hit keeps its finding open `hold` validations.
    Subclasses judge a validation (`_judge`) and take it in (`_take`)."""

    def __init__(self, hold: int, state: dict[str, Any] | None = None) -> None:
        st = state or {}
        self.last: float | None = st.get("last")  # the training loss's latest finite point
        self.waiting = Waiting(st.get("wait"))
        self.window = KOfN(1, hold, st.get("tail"))
        self.hits: list[int] = []
        self.held: dict[str, float] = dict(st.get("held", {}))

    def feed_a(self, steps: list[int], values: list[float]) -> None:
        self._place(math.inf)
        self.waiting.add(steps, values)

    def _place(self, upto: float) -> None:
        """Take the waiting training points logged up to step `upto` as the latest."""
        taken = self.waiting.take(upto)[1]
        if taken:
            self._placed(self.last, taken)
            self.last = taken[-1]

    def _placed(self, before: float | None, taken: list[float]) -> None:
        """Training points `taken` in after `before`, the latest until then (for
        subclasses that keep more than the latest)."""

    def _judge(self, v: float) -> dict[str, float] | None:
        raise NotImplementedError

    def _take(self, v: float) -> None:
        raise NotImplementedError

    def feed(self, steps: list[int], values: list[float]) -> list[bool]:
        hits: list[int] = []
        for step, v in zip(steps, values, strict=True):
            hit = 0
            if v - v == 0:
                self._place(float(step))
                held = self._judge(v)
                if held is not None:
                    hit = 1
                    self.held = held
                self._take(v)
            hits.append(hit)
        self._place(math.inf)
        self.hits = hits
        return self.window.feed(hits)

    def state(self) -> dict[str, Any]:
        return {"last": self.last, "wait": self.waiting.state(), "tail": self.window.tail,
                "held": self.held}


class Diverged(_AgainstTraining):
    """A validation loss above `factor` times its lowest earlier value while the training
    loss's latest point stands above `factor` times the highest it logged before (from
    `min_history` training points on): the weights diverged. A bad batch raises the
    training loss alone, and a model that overfits raises its validation loss while its
    training loss falls; both jumping past twice where they stood is neither, and two
    points of each are enough to see it."""

    def __init__(self, factor: float = 2.0, min_history: int = 2, hold: int = 3,
                 state: dict[str, Any] | None = None) -> None:
        super().__init__(hold, state)
        st = state or {}
        self.factor, self.min_history = float(factor), int(min_history)
        self.top: float | None = st.get("top")  # the training loss's highest before `last`
        self.seen = int(st.get("seen", 0))  # its finite points so far
        self.best: float | None = st.get("best")  # the lowest validation so far

    def _placed(self, before: float | None, taken: list[float]) -> None:
        # the highest of the points before each (the first of equal ones, as max() one
        # by one keeps it)
        earlier = [x for x in (self.top, before) if x is not None] + taken[:-1]
        if earlier:
            self.top = max(earlier)
        self.seen += len(taken)

    def _judge(self, v: float) -> dict[str, float] | None:
        best, top, last = self.best, self.top, self.last
        if (best is not None and best > 0 and v > self.factor * best
                and top is not None and last is not None and top > 0
                and self.seen > self.min_history and last > self.factor * top):
            return {"best": best, "to": v, "ratio": v / best, "top": top,
                    "train_to": last, "train_ratio": last / top}
        return None

    def _take(self, v: float) -> None:
        self.best = v if self.best is None else min(self.best, v)

    def state(self) -> dict[str, Any]:
        return {**super().state(), "top": self.top, "seen": self.seen, "best": self.best}


class GapRising(_AgainstTraining):
    """A validation loss above the validation before it by `min_rel` (relative) while it
    stands at `ratio` times the training loss or more: the higher of the median of the
    training points logged since the validation before and the latest one, so neither one
    easy batch nor a training loss that is itself climbing (a run diverging, its validation
    loss with it) makes the gap. A model that fits its training data that much
    better than held-out data, and is moving further from the held-out data, is
    overfitting, and two validations show it where a trend needs several."""

    KEEP = 256  # training points since the validation before, at most

    def __init__(self, ratio: float = 3.0, min_rel: float = 0.01, hold: int = 3,
                 state: dict[str, Any] | None = None) -> None:
        super().__init__(hold, state)
        st = state or {}
        self.ratio, self.min_rel = float(ratio), float(min_rel)
        self.prev: float | None = st.get("prev")  # the validation before
        self.since: list[float] = list(st.get("since", []))  # training points since it

    def _placed(self, before: float | None, taken: list[float]) -> None:
        self.since += taken
        del self.since[:-self.KEEP]

    def _judge(self, v: float) -> dict[str, float] | None:
        prev = self.prev
        last = self.last
        train = max(median(self.since), last) if self.since and last is not None else last
        if (prev is not None and prev > 0 and v > prev * (1 + self.min_rel)
                and train is not None and train > 0 and v >= self.ratio * train):
            return {"from": prev, "to": v, "train": train, "times": v / train}
        return None

    def _take(self, v: float) -> None:
        self.prev = v
        self.since = []

    def state(self) -> dict[str, Any]:
        return {**super().state(), "prev": self.prev, "since": self.since}


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
            rel = (v - best) / max(abs(best), 1e-12) if v - best >= RESOLUTION else 0.0
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
