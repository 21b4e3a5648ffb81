"""Whether a rising series has risen since its start, judged against its own noise: a
reward that has not risen (`NoImprovement`), a metric that shows learning (`Learning`,
which only lowers a severity) and a value under a fraction of its start (`BelowStart`).
Split from progress.py, which judges a series that should fall (`NoProgress`) and where a
log starts in its run (`EpochStart`)."""


from __future__ import annotations

import math
from bisect import bisect_right
from typing import Any

from runwatch.health.detectors import median
from runwatch.health.progress import EpochStart, keep, starts_mid_run
from runwatch.health.trendstats import (
    lazy_numpy,
    mean_gap,
    median_gap_error,
    pair_slopes,
    point_noise,
    theil_sen,
    theil_sen_apart,
)


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
    changes nothing.

    A series that has gained twice the opening edge on `CONFIRM` judgements in a row has
    risen: from then on it holds only once the latest median is back below the start's.
    A reward that rose beyond its noise and then levels off is a run that learned; judged
    at every point, its latest median dips within one standard error of the start by
    chance on some judgement of a long run (a reward of noise ±0.2 per point that rose
    0.44 -> 0.58, judged on 25-point medians, did at one of 90), and a dip is not the
    run failing to learn; a reward that has lost all it gained is.

    `held["judged"]` is how many points the verdict stands on, which a warning asks for
    (Rule params `warn_after`); it is counted only where three things hold besides the
    opening condition. The Theil–Sen trend through the points the two medians take (all
    of them up to twice `head`) has not risen by more than `z` standard errors either: it
    reads every point, where two medians of a reward that is a mix of a few outcomes (a
    pass or a fail) blur a steady rise. The points logged while the learning rate still
    rises (`feed_lr`; its warm-up, when the policy barely moves) do not count. And the
    log holds the run's start (`starts_mid_run`: its first step is within
    `WINDOW_STRIDES` logging strides of step 0, and its epochs do not say otherwise): a
    window cut from a longer run or a resumed one cannot tell a reward that plateaued
    after learning from one that never rose, so there it stays info."""

    CONFIRM = 6

    def __init__(self, direction: str = "up", z: float = 1.0, min_points: int = 10,
                 head: int = 25, early_points: int = 0, mean_z: float = math.inf,
                 state: dict[str, Any] | None = None) -> None:
        st = state or {}
        self.mean_z = mean_z
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
        self.gained = int(st.get("g", 0))  # judgements in a row at twice the edge
        self.risen = bool(st.get("r", False))  # it had that on CONFIRM in a row
        # The learning rate's last value and the points logged before its latest rise,
        # while it has only risen (its warm-up); `warming` false once it has not.
        self.lr: float | None = st.get("lr")
        self.warming = bool(st.get("w", True))
        self.warm = int(st.get("wp", 0))
        self._lr_at: dict[int, float] = {}
        # the run's epochs (the engine's, shared by the rules that ask it)
        self.epochs = EpochStart()
        # the slopes between the head's points, once it is full (`_trend_flat`)
        self._head_slopes: Any = None  # a numpy array

    def feed_lr(self, steps: list[int], values: list[float]) -> None:
        """Note the learning rate at `steps`, for the reward points of the same steps that
        `feed` is handed next."""
        self._lr_at = {s: v for s, v in zip(steps, values, strict=True) if v - v == 0}

    def _note_lr(self, step: int) -> None:
        lr = self._lr_at.get(step)
        if lr is None or not self.warming:
            return
        if self.lr is not None:
            if lr > self.lr:
                self.warm = self.count  # the points before this one ran at a lower rate
            else:
                self.warming = False
        self.lr = lr

    def feed(self, steps: list[int], values: list[float]) -> list[bool]:
        out = []
        for step, v in zip(steps, values, strict=True):
            if v - v == 0:
                if self.first_step is None:
                    self.first_step = step
                keep(self.head, self.tail, self.size, v)
                self._note_lr(step)
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
        self.held = self._evidence(start, now, point_noise(self.tail), k, step)
        return True

    def _judge(self, step: int) -> bool:
        k = min(self.count // 2, self.size)
        start, now = median(self.head[:k]), median(self.tail[-k:])
        noise = point_noise(self.tail)
        error = median_gap_error(noise, k)
        gain = self.sign * (now - start)
        # the means risen by `mean_z` errors count as the twice-the-edge gain that
        # releases a finding, whatever the medians show
        means = self._means_rose(k)
        self.gained = self.gained + 1 if means or gain > 2 * self.z * error else 0
        self.risen = self.risen or self.gained >= self.CONFIRM
        # Once it holds, it takes twice the gain on CONFIRM judgements in a row to
        # release: a reward hovering near the limit does not resolve and reopen a finding
        # every few points (it opens at once: that is what a user waits for).
        holds = not means and gain <= (2 if self.verdict else 1) * self.z * error
        if self.risen and not self.verdict:
            holds = not means and gain < 0
        if holds:
            self.streak = 0
            # What the finding reports (and the point count its severity grows with) is
            # taken only where the opening condition itself holds: a reward rising slowly
            # that sits between one and two standard errors keeps an open finding, but
            # does not turn it into a warning.
            flat = gain <= self.z * error
            judged = int(self.held.get("judged", 0))
            if flat or not self.held:
                self.held = self._evidence(start, now, noise, k, step)
            if flat and self._trend_flat(noise):
                judged = 0 if self._window(step) else self.count - self.warm
            self.held["judged"] = judged
            return True
        self.streak = self.streak + 1 if self.verdict else 0
        if self.verdict and self.streak < self.CONFIRM:
            return True
        self.streak = 0
        return False

    def _evidence(self, start: float, now: float, noise: float, k: int,
                  step: int) -> dict[str, float]:
        """What a finding reports of a judgement: the two medians it compared, each over
        `window` points, the steps it spans, and the series' first and latest points (a
        reward at 0.6 for its first 4 points and 0 after has both medians at 0: the
        message says it fell all the same)."""
        first = self.first_step or 0
        return {"start": start, "now": now, "effect": now - start, "noise": noise,
                "points": self.count, "span": step - first, "window": k,
                "from_step": first, "to_step": step, "first_point": self.head[0],
                "latest_point": self.tail[-1]}

    def _means_rose(self, k: int) -> bool:
        """Whether the mean of the latest k points lies above the first k's by `mean_z`
        standard errors of that difference (`mean_gap`, a Welch test): a reward that is
        mostly 0 with a growing share of successes rises in its mean while both medians
        stay 0."""
        if not math.isfinite(self.mean_z) or k < 5:
            return False
        gap, error = mean_gap(self.head[:k], self.tail[-k:])
        return self.sign * gap > self.mean_z * error

    def _trend_flat(self, noise: float) -> bool:
        """Whether the Theil–Sen trend through the points the medians take (the first
        `head` and the latest `head`, all of them while they overlap) rises by no more
        than `z` standard errors of such a rise in the series' point noise."""
        head, tail = self.head, self.tail
        first = self.count - len(tail)
        if first >= len(head) == self.size and len(tail) >= 2:
            # apart (a long run): the head's own slopes are the same at every judgement
            if self._head_slopes is None:
                self._head_slopes = lazy_numpy().asarray(pair_slopes(head), dtype=float)
            xs = [*range(len(head)), *range(first, self.count)]
            slope = theil_sen_apart(head, tail, first, self._head_slopes)
        else:
            at = dict(enumerate(head))
            at.update((first + i, v) for i, v in enumerate(tail))
            xs = sorted(at)
            slope = theil_sen([float(i) for i in xs], [at[i] for i in xs])
        mean = sum(xs) / len(xs)
        spread = sum((x - mean) ** 2 for x in xs)
        if spread <= 0:
            return True
        rise = self.sign * slope * (xs[-1] - xs[0])
        return rise <= self.z * noise * (xs[-1] - xs[0]) / math.sqrt(spread)

    def _window(self, step: int) -> bool:
        """Whether the log does not hold the run's start (`starts_mid_run`)."""
        first = self.first_step or 0
        return starts_mid_run(first, step, self.count, self.epochs)

    def state(self) -> dict[str, Any]:
        return {"head": self.head, "tail": self.tail, "n": self.count, "fs": self.first_step,
                "held": self.held, "v": self.verdict, "s": self.streak, "g": self.gained,
                "r": self.risen, "lr": self.lr, "w": self.warming, "wp": self.warm}


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
        # The last batch: its steps and values, and the gate as it stood before it.
        self._batch: tuple[list[int], list[float], list[float], list[float], int, bool] | None
        self._batch = None

    def feed(self, values: list[float], steps: list[int] | None = None) -> None:
        if steps is not None and len(steps) > 1:
            self._batch = (steps, values, list(self.head), list(self.tail), self.count,
                           self.rising)
        else:
            self._batch = None
        head, tail, self.count = self._take(values, self.head, self.tail, self.count)
        if self.count >= self.min_points and values:
            self.rising = self._judge(head, tail, self.count)

    def rising_at(self, step: int) -> bool:
        """Whether the run had learned by `step` of the last batch, as a live run indexed
        a line at a time judges it there: a file read whole feeds the gate up to 1,024
        steps ahead of the rules it lowers (`rising` is its verdict at the batch's end)."""
        batch = self._batch
        if batch is None or step >= batch[0][-1] or any(
                b < a for a, b in zip(batch[0], batch[0][1:], strict=False)):
            return self.rising
        steps, values, head, tail, count, rising = batch
        n = bisect_right(steps, step)
        head, tail, count = self._take(values[:n], list(head), list(tail), count)
        return self._judge(head, tail, count) if count >= self.min_points and n else rising

    def _take(self, values: list[float], head: list[float], tail: list[float],
              count: int) -> tuple[list[float], list[float], int]:
        for v in values:
            if v - v != 0:
                continue
            keep(head, tail, self.size, v)
            count += 1
        return head, tail, count

    def _judge(self, head: list[float], tail: list[float], count: int) -> bool:
        k = min(count // 2, self.size)
        now = sum(tail[-k:]) / k
        noise = point_noise(tail)
        if self.level is not None:
            return now - self.level > self.z * noise / math.sqrt(k)
        start = sum(head[:k]) / k
        return now - start > self.z * noise * math.sqrt(2 / k)

    def state(self) -> dict[str, Any]:
        return {"head": self.head, "tail": self.tail, "n": self.count, "r": self.rising}




class BelowStart:
    """Whether a series stands at `fraction` of where it started or below: the start is the
    higher of its first value and the median of its first `size` values, the level now the
    median of its latest `size` (one odd point moves no median of 3). A fall judged over a
    trailing window (`Trend`) is read from the series' latest level, which may be a peak
    it rose to after the start; this asks the same fall of the start. A start at or below
    0 says nothing of a fall (a Gaussian policy's entropy), and passes."""

    def __init__(self, fraction: float, size: int = 3,
                 state: dict[str, Any] | None = None) -> None:
        st = state or {}
        self.fraction, self.size = fraction, max(1, int(size))
        self.head: list[float] = list(st.get("h", []))  # the first `size` finite values
        self.tail: list[float] = list(st.get("t", []))  # the latest `size`

    def feed(self, values: list[float]) -> list[bool]:
        """Per point, whether the series stood that far below its start there."""
        out = []
        for v in values:
            if v is not None and v - v == 0:
                keep(self.head, self.tail, self.size, v)
            out.append(self.holds())
        return out

    def start(self) -> float | None:
        if len(self.head) < self.size:
            return None
        return max(self.head[0], median(self.head))

    def holds(self) -> bool:
        start = self.start()
        if start is None:
            return False
        return start <= 0 or median(self.tail) <= self.fraction * start

    def state(self) -> dict[str, Any]:
        return {"h": self.head, "t": self.tail}
