"""Detectors of a validation series judged against what it has done before: its distance
from the training loss logged up to its step (a divergence, a gap that keeps growing) and
a rise above its own best so far. Split from jumps.py, whose single-series jumps they sit
beside; the conventions are detectors.py's."""

from __future__ import annotations

import math
from typing import Any

from runwatch.health.detectors import (
    KOfN,
    Waiting,
    median,
)
from runwatch.health.jumps import RESOLUTION


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


class AboveBest:
    """A value that lies above its best so far (the running minimum of the points
    before it) by `min_rel` of that best on the last `k` points in a row, or by `single`
    on one point, once `min_points` points are in: a validation loss turning up from its
    minimum (an early sign of overfitting, before a trend over several validations
    shows). It holds while the series stays above the best by half of `min_rel`.

    A rise smaller than `RESOLUTION` is no rise: trainers log a loss to 4 decimals (the
    HF Trainer rounds there), and a loss below that resolution, a held-out set predicted
    all but perfectly (a DPO loss of 3e-7 at a margin of 15), moves by its own
    floating-point rounding, a tenth of itself from one validation to the next.

    With `direction` "down" it judges a score the other way: below its best so far (the
    running maximum, while that is above 0) by `min_rel` of it, and by `min_drop` in the
    score's own unit (a held-out accuracy fallen from 0.8 to 0 in one validation, where a
    trend over several reads no slope). With `back_k`, a holding finding is released only
    once the series is back within half of `min_rel` of its best on that many points in a
    row (a noisy score that touches its best once between falls is one episode)."""

    def __init__(self, min_rel: float = 0.01, k: int = 2, single: float = 0.05,
                 min_points: int = 3, direction: str = "up", min_drop: float = 0.0,
                 back_k: int = 1, state: dict[str, Any] | None = None) -> None:
        # a score that falls is judged as its negation rises: its best is the running
        # maximum, negated; what is kept and reported is in the score's own sign
        self.sign = -1.0 if direction == "down" else 1.0
        self.min_drop = min_drop
        self.min_rel, self.single = min_rel, single
        self.k, self.min_points = max(1, int(k)), max(2, int(min_points))
        st = state or {}
        self.best: float | None = st.get("best")
        self.count = int(st.get("n", 0))  # finite points seen
        self.above = int(st.get("above", 0))  # points in a row above the best by min_rel
        self.held = bool(st.get("held", False))
        self.back_k = max(1, int(back_k))
        self.back = int(st.get("back", 0))  # points in a row back near the best, while held
        self.rise: list[float] = list(st.get("rise", []))  # [best, value]

    def feed(self, values: list[float]) -> list[bool]:
        out = []
        sign = self.sign
        for value in values:
            if value - value != 0:
                out.append(self.held)
                continue
            v = sign * value
            self.count += 1
            best = self.best
            if best is None or v <= best:
                self.best, self.above = v, 0
                if self.held:  # a new best is a point back near it
                    self.back += 1
                    self.held = self.back < self.back_k
                if not self.held:
                    self.back = 0
                out.append(self.held)
                continue
            held_before = self.held
            rel = (v - best) / max(abs(best), 1e-12) if v - best >= RESOLUTION else 0.0
            near = rel  # how far it stands from its best, for a finding that holds
            if sign < 0 and (best >= 0 or v - best < self.min_drop * (1 - 1e-9)):
                # a score's fall opens a finding from a best above 0, and by min_drop in
                # its unit too (0.6 - 0.4 is 0.19999999999999996)
                rel = 0.0
            self.above = self.above + 1 if rel >= self.min_rel else 0
            if self.held:
                # released once back within half of min_rel on `back_k` points in a row
                self.back = self.back + 1 if near < 0.5 * self.min_rel else 0
                self.held = self.back < self.back_k
            elif self.count >= self.min_points and (
                    self.above >= self.k or (self.single > 0 and rel >= self.single)):
                self.held = True
            if self.held:
                # a rise as it is now; a fall at its deepest in this episode
                deepest = sign < 0 and held_before and self.rise and self.rise[1] < value
                self.rise = [sign * best, self.rise[1] if deepest else value]
            out.append(self.held)
        return out

    def state(self) -> dict[str, Any]:
        return {"best": self.best, "n": self.count, "above": self.above, "held": self.held,
                "back": self.back, "rise": self.rise}
