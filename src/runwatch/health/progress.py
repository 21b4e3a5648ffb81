"""Whether a series that should fall has moved since its start, judged against its own
noise: a loss that has not fallen (`NoProgress`); and where a log starts in its run
(`EpochStart`). A rising series' (`NoImprovement`, `Learning`, `BelowStart`) are in
improvement.py.
"""

from __future__ import annotations

from itertools import accumulate
from typing import Any

from runwatch.health.detectors import count_upto, finite_at, median
from runwatch.health.trendstats import (
    AHEAD_LEAST,
    MOST_MEDIAN,
    Buckets,
    bounded,
    judge,
    lazy_numpy,
    median_gap_error,
    median_points,
    only_floats,
    point_noise,
    window_medians,
    window_point_noises,
)


class NoProgress:
    """A series that has not moved by `min_change` (relative) from where it started:
    "loss is not falling". Judged on bucket medians, and only after `warmup` points, so
    the noisy first steps of a run (learning-rate warm-up, DPO's loss sitting at log 2)
    cannot raise it.

    Where it started is the higher (for `down`; lower for `up`) of the first value and
    the first bucket's median: a loss that dropped fast in its first few points and then
    drifts down slowly has fallen, though its first bucket's median already sits low.

    With `noise_z` and `moved`, the move holds only where it also exceeds `noise_z`
    standard errors of the two medians' difference in the series' point-to-point noise.
    With `noise_z`, "has not moved" holds only while the change is short of `min_change`
    by `noise_z` standard errors of the two medians' difference in the series' own
    point-to-point noise, and a noisy series is compared by medians of as many points as
    show a move of `min_change` in that noise (`median_points`: the bucket's at least,
    `MOST_MEDIAN` at most, else it is not judged), its first ones against its latest
    ones, once it has twice that many. A single batch's loss that swings by a third
    between steps cannot show a fall of 5% in a median of 5 points: its start, one such
    median, may sit a tenth below the loss's level, and of the hundred judgements of a
    long run one latest median then sits above it by chance.

    With `latest` (wider than the bucket), where it has moved is read from the median of
    the latest `latest` points rather than the latest bucket's, once that many follow the
    first bucket (before then, the bucket's): a median of 3 is carried by two bad batches
    in a row, one of 5 is not."""

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
        window_info: bool = False,
        latest: int = 0,
        fell_once: float = 0.0,
        rise_limit: float = 0.0,
        state: dict[str, Any] | None = None,
    ) -> None:
        self.direction, self.min_change = direction, min_change
        # For "not moved" (down): with `fell_once`, it holds no more once a judgement found
        # the series fallen `fell_once` times min_change (a loss that fell and then jumped
        # back has fallen: its jump is the jump rules'); with `rise_limit`, only while the
        # series stands less than that far (relative) above where it started (a loss that
        # rose is rising: loss.above_start's, whose advice is the other way).
        self.fell_once, self.rise_limit = fell_once, rise_limit
        # With `window_info`, a verdict on a log that starts mid-run (`starts_mid_run`)
        # says so (`mid_run` in the evidence, which makes the finding info): a loss flat
        # over a window cut from a longer run may have fallen before it.
        self.window_info = window_info
        self.epochs = EpochStart()  # the run's epochs (the engine's, shared)
        self.noise_z = noise_z
        # With `max_spread`, it holds only while every point so far lies within that
        # fraction of the start (a loss with no noise at all: nothing is being learned,
        # the weights do not move, or it sits at chance).
        self.max_spread = max_spread
        self._batch = _Taken([], [], [], [], [], [], None, None)
        self._noise_ahead: dict[int, float] = {}  # the noise at the batch's judgements
        # the batch's judgements that hold nothing (`_quiet_ahead`), which are not made,
        # and the latest judgement made that got past the warm-up and the noise
        self.idle: set[int] = set()
        self._judged_at: int | None = None
        self._closed: list[int] = []
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
        self.count = int(st.get("c", 0))  # finite points so far
        self.last_step: float | None = st.get("ls")  # the step of the latest of them
        # Whether a judgement got past the warm-up and the noise: a finished run this
        # never judged is judged on its whole log instead (`runwatch.health.finished`).
        self.judged = bool(st.get("j", False))
        # With `latest`, the latest that many finite points (`now_value`).
        self.latest = int(latest) if int(latest) > self.buckets.size else 0
        self.recent: list[float] = list(st.get("r", []))
        self.fallen = bool(st.get("f", False))  # a judgement found it fallen (`fell_once`)

    def feed(self, steps: list[int], values: list[float]) -> list[bool]:
        if self.first is None:
            first = next((i for i, v in enumerate(values) if v - v == 0), None)
            if first is not None:
                self.first = [float(steps[first]), values[first]]
        at = finite_at(values)
        self._batch = _Taken(steps, at, values if len(at) == len(values)
                             else [values[i] for i in at], self.recent, self.head,
                             self.tail, self.extent, self.last_step)
        self._noise_ahead, self.idle, self._judged_at = {}, set(), None
        if self._settled():
            out = self._judge_settled(steps, values)
        else:
            out = judge(self.buckets, steps, values, self)
            last = max(self.idle, default=-1)
            if last > (-1 if self._judged_at is None else self._judged_at):
                # the last judgement was one not made: its effect is the one kept
                self._seek(self._batch.count(self._closed[last]))
                measured = self._measure(last)
                assert measured is not None
                self.last_effect = self._effect(measured[2])
        self.take_upto(len(values) - 1)
        self._keep()
        return out

    def take_upto(self, end: int) -> None:
        """Count the batch's finite points up to index `end` as taken: a judgement reads
        the latest of them, the first and their extent (`_Taken`), and the batch's end
        keeps them (`_keep`)."""
        self._seek(max(self._batch.taken, self._batch.count(end)))

    def _seek(self, taken: int) -> None:
        """Take the batch's first `taken` finite points (and no more)."""
        batch = self._batch
        self.count += taken - batch.taken
        batch.taken = taken

    def look_ahead(self, js: list[int], closed: list[int]) -> None:
        """Take at once what the batch's judgements (`js`; `closed`: the index of each
        bucket's last point in the batch) need: with noise_z, the noise of the latest TAIL
        points, where TAIL points are in; for a move that is the finding, the judgements
        that hold nothing (`_quiet_ahead`)."""
        self._closed = closed
        if len(js) < AHEAD_LEAST:
            return
        if self.moved:
            self.idle = self._quiet_ahead(js, closed)
            self.judged = self.judged or bool(self.idle)
        batch = self._batch
        if not self.noise_z or not only_floats(batch.tail, batch.points):
            return
        series = batch.tail + batch.points
        ends = {j: len(batch.tail) + batch.count(closed[j]) for j in js}
        ends = {j: end for j, end in ends.items() if end >= self.TAIL}
        noises = window_point_noises(series, list(ends.values()), self.TAIL)
        self._noise_ahead = dict(zip(ends, noises, strict=False))

    def _quiet_ahead(self, js: list[int], closed: list[int]) -> set[int]:
        """Of the judgements `js` of a move that is the finding (`moved`), those past the
        warm-up whose move falls short of the lower of its two edges (the one a held
        finding is released at): they hold nothing whatever the one before held, and
        only note that they judged and their effect. Taken with numpy, on floats only."""
        b, batch = self.buckets, self._batch
        if (b.first is None or self.first is None
                or not only_floats(batch.recent, batch.points, [b.first])):
            return set()
        np = lazy_numpy()
        judged = np.asarray(js)
        done = b.closed - len(b.xs) + b.base + 1 + judged  # buckets closed at each
        warm = done >= self.warmup_buckets
        if self.warmup_steps and not warm.all():
            steps = np.asarray(b.xs, dtype=np.float64)[b.base + judged]
            warm |= steps - self.first[0] >= self.warmup_steps
        past = judged[(done >= self.min_buckets) & warm]
        if not len(past):
            return set()
        now = np.asarray(b.ys, dtype=np.float64)[b.base + past]
        if self.latest:
            taken = batch.upto(np.asarray(closed)[past])
            late = self.count + taken - b.size >= self.latest
            if late.any():
                medians = window_medians(batch.recent + batch.points, self.latest)
                now[late] = medians[len(batch.recent) + taken[late] - self.latest]
        effect = (now - b.first) / max(abs(b.first), 1e-12)
        edge = min(self.min_change * (2 / 3), self.min_change)
        short = effect > -edge if self.direction == "down" else effect < edge
        return set(past[short].tolist())

    def _effect(self, now: float) -> float:
        """The relative move of `now` from where the series started (a `moved` one's start:
        the first bucket's median)."""
        assert self.buckets.first is not None
        start = self.buckets.first
        return bounded((now - start) / max(abs(start), 1e-12))

    def _noise(self, j: int) -> float:
        """The point noise of the latest TAIL points at judgement j."""
        noise = self._noise_ahead.get(j)
        if noise is None:
            batch = self._batch
            noise = point_noise(batch.latest(batch.tail, self.TAIL))
        return noise

    def _keep(self) -> None:
        """Keep what the batch's taken points leave: the latest of them (with `latest`,
        and with noise_z for the noise), the first (with noise_z), the lowest-to-highest
        extent (with `max_spread`) and the step of the latest."""
        batch = self._batch
        if not batch.taken:
            return
        self.last_step = batch.last_step()
        if self.latest:
            self.recent = batch.latest(batch.recent, self.latest)
        if self.noise_z:
            self.head, self.tail = batch.first(MOST_MEDIAN), batch.latest(batch.tail, self.TAIL)
        if self.max_spread:
            self.extent = batch.extent()

    def _settled(self) -> bool:
        """Whether no judgement can hold any more: the series has fallen once (`fell_once`),
        or its points have spread beyond `max_spread` of a start that no longer moves. A
        judgement then only notes its effect."""
        if self.fell_once and not self.moved and self.direction == "down":
            return self.fallen  # if not, a judgement may yet find it fallen
        b, extent = self.buckets, self.extent
        if (not self.max_spread or self.noise_z or extent is None or b.first is None
                or self.first is None):
            return False
        pick = max if self.direction == "down" else min
        start = b.first if self.moved else pick(self.first[1], b.first)
        return not extent[1] - extent[0] <= self.max_spread * abs(start)

    def _judge_settled(self, steps: list[int], values: list[float]) -> list[bool]:
        """`judge` for a settled series (`_settled`): every judgement fails, so each point
        from the batch's first judgement on is False, and only the last judgement that
        gets past the warm-up and the noise leaves its effect."""
        b = self.buckets
        first = b.closed
        closed = b.feed(steps, values)
        js = range((-first - 1) % self.stride, len(closed), self.stride)
        self.marks = b.marks(closed, js)
        if not js:
            return [self.verdict] * len(values)
        start = closed[js[0]]
        out = [self.verdict] * start + [False] * (len(values) - start)
        for j in reversed(js):
            self._seek(self._batch.count(closed[j]))
            if self._measure(j) is not None:
                self.judge(j)  # fails, and notes its effect
                break
        self.verdict = False
        return out

    def _measure(self, j: int) -> tuple[list[float], float, float, int, float] | None:
        """What judgement `j` of the batch compares: the window's steps, where the series
        started and where it stands (as `judge` picks them), the points each median takes
        and the noise; None where it is not judged (in the warm-up, too noisy, at 0)."""
        b = self.buckets
        closed = b.closed - len(b.xs) + b.base + j + 1
        if closed < self.min_buckets or b.first is None or self.first is None:
            return None
        xs, ys = b.upto(j)
        if closed < self.warmup_buckets and (
                not self.warmup_steps or xs[-1] - self.first[0] < self.warmup_steps):
            return None
        first, now, k = b.first, self.now_value(ys[-1]), self.buckets.size
        noise = 0.0
        if self.noise_z and not self.moved:
            batch = self._batch
            head = batch.first(MOST_MEDIAN)
            noise = self._noise(j)
            needed = median_points(noise, self.min_change * abs(median(head)),
                                   self.noise_z, k)
            if needed is None or (needed > k and self.count < 2 * needed):
                return None
            if needed > k:
                tail = batch.latest(batch.tail, self.TAIL)
                k, first, now = needed, median(head[:needed]), median(tail[-needed:])
        if now == 0 and self.direction == "down" and not self.moved:
            # a loss at exactly 0 has nowhere to fall (loss.zero reports it)
            return None
        return xs, first, now, k, noise

    def judge(self, j: int) -> bool:
        measured = self._measure(j)
        if measured is None:
            return False
        self._judged_at = j
        xs, first, now, k, noise = measured
        # "not moved": the kinder of the first value and the first bucket's median; "moved"
        # (a fall that is the finding) from the median alone, so one high first point of a
        # flat series is no fall
        pick = max if self.direction == "down" else min
        b = self.buckets
        assert b.first is not None and self.first is not None
        self.judged = True
        start = b.first if self.moved else pick(self.first[1], first)
        self.last_effect = bounded((now - start) / max(abs(start), 1e-12))
        # A fall that is the finding, once held, is released only when two thirds of it
        # are gone (hysteresis): an entropy hovering at a quarter of its start would open
        # and resolve a finding on every other judgement.
        edge = self.min_change * (2 / 3 if self.moved and self.verdict else 1)
        if self.noise_z and not self.moved:
            edge -= self.noise_z * median_gap_error(noise, k) / max(abs(start), 1e-12)
        holds = self.last_effect > -edge if self.direction == "down" else self.last_effect < edge
        if self.fell_once and not self.moved and self.direction == "down":
            self.fallen = self.fallen or self.last_effect <= -self.fell_once * self.min_change
            holds = holds and not self.fallen
        if self.rise_limit and not self.moved and self.direction == "down":
            holds = holds and self.last_effect < self.rise_limit
        if self.moved:
            holds = not holds
            if holds and self.noise_z:
                # a move that is the finding holds only beyond the two medians' noise
                holds = abs(now - start) >= self.noise_z * median_gap_error(
                    self._noise(j), k)
        if holds and self.max_spread:
            extent = self._batch.extent()
            holds = (extent is not None
                     and extent[1] - extent[0] <= self.max_spread * abs(start))
        if holds:
            self.held = {"effect": self.last_effect, "start": start, "now": now,
                         "span": xs[-1] - self.first[0], "points": self.count}
            if self.window_info:
                last = self._batch.last_step()
                last = self.first[0] if last is None else last
                self.held["mid_run"] = float(starts_mid_run(self.first[0], last, self.count,
                                                            self.epochs))
        return holds

    def now_value(self, bucket_median: float) -> float:
        """Where the series stands now: the latest bucket's median, or with `latest` the
        median of the latest `latest` points once that many follow the first bucket."""
        if self.latest and self.count - self.buckets.size >= self.latest:
            return median(self._batch.latest(self._batch.recent, self.latest))
        return bucket_median

    def state(self) -> dict[str, Any]:
        st = {"b": self.buckets.state(), "v": self.verdict, "e": self.last_effect,
              "first": self.first, "held": self.held}
        if self.latest:
            st["r"] = self.recent
        if self.fallen:
            st["f"] = True
        if self.extent is not None:
            st["extent"] = self.extent
        st["c"] = self.count
        if self.last_step is not None:
            st["ls"] = self.last_step
        if self.judged:
            st["j"] = True
        if self.noise_z:
            st.update(t=self.tail, h=self.head)
        return st


class _Taken:
    """A batch's finite points (`points`, at indices `at` of its `steps`), of which a
    detector has taken the first `taken`, and what it kept from earlier batches: its
    latest points (`recent`, `tail`), its first (`head`), their extent and the step of
    the latest. What a judgement reads of them is cut from the batch when it reads it."""

    def __init__(self, steps: list[int], at: list[int] | range, points: list[float],
                 recent: list[float], head: list[float], tail: list[float],
                 extent: list[float] | None, step: float | None) -> None:
        self.steps, self.at, self.points = steps, at, points
        self.recent, self.head, self.tail = recent, head, tail
        self.kept_extent, self.kept_step = extent, step
        self.taken = 0
        self._runs: tuple[list[float], list[float]] | None = None

    def count(self, end: int) -> int:
        """How many of the points lie at or before index `end` of the batch."""
        return count_upto(self.at, end)

    def upto(self, ends: Any) -> Any:
        """`count` of each of `ends` (a numpy array)."""
        np = lazy_numpy()
        if isinstance(self.at, range):
            return np.minimum(ends + 1, len(self.at))
        return np.searchsorted(np.asarray(self.at, dtype=np.int64), ends, side="right")

    def latest(self, kept: list[float], n: int) -> list[float]:
        """The latest `n` of `kept` followed by the points taken."""
        taken = self.taken
        if taken >= n:
            return self.points[taken - n : taken]
        return kept[-(n - taken):] + self.points[:taken]

    def first(self, n: int) -> list[float]:
        """The first `n` of `head` followed by the points taken."""
        head = self.head
        if len(head) >= n:
            return head
        return head + self.points[: min(self.taken, n - len(head))]

    def extent(self) -> list[float] | None:
        """The lowest and highest of the points taken and the extent kept (the first of
        equal ones, as `min` and `max` one by one keep them)."""
        if not self.taken:
            return self.kept_extent
        if self._runs is None:
            self._runs = (list(accumulate(self.points, min)),
                          list(accumulate(self.points, max)))
        lo, hi = self._runs[0][self.taken - 1], self._runs[1][self.taken - 1]
        kept = self.kept_extent
        return [lo, hi] if kept is None else [min(kept[0], lo), max(kept[1], hi)]

    def last_step(self) -> float | None:
        """The step of the latest point taken (or kept)."""
        if not self.taken:
            return self.kept_step
        return float(self.steps[self.at[self.taken - 1]])


def keep(head: list[float], tail: list[float], size: int, v: float) -> None:
    """Note `v` among a series' first `size` values (`head`) and its latest (`tail`)."""
    if len(head) < size:
        head.append(v)
    tail.append(v)
    if len(tail) > size:
        del tail[0]


WINDOW_STRIDES = 3  # a log whose first step lies further from step 0 is a window


class EpochStart:
    """Whether a run's log starts in the middle of the run by its own `epoch`: a window
    cut from a longer run whose lines were numbered from where it was cut (a table pasted
    from a console, a CSV whose rows are its only steps), which its steps cannot show.
    The engine keeps one per run, fed with every batch that logs `epoch`, and the
    verdicts that need the run's start in the log ask it (`starts_mid_run`).

    Read from the log's first `PROBE` epochs only (a later restart or a resumed attempt
    changes nothing): it starts mid-run when its first epoch is a fraction (a hand-written
    loop's epoch counter that starts at 1 is a whole number) above `FLOOR` of an epoch
    and above `WINDOW_STRIDES` epoch strides (the median rise between its first epochs).
    A run logged every 10 steps of a 300-step epoch first logs 0.03, three strides of
    0.03 would reach 0.09: it starts at the run's start. A log whose first epoch is 0.48,
    logged every 0.03 epochs, starts mid-run. A trainer that rounds epochs to 2 decimals
    may log the same epoch at several steps: a stride of 0 leaves `FLOOR` alone."""

    FLOOR = 0.05
    PROBE = 4

    def __init__(self, state: dict[str, Any] | None = None) -> None:
        st = state or {}
        self.first: list[float] = list(st.get("e", []))  # the first PROBE epochs, rising
        # the step of the latest of them: an evaluation's row repeats its step's epoch,
        # in the same batch or the next
        self.last_step: int | None = st.get("s")

    def feed(self, steps: list[int], values: list[float]) -> None:
        for step, v in zip(steps, values, strict=True):
            if len(self.first) >= self.PROBE:
                return
            if v - v != 0 or step == self.last_step or (self.first and v < self.first[-1]):
                continue
            self.first.append(v)
            self.last_step = step

    def window(self) -> bool:
        if not self.first or self.first[0] == int(self.first[0]):
            return False
        gaps = sorted(b - a for a, b in zip(self.first, self.first[1:], strict=False))
        stride = gaps[len(gaps) // 2] if gaps else 0.0
        return self.first[0] > max(self.FLOOR, WINDOW_STRIDES * stride)

    def state(self) -> dict[str, Any]:
        return {"e": self.first, "s": self.last_step}


def starts_mid_run(first_step: float, last_step: float, points: int,
                   epochs: EpochStart) -> bool:
    """Whether a log does not hold its run's start: its first step lies more than
    `WINDOW_STRIDES` logging strides (at least 1 step) after step 0 (a window of a longer
    run, or a resumed one), or its epochs say so (`EpochStart`). The stride is the span
    of the `points` finite points logged so far, `first_step` to `last_step`, over the
    gaps between them: every verdict that asks takes it the same way."""
    stride = (last_step - first_step) / max(1, points - 1)
    return first_step > WINDOW_STRIDES * max(stride, 1.0) or epochs.window()
