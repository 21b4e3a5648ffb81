"""A long batch (a file read whole, an indexer's slice of a run) is judged at once: the
points no judgement can hold at are taken in bulk, the windows with numpy. Each detector
then gives, point for point, the verdicts and the state it gives one point at a time, and
an indexed run the findings a live run gets line by line."""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from runwatch.health import detectors as d
from runwatch.health import excursions as ex
from runwatch.health import jumps as j
from runwatch.health import progress as pg
from runwatch.health import store as health_store
from runwatch.health import trends as t
from runwatch.health.engine import Engine
from runwatch.health.trendstats import point_noise, window_medians, window_point_noises
from runwatch.ingest.indexer import Indexer
from runwatch.store import open_engine
from tests.support import write_manifest
from tests.support.cli import run_cli

from .helpers import to_batch

N = 3000  # points: many of each batch's windows, gates and judgements


def loss_like(seed: int, ints: bool = False) -> list[Any]:
    """A falling, noisy loss with what each detector looks for: isolated spikes, a
    stretch that goes out and comes back, a step up that stays, a plateau that turns up,
    an epoch logged again to the last digit, ties and both zeros at the logger's 4
    decimals, and holes (NaN, infinities). With `ints`, some values are ints."""
    rng = random.Random(seed)
    epoch = [round(1.5 + 0.1 * rng.random(), 4) for _ in range(40)]
    out: list[Any] = []
    for i in range(N):
        v = 2.0 * math.exp(-i / 700) + 0.6 + 0.02 * rng.gauss(0, 1)
        if i % 397 == 0:
            v *= 6  # an isolated spike
        if 900 <= i < 960:
            v += 1.5  # out and back
        if i >= 2400:
            v += 0.9  # stepped up, and stays
        if 1600 <= i < 1800:
            v = 0.55 + 0.0004 * (i - 1600)  # settled, then turning up
        if 2000 <= i < 2080:
            v = epoch[i % 40]  # the same stretch twice
        v = round(v, 4)
        if i % 251 == 0:
            v = -0.0 if i % 2 else 0.0
        if i % 173 == 0:
            v = rng.choice([math.nan, math.inf, -math.inf])
        if ints and i % 89 == 0 and v - v == 0:
            v = int(v * 10)
        out.append(v)
    return out


# detector, and how it is fed a batch (values, steps) -> per-point verdicts
Feed = Callable[[Any, list[Any], list[int]], list[bool]]
DETECTORS: dict[str, tuple[Callable[[dict[str, Any] | None], Any], Feed]] = {
    "repeats": (lambda st: d.Repeats(4, 1e-3, state=st), lambda x, v, s: x.feed(v, s)),
    "excursion": (lambda st: ex.Excursion(0.5, 3.0, 20, 5, 0.2, 5, state=st),
                  lambda x, v, s: x.feed(v, s)),
    "excursion_tight": (lambda st: ex.Excursion(0.05, 1.0, 7, 2, 0.2, 5, state=st),
                        lambda x, v, s: x.feed(v, s)),
    "isolated": (lambda st: ex.Isolated(3.0, 5, 3, 1.5, 5, state=st),
                 lambda x, v, s: x.feed(v, s)),
    "shift": (lambda st: j.Shift(6.0, 0.2, 10, 3, state=st), lambda x, v, s: x.feed(v, s)),
    "shift_tight": (lambda st: j.Shift(1.0, 0.01, 5, 1, state=st),
                    lambda x, v, s: x.feed(v, s)),
    "upturn": (lambda st: ex.Upturn(0.005, 8, 5.0, 40, state=st), lambda x, v, s: x.feed(v, s)),
    "upturn_tight": (lambda st: ex.Upturn(0.0005, 4, 1.0, 10, state=st),
                     lambda x, v, s: x.feed(v, s)),
    "not_falling": (lambda st: pg.NoProgress("down", 0.05, 30, 5, 200, 10, noise_z=1.0,
                                             window_info=True, fell_once=3, rise_limit=0.2,
                                             state=st),
                    lambda x, v, s: x.feed(s, v)),
    "stuck": (lambda st: pg.NoProgress("down", 0.005, 30, 2, 50, 8, max_spread=0.005,
                                       window_info=True, state=st),
              lambda x, v, s: x.feed(s, v)),
    "doubled": (lambda st: pg.NoProgress("up", 1.0, 6, 3, moved=True, latest=5, state=st),
                lambda x, v, s: x.feed(s, v)),
    "above_start": (lambda st: pg.NoProgress("up", 0.2, 32, 16, moved=True, noise_z=3.0,
                                             state=st),
                    lambda x, v, s: x.feed(s, v)),
    "moved_warm_steps": (lambda st: pg.NoProgress("up", 0.01, 60, 3, warmup_steps=40,
                                                  moved=True, latest=5, state=st),
                         lambda x, v, s: x.feed(s, v)),
    "rising": (lambda st: t.Trend("up", 16, 0.5, True, noise_z=3.0, undone=3, state=st),
               lambda x, v, s: x.feed(s, v)),
    "climbing": (lambda st: t.Trend("up", 32, 0.01, True, noise_z=1.0, undone=3, state=st),
                 lambda x, v, s: x.feed(s, v)),
}


def feed_in(name: str, values: list[Any], sizes: list[int]) -> tuple[list[bool], Any]:
    """Verdicts and final state of a detector fed `values` (at steps 0, 1, ...) in batches
    of `sizes` (repeated), its state saved and loaded as JSON between batches."""
    make, feed = DETECTORS[name]
    state, verdicts, at, k = None, [], 0, 0
    while at < len(values):
        part = values[at : at + sizes[k % len(sizes)]]
        det = make(state)
        verdicts += feed(det, part, list(range(at, at + len(part))))
        state = orjson.loads(orjson.dumps(det.state()))
        at, k = at + len(part), k + 1
    return verdicts, state


@pytest.mark.parametrize("ints", [False, True], ids=["floats", "some_ints"])
@pytest.mark.parametrize("name", sorted(DETECTORS))
def test_a_batch_read_whole_is_judged_as_point_by_point(name: str, ints: bool) -> None:
    values = loss_like(7, ints)
    one_by_one = feed_in(name, values, [1])
    assert feed_in(name, values, [N]) == one_by_one
    # batches long and short, so steady stretches start and end anywhere
    assert feed_in(name, values, [700, 3, 64, 31, 1100, 2]) == one_by_one


def test_a_training_loss_waiting_for_its_validations_is_taken_as_it_was_logged() -> None:
    """The paired detectors keep a batch's training points apart (steps and values) until
    its validations are judged: read whole or a step at a time, the same findings."""
    values = loss_like(3)
    val_steps = list(range(100, N, 100))
    val = [round(1.2 + (0.002 * k if k > 12 else -0.01 * k), 4) for k in range(len(val_steps))]
    series = {"loss": values, "val/loss": (val_steps, val)}
    whole = Engine("sft", {}).feed(to_batch(series))
    state: dict[str, Any] | None = None
    steps_of = {name: (list(range(N)) if name == "loss" else val_steps) for name in series}
    found = {}
    for lo in range(0, N, 37):
        part = {}
        for name, data in series.items():
            vals = data if name == "loss" else data[1]
            idx = [i for i, s in enumerate(steps_of[name]) if lo <= s < lo + 37]
            if idx:
                part[name] = ([steps_of[name][i] for i in idx], [vals[i] for i in idx])
        engine = Engine("sft", {}, state=state)
        for f in engine.feed(to_batch(part)):
            found[(f.rule_id, f.first_step)] = f
        state = orjson.loads(orjson.dumps(engine.state()))
    paired = ("loss.diverged", "val.gap_rising", "sft.plateau")
    assert {(f.rule_id, f.first_step): (f.status, f.last_step, f.message)
            for f in whole if f.rule_id in paired} == {
        k: (f.status, f.last_step, f.message) for k, f in found.items() if k[0] in paired}


def test_numpy_windows_give_the_medians_and_noises_python_gives() -> None:
    rng = random.Random(5)
    points = [rng.choice([0.0, -0.0, 0.5, 0.5, 1.0, rng.uniform(-1, 1)]) for _ in range(400)]
    for width in (3, 5, 20):
        assert window_medians(points, width).tolist() == [
            d.median(points[i : i + width]) for i in range(len(points) - width + 1)]
    ends = list(range(64, 401, 7))
    assert window_point_noises(points, ends, 64) == [point_noise(points[e - 64 : e])
                                                     for e in ends]
    # a change past the largest float: numpy would order its NaN otherwise, so none
    assert window_point_noises([1e308, -1e308, 1e308, 0.0], [4], 4) == []


def write_run(folder: Path, lines: list[dict[str, Any]]) -> Path:
    run = write_manifest(folder / "sft-long", project="p", method="sft")
    (run / "events.jsonl").write_text(json.dumps({"ts": 1e9, "seq": 0, "phase": "RUNNING"})
                                      + "\n", encoding="utf-8")
    append(run, lines)
    return run


def append(run: Path, lines: list[dict[str, Any]]) -> None:
    with open(run / "metrics.jsonl", "a", encoding="utf-8") as fh:
        for line in lines:
            fh.write(json.dumps(line) + "\n")  # NaN and Infinity as the SDK writes them


def listing(db: Path) -> dict[tuple[str, int], tuple[str, str, int, str]]:
    """The run's findings as `runwatch runs health` lists them (a stall left out: it
    reads the wall time between index passes)."""
    found = json.loads(run_cli("runs", "health", "sft-long", "--db", str(db), "-o",
                               "json").stdout)["findings"]
    return {(f["rule_id"], f["first_step"]): (f["status"], f["severity"], f["last_step"],
                                              f["message"])
            for f in found if f["rule_id"] != "run.stalled"}


def test_an_indexed_run_has_the_findings_of_the_run_indexed_as_it_was_logged(
        tmp_path: Path) -> None:
    """`runwatch index` reads a finished run's file in slices of thousands of lines, each
    judged at once, into a real SQLite index; a live run is indexed every few lines. The
    same findings, with the same steps, severities and messages."""
    values = loss_like(11)
    lines = [{"seq": i, "ts": 1e9 + 10 * i, "step": i, "loss": values[i],
              "learning_rate": 2e-5,
              "grad_norm": 1.0 + 0.3 * math.sin(i) + (25.0 if i % 613 == 0 else 0.0)}
             for i in range(N)]
    write_run(tmp_path / "whole", lines)
    run_cli("index", str(tmp_path / "whole"), "--db", str(tmp_path / "whole.db"))
    run = write_run(tmp_path / "live", [])
    engine = open_engine(tmp_path / "live.db")
    rng, at = random.Random(2), 0
    while at < N:  # a few lines at a time, each pass judging them one by one
        size = rng.randint(1, 25)
        append(run, lines[at : at + size])
        Indexer(engine, tmp_path / "live", hooks=[health_store.on_metrics]).index_once()
        at += size
    engine.dispose()
    whole = listing(tmp_path / "whole.db")
    assert whole == listing(tmp_path / "live.db")
    assert {"loss.spike", "loss.excursion", "loss.stepped_up", "loss.repeats"} <= {
        rule for rule, _ in whole}
