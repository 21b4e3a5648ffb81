"""A new attempt whose files an indexer first sees in one pass (a server that was down, a
later `runwatch index`): the attempt-2 event forgets attempt 1's points and where its files
stopped (purge_attempt), and the same pass must then read the new attempt's files from
their start, since a folder that does not change is not read again. Found in review: a
pass that read every file's offset once, before the events, skipped a new metrics file no
longer than the old one (attempt 2 showed no metrics); and the engine config, read before
the events, was forgotten by the purge (older than that change)."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Engine, func, select

from runwatch.ingest import Indexer
from runwatch.jobs.attempts import new_attempt
from runwatch.store import schema as s
from tests.support.jobs import record_attempt, run_row, submit_command


def points(engine: Engine) -> int:
    with engine.connect() as conn:
        n = conn.execute(select(func.count()).select_from(s.metric_points)).scalar()
    assert n is not None
    return int(n)


def test_a_new_attempt_seen_in_one_pass_has_its_metrics_indexed(
        engine: Engine, runs_dir: Path) -> None:
    run = submit_command(engine, runs_dir, "again", max_attempts=1)
    record_attempt(run.dir, 1, "FAILED", steps=5, code="failed")
    indexer = Indexer(engine, runs_dir)
    indexer.index_once()
    assert points(engine) == 5
    # attempt 2 starts and ends while no indexer of this index looks (a server that was
    # down, a later `runwatch index`): its metrics file is shorter than attempt 1's
    new_attempt(run.dir, 2)
    record_attempt(run.dir, 2, "SUCCEEDED", steps=3)
    indexer.index_once()
    row = run_row(engine, "again")
    assert (row.status, row.attempt) == ("SUCCEEDED", 2)
    indexer.index_once()  # the folder is unchanged: a pass reads nothing more
    assert points(engine) == 3
    row = run_row(engine, "again")
    assert (row.observed_step, row.saved_step) == (2, 2)  # metrics and checkpoints read


def test_a_new_attempt_seen_in_one_pass_keeps_its_engine_config(
        engine: Engine, runs_dir: Path) -> None:
    """Older than this session (fails on a9d3258 too): the whole files are read before
    the events, so the purge the attempt-2 event makes in the same pass forgets the
    engine_config.json just read (and its offset row), and an unchanged folder is not
    looked at again."""
    run = submit_command(engine, runs_dir, "again", max_attempts=1)
    record_attempt(run.dir, 1, "FAILED", steps=5, code="failed")
    indexer = Indexer(engine, runs_dir)
    indexer.index_once()
    new_attempt(run.dir, 2)
    record_attempt(run.dir, 2, "SUCCEEDED", steps=3)
    indexer.index_once()
    indexer.index_once()
    assert run_row(engine, "again").engine_config == '{"attempt":2}'
