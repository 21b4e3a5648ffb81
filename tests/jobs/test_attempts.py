"""Attempts on disk and in the index: a retry moves attempt n's files into attempts/<n>/
and the indexer forgets attempt n's metrics, samples, checkpoints and findings while the
files stay on disk; the run's state comes from the current attempt only; a
CANCEL_REQUESTED set by job control holds until the attempt ends; the writes under the
folder's lock wait for it and never glue onto a torn line."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from sqlalchemy import Connection, Engine, delete, func, select, text

from runwatch.ingest import Indexer
from runwatch.jobs import control
from runwatch.jobs.attempts import move_attempt_files, new_attempt
from runwatch.jobs.lifecycle import TransitionError
from runwatch.rundir import format as fmt
from runwatch.rundir.append import RunBusy, append_events, locked
from runwatch.store import schema as s
from runwatch.store.db import open_engine
from tests.support.jobs import events, job, record_attempt, run_row, submit_command

SCOPED = sorted([fmt.CHECKPOINTS, fmt.ENGINE_CONFIG, fmt.METRICS,
                 fmt.sample_file_name(1, "train")])


def held(engine: Engine, pk: int) -> dict[str, int | None]:
    """How many rows of each attempt-scoped kind the index holds for run `pk`."""
    with engine.connect() as conn:
        out = {t.name: conn.execute(select(func.count()).select_from(t)
                                    .where(t.c.run_pk == pk)).scalar()
               for t in (s.metric_keys, s.samples, s.checkpoints, s.findings, s.health_state)}
        out["metric_points"] = conn.execute(select(func.count()).select_from(
            s.metric_points)).scalar()
        o = s.ingest_offsets.c  # files read so far (a fresh row starts at offset 0)
        out["offsets"] = conn.execute(select(func.count()).select_from(s.ingest_offsets).where(
            o.run_pk == pk, o.file.in_(SCOPED), (o.offset > 0) | o.mtime.is_not(None))
        ).scalar()
    return out


def test_retry_forgets_the_old_attempt_in_the_index_and_keeps_it_on_disk(
        engine: Engine, runs_dir: Path) -> None:
    run = submit_command(engine, runs_dir, "again", max_attempts=1)
    record_attempt(run.dir, 1, "FAILED", steps=5, code="failed")
    Indexer(engine, runs_dir).index_once()
    with engine.begin() as conn:  # what the health engine would have found
        conn.execute(text("INSERT INTO findings (run_pk, rule_id, severity, status, evidence, "
                          "message, advice, opened_ts, updated_ts) VALUES (:pk, 'r', 'warn', "
                          "'open', '{}', 'm', 'a', 0, 0)"), {"pk": run.run_pk})
        conn.execute(text("INSERT INTO health_state (run_pk, state, last_seq) "
                          "VALUES (:pk, '{}', 4)"), {"pk": run.run_pk})
    before = held(engine, run.run_pk)
    assert before["metric_points"] == 5 and before["samples"] == 1
    assert before["checkpoints"] == 1 and before["offsets"] == 4
    row = run_row(engine, "again")
    assert (row.status, row.reason_code, row.attempt, row.saved_step) == ("FAILED", "failed", 1, 4)

    assert control.retry(engine, run.run_pk).phase == "QUEUED"

    assert sorted(p.name for p in (run.dir / "attempts" / "1").iterdir()) == SCOPED
    assert not any(fmt.is_attempt_file(p.name) for p in run.dir.iterdir())
    last = events(run.dir)[-1]
    assert (last["phase"], last["attempt"], last["seq"]) == ("QUEUED", 2, 4)
    assert held(engine, run.run_pk) == dict.fromkeys(before, 0)
    row = run_row(engine, "again")
    assert (row.status, row.attempt, row.reason, row.reason_code, row.started_at,
            row.ended_at, row.observed_step, row.saved_step, row.engine_config) == \
        ("QUEUED", 2, None, None, None, None, None, None, None)
    got = job(engine, "again")
    assert got is not None and (got["attempt"], got["worker_id"]) == (2, None)

    record_attempt(run.dir, 2, "SUCCEEDED", steps=3)
    Indexer(engine, runs_dir).index_once()
    row = run_row(engine, "again")
    assert (row.status, row.attempt, row.reason, row.observed_step) == ("SUCCEEDED", 2, None, 2)
    running = [e for e in events(run.dir) if e["phase"] == "RUNNING"]
    assert row.started_at == running[-1]["ts"], "the start of the current attempt"
    with engine.connect() as conn:
        values = conn.execute(select(s.metric_points.c.value)
                              .order_by(s.metric_points.c.id)).scalars().all()
        prompt = conn.execute(select(s.samples.c.prompt)).scalar()
    assert values == [1 / 2, 1 / 3, 1 / 4] and prompt == "attempt 2"
    # an index built from scratch over the same folder agrees
    fresh = open_engine(runs_dir.parent / "fresh.db")
    Indexer(fresh, runs_dir).index_once()
    again = run_row(fresh, "again")
    assert (again.status, again.attempt, again.observed_step) == ("SUCCEEDED", 2, 2)
    assert held(fresh, again.pk)["metric_points"] == 3
    fresh.dispose()


def test_a_new_attempt_interrupted_after_the_move_finishes_on_the_next_try(
        runs_dir: Path, engine: Engine) -> None:
    run = submit_command(engine, runs_dir, "crash")
    record_attempt(run.dir, 1, "FAILED")
    with locked(run.dir):
        assert move_attempt_files(run.dir, 1) == SCOPED  # ... and the process died here
    (run.dir / fmt.METRICS).write_text('{"seq": 0, "step": 0, "loss": 7}\n')  # a late file
    assert new_attempt(run.dir, 2) == [fmt.METRICS]
    kept = run.dir / "attempts" / "1"
    assert json.loads((kept / f"{fmt.METRICS}.1").read_text())["loss"] == 7, "none overwritten"
    assert (kept / fmt.METRICS).read_text().count("\n") == 5
    assert [e["phase"] for e in events(run.dir)].count("QUEUED") == 2
    with pytest.raises(TransitionError, match=r"QUEUED, not ended.*wait for it to end"):
        new_attempt(run.dir, 3)
    assert [e["phase"] for e in events(run.dir)].count("QUEUED") == 2, "no second event"


def test_cancel_requested_holds_until_the_attempt_ends(engine: Engine, runs_dir: Path) -> None:
    run = submit_command(engine, runs_dir, "stopping")
    with engine.begin() as conn:
        conn.execute(text("UPDATE jobs SET worker_id = 'w' WHERE run_pk = :pk"),
                     {"pk": run.run_pk})
    record_attempt(run.dir, 1, end=None)
    Indexer(engine, runs_dir).index_once()
    assert control.cancel(engine, run.run_pk).phase == "CANCEL_REQUESTED"
    assert run_row(engine, "stopping").status == "CANCEL_REQUESTED"
    # the process had not heard of the request yet and reports progress
    append_events(run.dir, [{"phase": "RUNNING", "stage": "epoch 2"}])
    Indexer(engine, runs_dir).index_once()
    row = run_row(engine, "stopping")
    assert (row.status, row.stage) == ("CANCEL_REQUESTED", "epoch 2")
    append_events(run.dir, [{"phase": "CANCELLED", "code": "cancelled", "reason": "stopped"}])
    Indexer(engine, runs_dir).index_once()
    row = run_row(engine, "stopping")
    assert (row.status, row.reason_code, row.ended_at is not None) == \
        ("CANCELLED", "cancelled", True)


def test_events_are_appended_after_a_torn_line_and_only_under_the_lock(
        runs_dir: Path) -> None:
    run_dir = runs_dir / "torn"
    run_dir.mkdir()
    (run_dir / fmt.EVENTS).write_text('{"seq": 0, "phase": "QUEUED"}\n{"seq": 1, "pha')
    with locked(run_dir):
        with pytest.raises(RunBusy, match="being recorded by a live process"):
            append_events(run_dir, [{"phase": "CANCELLED"}], wait_s=0)
        done = threading.Event()

        def append_then_set() -> None:
            append_events(run_dir, [{"phase": "CANCELLED"}], wait_s=30)
            done.set()

        waiter = threading.Thread(target=append_then_set)
        waiter.start()
    waiter.join(timeout=30)
    assert done.is_set(), "the append went ahead once the lock was free"
    lines = (run_dir / fmt.EVENTS).read_text().splitlines()
    assert lines[1] == '{"seq": 1, "pha'
    assert json.loads(lines[2])["seq"] == 1 and json.loads(lines[2])["phase"] == "CANCELLED"


def test_a_slice_read_before_a_concurrent_purge_is_not_stored(engine: Engine,
                                                              runs_dir: Path) -> None:
    """Another indexer (submit's, control's) may purge the run's attempt while this one
    holds records it read from the old metrics file: the purge removed the file's ingest
    offsets, so the slice is rolled back instead of storing the old attempt's points."""
    run = submit_command(engine, runs_dir, "raced")
    record_attempt(run.dir, 1, "FAILED", steps=5)

    def purged_meanwhile(conn: Connection, run_pk: int, _points: object) -> None:
        # what the other indexer's purge did before this slice could write its offsets
        conn.execute(delete(s.ingest_offsets).where(s.ingest_offsets.c.run_pk == run_pk,
                                                    s.ingest_offsets.c.file == fmt.METRICS))

    report = Indexer(engine, runs_dir, hooks=[purged_meanwhile]).index_once()
    assert not report.problems
    assert held(engine, run.run_pk)["metric_points"] == 0
    Indexer(engine, runs_dir).index_once()
    assert held(engine, run.run_pk)["metric_points"] == 5, "read again from the start"


def test_a_new_attempt_takes_its_checkpoint_files_along(runs_dir: Path, engine: Engine) -> None:
    """The checkpoints/ folder moves with checkpoints.jsonl, so attempt 2 cannot write over
    attempt 1's files and attempt 1's relative paths still name them from attempts/1/."""
    run = submit_command(engine, runs_dir, "ckpt")
    record_attempt(run.dir, 1, "FAILED")
    folder = run.dir / fmt.CHECKPOINT_DIR
    folder.mkdir()
    (folder / "step-000004-training.pt").write_bytes(b"attempt 1 weights")
    with (run.dir / fmt.CHECKPOINTS).open("a") as f:
        f.write(json.dumps({"seq": 9, "ts": 1.0, "step": 4, "kind": "training", "id": "c4",
                            "path": f"{fmt.CHECKPOINT_DIR}/step-000004-training.pt"}) + "\n")
    moved = new_attempt(run.dir, 2)
    assert fmt.CHECKPOINT_DIR in moved and not folder.exists()
    kept = run.dir / "attempts" / "1"
    last = json.loads((kept / fmt.CHECKPOINTS).read_text().splitlines()[-1])
    assert (kept / last["path"]).read_bytes() == b"attempt 1 weights"
