"""The verdict on a finished run's whole log: a loss that never fell, in a run too short
for the flat-loss rules' warm-up.

On the first points of a run that will learn, a flat loss means nothing, so the rules
that judge a loss falling wait for a warm-up (`runwatch.health.progress.NoProgress`).
Once the run has ended, its whole log is all there is: `WholeWindow` keeps what that
verdict needs while the points arrive, and judges it only when the engine is told the
run succeeded (`runwatch.health.engine.Engine.finish`).
"""

from __future__ import annotations

import math
from typing import Any

from runwatch.health.detectors import median
from runwatch.health.progress import EpochStart, starts_mid_run

EDGE = 5  # the first and latest points kept: the start and the end are medians of up to 5
# A loss that fell at each of its latest STILL_FALLING points or more, by STILL_FELL
# (relative to where it started) in all, is still falling: it has not fallen far yet, but
# a flat or noisy loss does not fall five times in a row (six points in falling order: one
# chance in 720 for points in random order), and a fall of 0.5% over five points goes on
# to the rule's 5% within fifty more. A drift of a few hundredths of a percent in all (a
# learning rate too small to move the model, a smoothed loss) is not one.
STILL_FALLING = 5
STILL_FELL = 0.005


class WholeWindow:
    """A series (a training loss) kept for one verdict at the run's end: it holds when the
    loss never stood `min_change` (relative) below where it started, or ended less than
    `end_change` below it, and did not end `min_change` above it, over at least
    `min_points` logged points.

    Where it started is the higher of its first value and the median of its first k
    points, where it ended the median of its latest k (k a third of the points, 1 to
    `EDGE`); "never stood below" reads the lowest point the log holds. Each reading is
    the kindest to the run: a healthy short run whose loss falls 5-20% dips below 95% of
    its start at some point even when its noise puts its last point back up. A noisy
    loss dips that far by chance too, so one whose latest median ends within
    `end_change` of its start has not fallen, wherever its lowest point went (an MLX LoRA
    reporting 1.66-1.81 over 13 logs, one dip 7.5% below its start, its last four's
    median 3.9% below it; of the corpus's short healthy runs this verdict judges, none
    ends less than 4% below its start by these medians). Without `end_change` (-inf),
    only the lowest point is read.

    Not judged (None) at a start at or below `min_level` (a loss already near 0 has little
    left to lose). A log that starts more than `WINDOW_STRIDES` logging
    strides after step 0 (a window cut from a longer run, or a resumed one), or whose
    epochs show it starts mid-run (`EpochStart`), is judged with `mid_run` in the
    evidence: the window is flat, but its start is not the run's, so the finding is info.
    So is one whose loss fell at each of its latest `STILL_FALLING` points or more, by
    `STILL_FELL` of its start in all (`still_falling` in the evidence: a slow start, such
    as a learning-rate warm-up's, that is under way)."""

    def __init__(self, state: dict[str, Any] | None = None) -> None:
        st = state or {}
        self.head: list[float] = list(st.get("h", []))  # the first EDGE finite values
        self.tail: list[float] = list(st.get("t", []))  # the latest EDGE finite values
        self.count = int(st.get("n", 0))
        self.first_step: int | None = st.get("fs")
        self.last_step: int | None = st.get("ls")
        self.lowest: list[float] | None = st.get("lo")  # [step, value] of the lowest point
        self.falls = int(st.get("dn", 0))  # the latest points that each fell
        self.fall_top: float | None = st.get("ft")  # where that run of falls began
        self.held: dict[str, float] = {}
        # the run's epochs (the engine's, shared by the rules that ask it)
        self.epochs = EpochStart()

    def feed(self, steps: list[int], values: list[float]) -> list[bool]:
        """Note the points; a verdict comes only at the run's end (`judge`)."""
        for step, v in zip(steps, values, strict=True):
            if v - v != 0:
                continue
            if self.first_step is None:
                self.first_step = step
            self.last_step = step
            self.count += 1
            if len(self.head) < EDGE:
                self.head.append(v)
            if self.tail and v < self.tail[-1]:
                if not self.falls:
                    self.fall_top = self.tail[-1]
                self.falls += 1
            else:
                self.falls = 0
            self.tail.append(v)
            del self.tail[:-EDGE]
            if self.lowest is None or v < self.lowest[1]:
                self.lowest = [float(step), v]
        return [False] * len(values)

    def judge(self, min_change: float, min_points: int, min_level: float,
              end_change: float = -math.inf) -> dict[str, float] | None:
        """The evidence when the verdict holds on the points so far, else None."""
        if self.count < max(2, min_points) or self.lowest is None or self.first_step is None:
            return None
        assert self.last_step is not None
        # a log that starts mid-run: what it shows is this window, not the run
        mid_run = starts_mid_run(self.first_step, self.last_step, self.count, self.epochs)
        k = max(1, min(EDGE, self.count // 3))
        start = max(self.head[0], median(self.head[:k]))
        end = median(self.tail[-k:])
        if start <= min_level:
            return None
        lowest = self.lowest[1]
        fell = (start - lowest) / start
        ended = (start - end) / start
        if -ended >= min_change or (fell >= min_change and ended >= end_change):
            return None
        self.held = {"start": start, "lowest": lowest, "lowest_step": self.lowest[0],
                     "end": end, "last": self.tail[-1],
                     # the fall to its lowest point, or where that went past min_change,
                     # to where it ended (what the verdict rests on)
                     "effect": -fell if fell < min_change else -ended,
                     "by_end": float(fell >= min_change),
                     "points": self.count, "span": self.last_step - self.first_step,
                     "mid_run": float(mid_run),
                     "still_falling": float(self.falls if self._still_falling(start) else 0)}
        return self.held

    def _still_falling(self, start: float) -> bool:
        """Whether the loss fell at each of its latest STILL_FALLING points or more, by
        STILL_FELL of `start` in all."""
        return (self.falls >= STILL_FALLING and self.fall_top is not None
                and self.fall_top - self.tail[-1] >= STILL_FELL * abs(start))

    def state(self) -> dict[str, Any]:
        return {"h": self.head, "t": self.tail, "n": self.count, "fs": self.first_step,
                "ls": self.last_step, "lo": self.lowest, "dn": self.falls,
                "ft": self.fall_top}
