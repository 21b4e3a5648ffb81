"""The statistics a whole file's batch takes at once with numpy give the floats, and the
cuts, that the point-at-a-time code gives: read whole or line by line, a log gets the
same findings with the same numbers."""

from __future__ import annotations

import math
import random
import subprocess
import sys
from collections import deque

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from runwatch.health.engine import Engine
from runwatch.health.evaluators import GAP_SCAN_LEAST, _first_gap
from runwatch.health.improvement import NoImprovement
from runwatch.health.trendstats import (
    AHEAD_LEAST,
    EVEN_LEAST,
    Buckets,
    change_noise,
    effect,
    span_effects,
    theil_sen,
    theil_sen_even,
    thin,
    window_change_noises,
    window_effects,
)
from runwatch.store.points import PointColumns


def same(a: float, b: float) -> bool:
    """The same float, a zero's sign included."""
    return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)


# values with ties and both zeros, so equal slopes and their order are exercised
value_st = st.one_of(st.sampled_from([0.0, -0.0, 0.5, 1.0]),
                     st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False))


@settings(max_examples=150, deadline=None)
@given(st.lists(value_st, min_size=AHEAD_LEAST + 8, max_size=80),
       st.lists(st.sampled_from([0, 1, 1, 1, 2, 5]), min_size=AHEAD_LEAST + 8, max_size=80),
       st.integers(3, 9), st.sampled_from([1, 2, 3]), st.booleans(), st.integers(0, 6))
def test_window_effects_are_effect_on_each_window(
        values: list[float], gaps: list[int], keep: int, size: int, relative: bool,
        held: int) -> None:
    # steps that repeat (a gap of 0) leave a window to `effect`; the rest are taken at once
    n = min(len(values), len(gaps))
    steps, step = [], 0
    for gap in gaps[:n]:
        step += gap
        steps.append(step)
    buckets = Buckets(size, keep)
    buckets.feed(steps[:held], values[:held])  # buckets held from an earlier batch
    closed = buckets.feed(steps[held:n], values[held:n])
    js = list(range(len(closed)))
    got = window_effects(buckets, js, relative, 1e-6)
    whole = [j for j in js if len(buckets.upto(j)[0]) == keep]
    distinct = [j for j in whole if len(set(buckets.upto(j)[0])) == keep]
    # a batch of this many whole windows is taken at once, but for a window whose steps
    # repeat, which is left to `effect`
    assert sorted(got) == (distinct if len(whole) >= AHEAD_LEAST else [])
    for j, value in got.items():
        assert same(value, effect(*buckets.upto(j), relative, 1e-6)), j

@settings(max_examples=150, deadline=None)
@given(st.lists(value_st, min_size=AHEAD_LEAST + 8, max_size=80),
       st.lists(st.sampled_from([0, 1, 1, 1, 2, 5, -30]), min_size=AHEAD_LEAST + 8,
                max_size=80),
       st.lists(st.tuples(st.integers(0, 300), st.integers(0, 40)), min_size=AHEAD_LEAST,
                max_size=40),
       st.booleans())
def test_span_effects_are_effect_on_each_thinned_span(
        values: list[float], gaps: list[int], spans: list[tuple[int, int]],
        relative: bool) -> None:
    n = min(len(values), len(gaps))
    steps, step = [], 100  # a step that goes back: a resumed run
    for gap in gaps[:n]:
        step += gap
        steps.append(step)
    buckets = Buckets(1, 256)
    buckets.feed(steps[:n], values[:n])
    wanted = {k: (float(lo), float(lo + width)) for k, (lo, width) in enumerate(spans)}
    got = span_effects(buckets, wanted, relative, 1e-6, 8)
    rising = all(b > a for a, b in zip(buckets.xs, buckets.xs[1:], strict=False))
    for k, (lo, hi) in wanted.items():
        span = buckets.between(lo, hi)
        if k in got:
            assert same(got[k], effect(*thin(*span, 8), relative, 1e-6))
        else:  # left to the caller: too few or too many buckets, or steps that repeat
            assert not rising or not 3 <= len(span[0]) <= 8


@settings(max_examples=200, deadline=None)
@given(st.lists(value_st, min_size=2, max_size=EVEN_LEAST + 30))
def test_theil_sen_even_is_theil_sen_at_points_0_1_2(ys: list[float]) -> None:
    # numpy from EVEN_LEAST points on: the same quotients and the same median (a zero's
    # sign aside, which only a comparison with 0 reads)
    want = theil_sen([float(i) for i in range(len(ys))], ys)
    got = theil_sen_even(ys)
    assert got == want and (len(ys) >= EVEN_LEAST or same(got, want))


def test_spans_over_steps_that_go_back_are_left_to_bisect() -> None:
    # a resumed run's steps go back: a binary search of them has no one right answer,
    # so the spans are left to `Buckets.between`, whose answer the live read gives
    buckets = Buckets(1, 256)
    steps = list(range(40)) + list(range(10, 40))
    buckets.feed(steps, [float(s % 5) for s in steps])
    spans = {k: (float(k), float(k + 6)) for k in range(20)}
    assert span_effects(buckets, spans, False, 1e-6, 8) == {}
    rising = Buckets(1, 256)
    rising.feed(list(range(70)), [float(s % 5) for s in range(70)])
    assert len(span_effects(rising, spans, False, 1e-6, 8)) == 20  # 7 buckets each


def test_a_live_batch_takes_no_window_at_once() -> None:
    buckets = Buckets(1, 6)
    closed = buckets.feed(list(range(40)), [float(i % 7) for i in range(40)])
    assert window_effects(buckets, list(range(len(closed)))[-3:], False, 1e-6) == {}


def first_gap_point_by_point(window: list[float], steps: list[int], start: int,
                             size: int) -> int | None:
    """The scan as the trend rules read a log line by line."""
    win: deque[float] = deque(window, maxlen=size)
    for i in range(start, len(steps)):
        if len(win) * 2 >= size and win[-1] > win[0] and steps[i] - win[-1] > win[-1] - win[0]:
            return i
        win.append(float(steps[i]))
    return None


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.sampled_from([1, 1, 1, 2, 10]), st.integers(0, 400)),
                min_size=GAP_SCAN_LEAST, max_size=120),
       st.lists(st.integers(0, 50), max_size=12), st.integers(2, 24), st.integers(0, 10))
def test_the_gap_scan_of_a_long_batch_finds_the_gap_a_line_by_line_read_does(
        gaps: list[int], before: list[int], size: int, start: int) -> None:
    steps, step = [], 0
    for gap in gaps:
        step += gap
        steps.append(step)
    window = [float(s) for s in sorted(before)]
    start = min(start, len(steps) - GAP_SCAN_LEAST)
    assert _first_gap(window, steps, start, size) == first_gap_point_by_point(
        window, steps, start, size)


def test_a_long_batch_with_a_gap_is_cut_there() -> None:
    steps = list(range(0, 100)) + list(range(5000, 5100))
    assert _first_gap([], steps, 0, 16) == 100
    assert _first_gap([], steps, 101, 16) is None


def test_loading_the_engine_loads_no_numpy() -> None:
    # a command that only reads stored findings loads the engine's modules, not numpy
    # (about 0.2 CPU s at start); numpy comes with the first long batch judged
    probe = ("import sys, runwatch.health.store, runwatch.health.engine; "
             "print('numpy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True, timeout=120)
    assert out.stdout.strip() == "False"


@settings(max_examples=100, deadline=None)
@given(st.lists(value_st, min_size=3, max_size=90), st.integers(3, 20), st.data())
def test_window_change_noises_are_change_noise_of_each_window(
        points: list[float], width: int, data: st.DataObject) -> None:
    width = min(width, len(points))
    ends = data.draw(st.lists(st.integers(width, len(points)), max_size=12))
    for end, noise in zip(ends, window_change_noises(points, ends, width), strict=True):
        if noise is not None:
            assert same(noise, change_noise(points[end - width:end]))


def grpo_series(steps: int, seed: int) -> dict[str, PointColumns]:
    """A GRPO run whose reward climbs while its task score falls, and climbs again while
    the score, noisier by then, stays flat, logged at every step."""
    rng = random.Random(seed)
    reward, accuracy = [], []
    for s in range(steps):
        rise = min(1.0, max(0.0, (s - 1300) / 30)) + min(1.0, max(0.0, (s - 1700) / 150))
        fall = min(1.0, max(0.0, (s - 1300) / 30))
        reward.append(0.3 + 0.3 * rise + rng.gauss(0.0, 0.01))
        accuracy.append(0.6 - 0.3 * fall + rng.gauss(0.0, 0.01 if s < 1500 else 0.03))
    xs = list(range(steps))
    return {name: PointColumns(xs, xs, [1.0e9 + 5.0 * s for s in xs], values)
            for name, values in (("reward_mean", reward), ("accuracy", accuracy),
                                 ("fb/loss/ratio/mean", [1.0 + rng.gauss(0, 0.01) for _ in xs]))}


def test_a_long_log_read_whole_reads_as_it_does_step_by_step() -> None:
    # Read whole, a 1,024-step chunk's windows, their effects, which judgements they
    # settle and the judged score's noise are taken at once; step by step, one at a time.
    # Same findings, same numbers, same state.
    batch = grpo_series(2048, 3)
    whole = Engine("grpo", {})
    found_whole = {(f.rule_id, f.first_step): (f.status, f.severity, f.message)
                   for f in whole.feed(batch)}
    falling = next(ev.detector for key, ev in whole.evals.items()
                   if key.startswith("grpo.task_score_falling|"))
    assert falling.ahead and falling.quiet and falling.noise_ahead  # taken at once
    # the score's noise at each judgement of the last points fed at once (a bucket a
    # step) is that of its latest 64 points there
    score = batch["accuracy"].values
    start = len(score) - len(falling._pending)
    assert score[start:] == falling._pending
    for j, noise in falling.noise_ahead.items():
        assert same(noise, change_noise(score[start + j + 1 - 64 : start + j + 1]))
    # the reward's effect over each window of the score, and the noise of a window that
    # is not flat, are those the point-at-a-time code takes
    proxy = next(ev.detector for key, ev in whole.evals.items()
                 if key.startswith("grpo.proxy_hacking|"))
    assert proxy.a_ahead and proxy.window_noise
    for j, ea in proxy.a_ahead.items():
        bx = proxy.b.upto(j)[0]
        ax, ay = proxy.a.between(bx[0], bx[-1])
        assert same(ea, effect(*thin(ax, ay, 8), False, 1e-6))
    for j, noise in proxy.window_noise.items():
        assert same(noise, change_noise(proxy.b.upto(j)[1]))
    live = Engine("grpo", {})
    rng = random.Random(5)
    found_live: dict[tuple[str, int], tuple[str, str, str]] = {}
    lo = 0
    while lo < 2048:
        hi = min(2048, lo + rng.randint(1, 7))
        part = {name: PointColumns._make(c[lo:hi] for c in col) for name, col in batch.items()}
        found_live.update({(f.rule_id, f.first_step): (f.status, f.severity, f.message)
                           for f in live.feed(part)})
        lo = hi
    assert "grpo.task_score_falling" in {rule for rule, _ in found_whole}
    assert found_whole == found_live
    assert orjson.dumps(whole.state()) == orjson.dumps(live.state())


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(120, 400), st.booleans(), st.booleans())
def test_a_reward_fed_whole_is_judged_as_fed_point_by_point(
        seed: int, n: int, gaps: bool, warm_up: bool) -> None:
    # rl.no_progress's detector fed a long batch (its numpy slopes, its learning-rate
    # warm-up, missing points) gives the verdicts and state it gives fed point by point
    rng = random.Random(seed)
    steps = list(range(n))
    values = [0.5 + 0.001 * s + rng.gauss(0.0, 0.1) for s in steps]
    if gaps:  # missing points (NaN) here and there
        for s in rng.sample(steps, n // 10):
            values[s] = math.nan
    lr = [min(1.0, s / 150) if warm_up else 1.0 for s in steps]
    whole, live = NoImprovement(head=25, min_points=10), NoImprovement(head=25, min_points=10)
    whole.feed_lr(steps, lr)
    got = whole.feed(steps, values)
    want = []
    for s in steps:
        live.feed_lr([s], [lr[s]])
        want += live.feed([s], [values[s]])
    assert got == want
    assert orjson.dumps(whole.state()) == orjson.dumps(live.state())
