"""A run started by hand, killed (SIGKILL) and resumed by hand later holds no devices
while no process of it lived: the resume records the span from the killed process's last
record to itself in the manifest (`dead_spans`), and the run's device time and phases
leave it out (runwatch.jobs.cost.Resumed). Found in an audit: a run killed in the evening
and resumed the next morning was billed the night."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

import runwatch
from runwatch.jobs.cost import CPU, attempt_times, resumed_gaps, run_cost
from tests.support import cli_here

TRAIN = """
import os, sys, time
from pathlib import Path
import runwatch
resume = sys.argv[2] == "resume"
run = runwatch.init(project="p", name="kr", dir=sys.argv[1], resume=resume)
start = 10 if resume else 0
for s in range(start, start + 10):
    run.log({"loss": 1.0 / (s + 1)}, step=s)
if resume:
    run.finish()
else:
    metrics = Path(sys.argv[1]) / "kr" / "metrics.jsonl"
    while not metrics.exists() or metrics.read_bytes().count(b"\\n") < 10:
        time.sleep(0.05)  # until the writer has written every step
    os.kill(os.getpid(), 9)  # SIGKILL: nothing of the run's end is written
"""


def _lines(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


def _killed_and_resumed(tmp_path: Path) -> Path:
    script = tmp_path / "train.py"
    script.write_text(TRAIN)
    runs = tmp_path / "runs"
    first = subprocess.run([sys.executable, str(script), str(runs), "first"], check=False,
                           capture_output=True, timeout=120)
    assert first.returncode == -9, first.stderr.decode()
    time.sleep(2.0)  # the run lies dead for a while before it is resumed
    subprocess.run([sys.executable, str(script), str(runs), "resume"], check=True,
                   capture_output=True, timeout=120)
    return runs / "kr"


def test_a_killed_run_resumed_later_is_not_billed_the_time_it_lay_dead(
        tmp_path: Path) -> None:
    folder = _killed_and_resumed(tmp_path)
    events = _lines(folder / "events.jsonl")
    assert [e["phase"] for e in events] == ["RUNNING", "RUNNING", "SUCCEEDED"]
    manifest = orjson.loads((folder / "manifest.json").read_bytes())
    resumed_at = manifest["resumed_at"]
    last_record = max(r["ts"] for name in ("metrics.jsonl", "events.jsonl")
                      for r in _lines(folder / name) if r["ts"] < resumed_at)
    # the resume recorded the span no process lived
    assert manifest["dead_spans"] == [[last_record, resumed_at]]
    assert resumed_at - last_record >= 2.0  # the sleep and more

    # device time: the killed process until its last record, then the resumed one
    lived = (last_record - events[0]["ts"]) + (events[2]["ts"] - resumed_at)
    shown = json.loads(cli_here("runs", "get", "kr", "--dir", str(folder.parent), "-o",
                                "json").stdout)["cost"]
    # (each phase's span is rounded to the millisecond on its own)
    assert shown["device_seconds"] == pytest.approx(lived, abs=0.002)
    assert shown["device_seconds_estimate"] is False
    # the old figure counted the dead span as device time
    wall = events[2]["ts"] - events[0]["ts"]
    assert run_cost(events, 1, CPU).device_seconds == pytest.approx(wall, abs=0.002)
    assert shown["device_seconds"] <= wall - 2.0


def test_a_run_resumed_after_it_ended_or_a_job_has_no_dead_span(tmp_path: Path) -> None:
    spans = [[150.0, 199.5]]
    assert resumed_gaps(spans, job=False)[0].at == 199.5
    # a job: its worker records its attempts' phases, and they stay as it recorded them
    assert resumed_gaps(spans, job=True) == ()
    # what is not a pair of times is no span
    assert resumed_gaps([[1.0], ["1", 2.0], [3.0, 2.0], [True, 5.0]], job=False) == ()
    assert resumed_gaps(None, job=False) == ()
    # a run that recorded its end before it was resumed: no span is recorded, and the
    # resume starts a new attempt
    ended = [{"ts": 100.0, "phase": "RUNNING"}, {"ts": 150.0, "phase": "SUCCEEDED"},
             {"ts": 200.0, "phase": "RUNNING"}]
    # (one attempt of two sessions: a resume is no retry; only job control queues one)
    assert [(a.number, a.held_s) for a in attempt_times(ended, until=300.0)] == [(1, 150.0)]
    with runwatch.init(name="ended", dir=tmp_path) as run:
        run.log({"loss": 1.0}, step=0)
    with runwatch.init(name="ended", dir=tmp_path, resume=True) as run:
        run.log({"loss": 0.5}, step=1)
    assert "dead_spans" not in orjson.loads((tmp_path / "ended" / "manifest.json").read_bytes())


def test_a_run_resumed_for_each_evaluate_is_one_attempt_of_several_sessions(
        tmp_path: Path) -> None:
    """Found in a new user's trial: an HF Trainer script (evaluate, train, evaluate) read
    Attempts #1-#3 in runs get, each with its own device time and spend: the callback
    resumes the run for each evaluate() after the one before ended. A resume is the same
    attempt; its device time is its sessions' and not the time between them."""
    for i, step in enumerate((0, 5, 9)):
        with runwatch.init(name="evals", dir=tmp_path, resume=i > 0) as run:
            run.log({"eval_loss": 1.0 - step / 10}, step=step)
            time.sleep(0.05)
        time.sleep(0.3)  # between sessions: no process holds the devices
    events = _lines(tmp_path / "evals" / "events.jsonl")
    assert [e["phase"] for e in events] == ["RUNNING", "SUCCEEDED"] * 3
    shown = json.loads(cli_here("runs", "get", "evals", "--dir", str(tmp_path), "-o",
                                "json").stdout)
    (attempt,) = shown["attempts"]
    assert attempt["attempt"] == 1 and attempt["phase"] == "SUCCEEDED"
    sessions = sum(b["ts"] - a["ts"] for a, b in zip(events[::2], events[1::2], strict=True))
    assert shown["cost"]["device_seconds"] == pytest.approx(sessions, abs=0.003)
    assert shown["cost"]["device_seconds"] < events[-1]["ts"] - events[0]["ts"] - 0.5
    table = cli_here("runs", "get", "evals", "--dir", str(tmp_path)).stdout
    assert "Attempts" not in table
    # a retry (job control queues it) is still an attempt of its own
    retried = [{"ts": 0.0, "phase": "QUEUED"}, {"ts": 1.0, "phase": "RUNNING"},
               {"ts": 2.0, "phase": "FAILED"}, {"ts": 3.0, "phase": "QUEUED"},
               {"ts": 4.0, "phase": "RUNNING"}, {"ts": 6.0, "phase": "SUCCEEDED"}]
    assert [(a.number, a.held_s) for a in attempt_times(retried)] == [(1, 1.0), (2, 2.0)]
