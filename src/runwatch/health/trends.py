"""Trend detectors shared by the health rules: Theil–Sen slopes on bucket medians and two
series diverging ("has not moved since the start" is progress.py; the statistics,
trendstats.py).

A series is grouped into buckets of a few points; each completed bucket contributes
its median step and value, and the detectors judge on those, so a batch costs one
small Theil–Sen per bucket whatever the run's length.
"""

from __future__ import annotations

import math
from itertools import accumulate, pairwise
from typing import Any

from runwatch.health.detectors import Waiting, count_upto, finite_at, median, robust_sd
from runwatch.health.progress import EpochStart, NoProgress, starts_mid_run
from runwatch.health.trendstats import (
    AHEAD_LEAST,
    MOST_MEDIAN,
    Buckets,
    Onsets,
    beyond_noise,
    change_error,
    change_noise,
    effect,
    judge,
    lazy_numpy,
    median_points,
    point_noise,
    span_effects,
    theil_sen,
    thin,
    window_change_noises,
    window_effects,
)


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
        undone: int = 0,
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
        # With undone, a rise (or fall) holds only while the series has not moved back as
        # far as it moved, within a quarter window, over the last `undone` windows
        # (`undone_lately`): a loss that climbs through each epoch and steps back down at
        # the next one's start is in a cycle, and one whose spikes come straight back moves
        # that far in its noise.
        self.undone = max(0, int(undone))
        self.keeps = bool(recent_z or self.undone or (noise_z and self.buckets.size > 1))
        self.size = nb * self.buckets.size
        self.points: list[list[float]] = [list(p) for p in (state or {}).get("p", [])]
        self.past: list[float] = list((state or {}).get("u", []))  # the last `undone` windows
        # The batch (its steps and values), the indices of its finite points, of which
        # the first `_taken` are taken, and the points and past kept before it (`_sync`).
        self._batch: tuple[list[int], list[float]] = ([], [])
        self._at: list[int] | range = []
        self._taken = 0
        self._kept: tuple[list[list[float]], list[float]] = (self.points, self.past)
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
        # the steps its window spanned then (the first and last bucket's middle steps):
        # the effect is the change between them, which a message names
        self.held_span: list[float] | None = (state or {}).get("hs")
        # the effects of the batch's windows, taken at once (`look_ahead`), those of them
        # that show no trend (`idle`), which are not judged, and the latest one judged
        self.ahead: dict[int, float] = {}
        self.idle: set[int] = set()
        self._judged_at = -1

    def feed(self, steps: list[int], values: list[float]) -> list[bool]:
        self.ahead, self.idle, self._judged_at = {}, set(), -1
        if not self.keeps:
            return self._noted(judge(self.buckets, steps, values, self))
        # The points are kept to judge the latest half of each window (and its noise),
        # taken up to each closing bucket's last point, so a batch is judged as if fed a
        # point at a time.
        self._batch = (steps, values)
        self._at = finite_at(values)
        self._taken = 0
        self._kept = (self.points, self.past)
        out = judge(self.buckets, steps, values, self)
        self.take_upto(len(values) - 1)
        self._sync()
        return self._noted(out)

    def _noted(self, out: list[bool]) -> list[bool]:
        """`out`, once the effect of the batch's last judgement is the one kept: one
        not made (`idle`) notes only its effect."""
        last = max(self.idle, default=-1)
        if last > self._judged_at:
            self.last_effect = self.ahead[last]
        return out

    def take_upto(self, end: int) -> None:
        """Take the batch's points up to index `end` (the closing point of a bucket): a
        judgement that reads them keeps them first (`_sync`)."""
        if self.keeps:
            self._taken = max(self._taken, count_upto(self._at, end))

    def _sync(self) -> None:
        """Keep the latest window of points taken (and `undone` windows of values)."""
        points, past = self._kept
        (steps, values), at, taken, size = self._batch, self._at, self._taken, self.size
        self.points = [[float(steps[i]), values[i]] for i in at[max(0, taken - size) : taken]]
        if taken < size:
            self.points = points[-(size - taken):] + self.points
        if self.undone:
            keep = self.undone * size
            self.past = [values[i] for i in at[max(0, taken - keep) : taken]]
            if taken < keep:
                self.past = past[-(keep - taken):] + self.past

    def undone_lately(self, ys: list[float]) -> bool:
        """Whether, over the last `undone` windows, the series swung against the trend by
        as much as the trend's change over the window (the effect at the window's level):
        it rose that far from a low of those windows and fell back as far within a quarter
        window (for a rise; the mirror for a fall), on medians of 3 points (one odd point
        moves no median of 3). A steep fall early in a run has risen to nothing first."""
        span = max(2, self.size // 4)
        past = self.past
        sign = -1.0 if self.direction == "down" else 1.0
        smooth = [sign * median(past[max(0, i - 1) : i + 2]) for i in range(len(past))]
        level = max(abs(median(ys)), self.floor) if self.relative else 1.0
        change = abs(self.last_effect) * level
        low = list(accumulate(smooth, min))  # the lowest point up to each
        for j in range(1, len(smooth)):
            lo = max(0, j - span)
            top = max(range(lo, j), key=smooth.__getitem__)
            if (smooth[top] - smooth[j] >= change
                    and smooth[top] - low[top] >= change):
                return True
        return False

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

    def look_ahead(self, js: list[int], closed: list[int]) -> None:
        """Take the effects of the batch's windows to be judged (`js`) at once, and note
        those that show no trend whether one held before or not (`idle`): a judgement
        on them would only note its effect."""
        self.ahead = window_effects(self.buckets, js, self.relative, self.floor)
        if not self.ahead:
            return
        np = lazy_numpy()
        at = list(self.ahead)
        effects = np.asarray([self.ahead[j] for j in at], dtype=np.float64)
        # `trend_holds` at both of its edges, a trend held before and none
        me, direction = self.min_effect, self.direction
        if direction == "flat":
            shows = (np.abs(effects) < 3.0 * me) | (np.abs(effects) < me)
        elif direction == "not_up":
            shows = (effects < 3.0 * me) | (effects < me)
        elif direction == "up":
            shows = (effects >= 0.5 * me) | (effects >= me)
        else:
            shows = (effects <= -(0.5 * me)) | (effects <= -me)
        self.idle = set(np.asarray(at)[~shows].tolist())

    def judge(self, j: int) -> bool:
        xs, ys = self.buckets.upto(j)
        if len(xs) < self.min_buckets:
            return False
        ahead = self.ahead.get(j)
        self.last_effect = effect(xs, ys, self.relative, self.floor) if ahead is None else ahead
        self._judged_at = j
        holds = trend_holds(self.direction, self.last_effect, self.min_effect, self.verdict)
        if holds and self.direction != "flat":
            noise = None
            if self.keeps:
                self._sync()  # the points up to this judgement
            if self.keeps and self.buckets.size > 1 and len(self.points) > 2:
                # a median of k points has about 1/sqrt(k) of a point's noise
                noise = change_noise([p[1] for p in self.points]) / math.sqrt(
                    self.buckets.size)
            holds = beyond_noise(ys, self.last_effect, self.noise_z, self.relative,
                                 self.floor, noise)
        if holds and self.recent_z and self.direction != "flat":
            holds = self.still_moving(self.verdict)
        if holds and self.undone and self.direction in ("up", "down"):
            holds = not self.undone_lately(ys)
        if holds:
            self.held_effect = self.last_effect
            self.held_span = [xs[0], xs[-1]]
        return holds

    def state(self) -> dict[str, Any]:
        st = {"b": self.buckets.state(), "v": self.verdict, "e": self.last_effect,
              "h": self.held_effect}
        if self.held_span is not None:
            st["hs"] = self.held_span
        if self.keeps:
            st["p"] = self.points
        if self.undone:
            st["u"] = self.past
        return st


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
        self._fed, self._upto = 0, -1
        self.a_effect, self.b_effect, self.relative = a_effect, b_effect, relative
        self.floor = 1e-6  # the level a relative change is taken against, at least
        # the effects of the batch's windows of b, taken at once, and those of its
        # judgements that fail on that effect alone (`look_ahead`)
        self.ahead: dict[int, float] = {}
        self.quiet: set[int] = set()
        self.noise_ahead: dict[int, float] = {}  # b's noise at a judgement, taken at once
        self.window_noise: dict[int, float] = {}  # that of b's window (`change_error`)
        self.a_ahead: dict[int, float] = {}  # the reference's effect over b's window
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
        self._pending, self._fed, self._upto = values, 0, -1
        out = judge(self.b, steps, values, self)
        self.take_upto(len(values) - 1)
        self._tail()
        return out

    def look_ahead(self, js: list[int], closed: list[int]) -> None:
        """Take the effects of b's windows to be judged (`js`; `closed`: the index of
        each bucket's last point in the batch) at once, and note the judgements that fail
        on that effect alone, however the last one went (`quiet`): b's trend falls short
        of the edge of a trend that already holds. With a_noise_z, take the noise of b's
        latest points at the others too."""
        self.ahead = window_effects(self.b, js, self.relative, self.floor)
        held = 0.5 * self.b_effect  # `trend_holds`'s edge for a trend that holds
        self.quiet = set()
        if self.b_dir == "down":
            self.quiet = {j for j, e in self.ahead.items() if e > -held}
        elif self.b_dir == "up":
            self.quiet = {j for j, e in self.ahead.items() if e < held}
        elif self.b_dir == "flat":
            self.quiet = {j for j, e in self.ahead.items() if abs(e) >= 3.0 * self.b_effect}
        b = self.b
        left = [j for j in self.ahead if j not in self.quiet]
        # the reference's effect over each window's steps (`span_effects`)
        self.a_ahead = span_effects(
            self.a, {j: (b.xs[b.base + j + 1 - b.keep], b.xs[b.base + j]) for j in left},
            self.relative, self.floor, Trend.BUCKETS)
        self.window_noise = {}
        if self.b_dir == "not_up" and self.noise_z:  # b's noise where it is not flat
            rows = [j for j in left if abs(self.ahead[j]) >= self.b_effect]
            if len(rows) >= AHEAD_LEAST:
                noises = window_change_noises(b.ys, [b.base + j + 1 for j in rows], b.keep)
                self.window_noise = {j: n for j, n in zip(rows, noises, strict=True)
                                     if n is not None}
        self.noise_ahead = {}
        if self.a_noise_z and self.b_dir not in ("flat", "not_up") and self.ahead:
            # b's latest TAIL points as `_tail` keeps them at each judgement
            before = len(self.b_tail)
            finite = list(accumulate(1 if v - v == 0 else 0 for v in self._pending))
            at = {j: before + finite[closed[j]] for j in left}
            at = {j: c for j, c in at.items() if c >= NoProgress.TAIL}
            if len(at) >= AHEAD_LEAST:
                points = self.b_tail + [v for v in self._pending if v - v == 0]
                noises = window_change_noises(points, list(at.values()), NoProgress.TAIL)
                self.noise_ahead = {j: n for j, n in zip(at, noises, strict=True)
                                    if n is not None}

    def take_upto(self, end: int) -> None:
        """Note that the judged series' points up to index `end` are in: `_tail` keeps
        them when its noise is asked for (a_noise_z)."""
        self._upto = end

    def _tail(self) -> list[float]:
        """The judged series' latest points, up to the one `take_upto` last noted."""
        if self.a_noise_z and self._upto >= self._fed:
            self.b_tail.extend(v for v in self._pending[self._fed:self._upto + 1]
                               if v - v == 0)
            self._fed = self._upto + 1
            del self.b_tail[: -NoProgress.TAIL]
        return self.b_tail

    def judge(self, j: int) -> bool:
        eb = self.ahead.get(j)  # a whole window's, taken with the batch's others
        if j in self.quiet:  # b's effect alone fails it, however the last one went
            self.last = (self.last[0], self.ahead[j])
            return False
        bx, by = self.b.upto(j)
        if eb is None:
            if len(bx) < 3:
                return False
            eb = effect(bx, by, self.relative, self.floor)
        self.last = (self.last[0], eb)
        if self.b_dir == "not_up":
            # flat, or short of a rise by noise_z standard errors over a whole window (a
            # noisy score's Theil-Sen trend dips below a small rise by chance)
            b_holds = trend_holds("flat", eb, self.b_effect, self.verdict) or (
                len(bx) == self.b.keep and trend_holds(
                    "not_up", eb + self.noise_z * change_error(
                        by, self.relative, self.floor, self.window_noise.get(j)),
                    self.b_effect, self.verdict))
        else:
            b_holds = trend_holds(self.b_dir, eb, self.b_effect, self.verdict) and (
                self.b_dir == "flat"
                or beyond_noise(by, eb, self.noise_z, self.relative, self.floor,
                                self._b_noise(by, j)))
        if not b_holds:
            return False  # the judged series alone settles it: skip the reference's trend
        span = self.a.between(bx[0], bx[-1])
        ea = self.a_ahead.get(j)  # taken with the batch's others
        if ea is None:
            ax, ay = thin(*span, Trend.BUCKETS)
            if len(ax) < 3:
                return False
            ea = effect(ax, ay, self.relative, self.floor)
        self.last = (ea, eb)
        holds = trend_holds(self.a_dir, ea, self.a_effect, self.verdict)
        if holds and self.a_noise_z and self.a_dir in ("up", "down"):
            holds = self._a_beyond_noise(span, ea) and self._a_beyond_noise(
                (span[0][:-1], span[1][:-1]), None)
        if holds:
            self.held = self.last
        return holds

    def _b_noise(self, by: list[float], j: int) -> float | None:
        """The noise of a bucket median of the judged series, measured on its history
        (with a_noise_z; None: on the window's medians). Asked only once its trend holds:
        a dense series is judged at every point, and this reads its whole history."""
        if self.a_noise_z and len(self._tail()) > len(by):
            noise = self.noise_ahead.get(j)
            if noise is None:
                noise = change_noise(self.b_tail)
            return noise / math.sqrt(self.b.size)
        return None

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
            ea = effect(ax, ay, self.relative, self.floor)
            if not trend_holds(self.a_dir, ea, self.a_effect, self.verdict):
                return False
        noise = point_noise(self.a.ys) / math.sqrt(len(span[1]) / len(ay))
        return beyond_noise(ay, ea, self.a_noise_z, self.relative, self.floor, noise)

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
    set, is judged as it is.

    Nor does it hold while the training loss has fallen by `min_change` since the run's
    start, the median of its first `OPENING` logs (one high first log is no fall; a loss
    that fell steeply in its first logs has two), whatever it did since the first
    validation: a model that learned in its first tens of steps and has converged since
    has not failed to learn, though its validation loss improves only slowly (a LoRA
    whose batch loss fell 1.08 -> 0.77 before its first validation at step 50, and whose
    validation loss then fell at every one of its validations, 0.7995 -> 0.7725; a LoRA
    whose loss fell 3.93, 1.23, 1.06 over its first three logs and paused at 1.0-1.1 for
    its first three validations: a median of its first five logs, 1.09, sits on that
    pause already); where the first log stands `HIGH_FIRST` or more above that median,
    the first log is the start: a loss averaged over the run's first logging stride that
    falls by a quarter by the next is the model learning, as the corpus reads a loss fallen
    from where it started (a GPT-2 fine-tune logging 1.96, 1.23, 1.31 every 100 steps and
    1.2-1.5 since, while its validation loss falls 1.371 -> 1.324 over its first eight),
    where a first log a few percent above the next is noise. Nor while either loss has
    risen by `min_change` since the first validation: a loss that jumped up has moved.

    A verdict on a log that starts mid-run (`starts_mid_run`, by the training loss's first
    step and logging stride, or by the run's epochs) says so (`mid_run` in the evidence,
    which makes the finding info), as the other loss-flat verdicts do: both losses flat
    over a window cut from a longer run (a resumed run, a table whose first row is far
    into training) may have fallen before it."""

    HALF = 5
    OPENING = 3  # the run's first logs whose median is where it started
    HIGH_FIRST = 0.25  # a first log this far (relative) above that median: the start
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
        self.waiting = Waiting(st.get("wait"))
        self.opening: list[float] = list(st.get("o", []))  # the run's first training points
        # the training loss's first and latest step and its finite points handed over by
        # `waiting` so far (up to the validation judged): where the log starts and its
        # logging stride (`starts_mid_run`)
        self.train_span: list[float] = list(st.get("ts", []))  # [first, last, count]
        self.epochs = EpochStart()  # the run's epochs (the engine's, shared)
        self.verdict = bool(st.get("v", False))
        self.held: dict[str, float] = dict(st.get("held", {}))
        self.marks: list[tuple[int, float]] = []

    def feed_a(self, steps: list[int], values: list[float]) -> None:
        """Training points: they wait for the validations of their batch (`Waiting`)."""
        if len(self.opening) < MOST_MEDIAN:  # filled once, from the run's first points
            finite = [v for v in values if v - v == 0]
            self.opening.extend(finite[: MOST_MEDIAN - len(self.opening)])
        if self.first is not None:
            self._place(math.inf)
        elif steps:
            # Only points from the first validation on count, and it comes no earlier
            # than the batch that holds it: earlier batches' points are dropped (but
            # counted where the log starts).
            self._count(self.waiting.drop_before(steps[0])[0])
        self.waiting.add(steps, values)

    def _count(self, steps: list[float]) -> None:
        """Note the steps of training points handed over by `waiting` in `train_span`."""
        if steps:
            span = self.train_span
            self.train_span = ([steps[0], steps[-1], float(len(steps))] if not span
                               else [span[0], steps[-1], span[2] + len(steps)])

    def _place(self, upto: float) -> None:
        """Move the waiting training points logged up to step `upto` into the span."""
        assert self.first is not None
        steps, values = self.waiting.take(upto)
        self._count(steps)
        since = self.first[0]
        kept = [i for i, step in enumerate(steps) if not step < since]
        room = max(0, 2 * MOST_MEDIAN - len(self.early))
        self.early += [[steps[i], values[i]] for i in kept[:room]]
        self.recent += [[steps[i], values[i]] for i in kept[-self.TAIL:]]
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
        start = median(self.opening[: self.OPENING] or [head])
        if self.opening and self.opening[0] >= (1 + self.HIGH_FIRST) * start:
            start = self.opening[0]  # a first log far above the next is a fall
        run_fall = (start - tail) / max(abs(start), 1e-12)
        edge = self.min_change * (1.5 if self.verdict else 1.0)
        # nor while either has risen as far: a loss that jumped up has moved (a rise is
        # loss.stepped_up's or overfitting's finding, not a plateau)
        holds = max(val_fall, train_fall, run_fall) < edge and min(val_fall, train_fall) > -edge
        if holds:
            self.held = {"val_effect": -val_fall, "train_effect": -train_fall,
                         "since": self.first[0], "points": self.count}
            if self._mid_run():
                self.held["mid_run"] = 1.0
        return holds

    def _mid_run(self) -> bool:
        """Whether the log does not hold the run's start: its training loss's first step
        lies more than `WINDOW_STRIDES` of its logging strides after step 0, or its epochs
        say so (`starts_mid_run`)."""
        if not self.train_span:
            return self.epochs.window()
        first, last, count = self.train_span
        return starts_mid_run(first, last, int(count), self.epochs)

    def _half_needed(self, train: list[float], early: list[float]) -> int | None:
        """The points a median needs for two of them to show a fall of `min_change` in the
        training loss's noise (None: more than MOST_MEDIAN)."""
        return median_points(point_noise(train), self.min_change * abs(median(early)),
                             self.noise_z, self.HALF)

    def state(self) -> dict[str, Any]:
        return {"first": self.first, "n": self.count, "early": self.early,
                "recent": self.recent, "wait": self.waiting.state(), "o": self.opening,
                "ts": self.train_span, "v": self.verdict, "held": self.held}
