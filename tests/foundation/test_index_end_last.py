"""A run is never seen ended before the records it wrote before its end are in the index.

A pass reads events.jsonl first (an event may start a new attempt, whose files must then
be read from their start), each file in transactions of its own; CI once read a run
SUCCEEDED on PostgreSQL and then found its metrics missing. A metrics hook runs inside the
transaction that stores a slice of metrics, so what another connection reads at that
moment is what any reader of the index could read then.
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Connection, Engine, func, select

from runwatch.ingest import Indexer
from runwatch.jobs.attempts import new_attempt
from runwatch.rundir import format as fmt
from runwatch.sdk import init
from runwatch.store import schema as s
from tests.support import sdk_run
from tests.support.jobs import record_attempt, run_row, submit_command


class Reader:
    """A metrics hook that reads, from a connection of its own, the run's committed phase,
    the committed points and the run's committed end events, each time a slice of metrics
    is stored (the checkpoints and logs are read after the metrics)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.seen: list[tuple[str, int, int]] = []

    def __call__(self, conn: Connection, run_pk: int, points: object) -> None:
        with self.engine.connect() as other:
            status = other.execute(select(s.runs.c.status).where(s.runs.c.pk == run_pk)
                                   ).scalar_one()
            stored = other.execute(select(func.count()).select_from(s.metric_points)
                                   ).scalar_one()
            ended = other.execute(select(func.count()).select_from(s.events).where(
                s.events.c.run_pk == run_pk, s.events.c.phase.in_(fmt.TERMINAL_PHASES))
            ).scalar_one()
        self.seen.append((status, int(stored), int(ended)))


def test_a_finished_run_read_in_one_pass_ends_after_its_metrics(
        engine: Engine, runs_dir: Path) -> None:
    """Before: the pass committed the SUCCEEDED event and the run's status, then stored
    its metrics; a reader in between saw a run that had succeeded with no metrics."""
    sdk_run(runs_dir, "done", steps=50)
    reader = Reader(engine)
    Indexer(engine, runs_dir, hooks=[reader]).index_once()
    assert reader.seen, "the pass stored no metrics"
    # while metrics were stored, no reader saw the run ended, nor its end event
    assert all(status not in fmt.TERMINAL_PHASES and ended == 0
               for status, _, ended in reader.seen), reader.seen
    row = run_row(engine, "done")
    assert (row.status, row.observed_step) == ("SUCCEEDED", 49)
    assert row.ended_at is not None


def test_a_retried_run_read_in_one_pass_ends_after_its_new_attempts_metrics(
        engine: Engine, runs_dir: Path) -> None:
    """A first pass over a run whose attempt 1 failed and attempt 2 succeeded: attempt 1's
    end passes (attempt 2 starts after it, and forgets attempt 1's points); attempt 2's
    end waits for attempt 2's metrics, which are read once, from their start."""
    run = submit_command(engine, runs_dir, "again", max_attempts=2)
    record_attempt(run.dir, 1, "FAILED", steps=5, code="failed")
    new_attempt(run.dir, 2)
    record_attempt(run.dir, 2, "SUCCEEDED", steps=3)
    reader = Reader(engine)
    Indexer(engine, runs_dir, hooks=[reader]).index_once()
    # one slice of metrics, attempt 2's, stored while the run ran its attempt 2
    assert reader.seen == [("RUNNING", 0, 1)]  # attempt 1's FAILED is in the history
    row = run_row(engine, "again")
    assert (row.status, row.attempt, row.observed_step, row.saved_step) == (
        "SUCCEEDED", 2, 2, 2)


def test_a_runs_last_samples_are_stored_before_its_end(engine: Engine, runs_dir: Path) -> None:
    """A validation's samples file written before the end: the pass stored the end event,
    then the samples files, so a reader in between saw the run ended with none."""
    run = init(name="val", dir=runs_dir, method="sft")
    for i in range(3):
        run.log({"loss": 1.0 / (i + 1)}, step=i)
    run.log_samples(2, [{"prompt": "1+1=", "completion": "2", "reward": 1.0}], split="val")
    run.finish()
    seen: list[tuple[str, int]] = []

    def look(conn: Connection, run_pk: int) -> None:  # after the pass stored the events
        with engine.connect() as other:
            status = other.execute(select(s.runs.c.status).where(s.runs.c.pk == run_pk)
                                   ).scalar_one()
            samples = other.execute(select(func.count()).select_from(s.samples)).scalar_one()
        seen.append((status, int(samples)))

    Indexer(engine, runs_dir, events_hooks=[look]).index_once()
    assert seen == [("SUCCEEDED", 1)], seen
