"""A hand-started run killed and resumed later trained only while a process of it lived:
its duration (the run list's, `runs get`'s and the API's `duration_s`) leaves out the span
its manifest's `dead_spans` records, as its device time does. Found in review: the list
showed the night a run lay dead as training time, while its cost left it out."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from runwatch.analysis.timing import run_duration_s
from runwatch.server.app import create_app
from runwatch.store.db import open_engine
from tests.jobs.test_killed_resume_cost import _killed_and_resumed, _lines
from tests.server.apiclient import Api
from tests.support import cli_here


def test_the_duration_of_a_killed_and_resumed_run_leaves_out_the_time_it_lay_dead(
        tmp_path: Path) -> None:
    folder = _killed_and_resumed(tmp_path)
    runs = folder.parent
    events = _lines(folder / "events.jsonl")
    (since, to), = orjson.loads((folder / "manifest.json").read_bytes())["dead_spans"]
    wall = events[-1]["ts"] - events[0]["ts"]
    listed, = json.loads(cli_here("runs", "list", "--dir", str(runs), "-o", "json").stdout)
    detail = json.loads(cli_here("runs", "get", "kr", "--dir", str(runs), "-o", "json").stdout)
    engine = open_engine(runs / ".runwatch" / "index.db")
    try:
        api = Api(create_app(engine, warm=False))
        from_api = api.ok("/api/runs")["runs"][0]["duration_s"]
    finally:
        engine.dispose()
    assert listed["duration_s"] == pytest.approx(wall - (to - since), abs=1e-6)
    assert detail["run"]["duration_s"] == listed["duration_s"] == from_api
    # as its device time counts it (each phase rounded to the millisecond on its own)
    assert listed["duration_s"] == pytest.approx(detail["cost"]["device_seconds"], abs=0.002)
    assert listed["duration_s"] <= wall - 2.0


def test_a_dead_span_counts_only_within_the_runs_time() -> None:
    # a span partly before the start or after the end takes off only its part within
    assert run_duration_s(100.0, 200.0, None, False, idle=[(50.0, 120.0), (190.0, 300.0)]) \
        == 70.0
    # a live run: until now
    assert run_duration_s(100.0, None, None, False, now=400.0, idle=[(150.0, 350.0)]) == 100.0
