"""A job's process attaches only to the attempt it was started for (RUNWATCH_ATTEMPT).

Job control moves a run on to its next attempt when it gives one up (the reaper, after
the attempt's worker stopped heartbeating, requeues it; a worker starts attempt n+1). A
process of attempt n whose start was slow (a loaded machine, a Ray job's runtime
environment) can reach `runwatch.init()` after that: it must record nothing into the
run, which is attempt n+1's now (its CANCELLED or FAILED would end attempt n+1, whose own
process would then find the run ended and record a run elsewhere). A process that did
record its attempt, finished it, and calls init() again after a retry records a run of
its own, as after any end.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import runwatch
from runwatch.rundir import format as fmt
from runwatch.rundir.append import append_events
from runwatch.rundir.atomic import write_atomic
from runwatch.rundir.jsonl import dumps_line
from runwatch.rundir.manifest import build_manifest

# What job control appends when it gives attempt 1 up and requeues the run (reaper.conclude),
# and when a worker then starts attempt 2 (Worker._start).
GIVEN_UP = [{"phase": "FAILED", "attempt": 1, "code": "stopped_early",
             "reason": "the worker stopped heartbeating"},
            {"phase": "QUEUED", "attempt": 2}]
RESTARTED = [*GIVEN_UP, {"phase": "PREPARING", "attempt": 2, "worker": "w2"}]


def phases(run_dir: Path) -> list[tuple[str, int | None]]:
    return [(e["phase"], e.get("attempt"))
            for e in map(json.loads, (run_dir / fmt.EVENTS).read_text().splitlines())]


def job_folder(runs_dir: Path, monkeypatch: pytest.MonkeyPatch, attempt: str) -> Path:
    """A run folder as submit and a worker leave it when attempt 1's process starts, with
    the environment the worker gives the process of attempt `attempt`."""
    run_dir = runs_dir / "job-1"
    run_dir.mkdir()
    manifest = build_manifest("job-1", "team", method="sft", host="submitter", pid=1)
    write_atomic(run_dir / fmt.MANIFEST, dumps_line(manifest))
    append_events(run_dir, [{"phase": "QUEUED", "attempt": 1},
                            {"phase": "PREPARING", "attempt": 1, "worker": "w1"}])
    monkeypatch.setenv(fmt.ENV_RUN_DIR, str(run_dir))
    monkeypatch.setenv(fmt.ENV_RUN_ID, manifest["run_id"])
    monkeypatch.setenv(fmt.ENV_ATTEMPT, attempt)
    return run_dir


@pytest.mark.parametrize("moved_on", [GIVEN_UP, RESTARTED], ids=["requeued", "restarted"])
def test_a_process_given_up_before_it_attached_records_nothing_into_the_next_attempt(
        runs_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        moved_on: list[dict]) -> None:
    run_dir = job_folder(runs_dir, monkeypatch, attempt="1")
    append_events(run_dir, moved_on)
    before = phases(run_dir)
    with pytest.raises(fmt.RunDirError, match="at attempt 2 of its run, not attempt 1"):
        runwatch.init(dir=tmp_path / "elsewhere", name="stale")
    assert phases(run_dir) == before
    assert not (tmp_path / "elsewhere").exists()
    # the folder is free for attempt 2's own process, which records its attempt
    monkeypatch.setenv(fmt.ENV_ATTEMPT, "2")
    with runwatch.init(phase="PREPARING") as run:
        assert run.dir == run_dir
    assert phases(run_dir)[len(before):] == [("PREPARING", None), ("SUCCEEDED", None)]


def test_a_further_init_after_the_run_was_retried_records_a_run_of_its_own(
        runs_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run_dir = job_folder(runs_dir, monkeypatch, attempt="1")
    with runwatch.init() as run:
        assert run.dir == run_dir
    append_events(run_dir, [{"phase": "QUEUED", "attempt": 2}])  # `runwatch runs retry`
    before = phases(run_dir)
    with runwatch.init(dir=tmp_path / "own", name="second") as second:
        assert second.dir == tmp_path / "own" / "second"
    assert phases(run_dir) == before
