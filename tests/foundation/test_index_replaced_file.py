"""A record file replaced after it was indexed (cut short, an older copy restored, then
written on by a resumed run) is read again from its start (ingest/replaced.py): the index
holds what the folder holds, as a fresh index of it would, and says so once."""

from __future__ import annotations

import json
from pathlib import Path

from sqlalchemy import Engine, select

import runwatch
from runwatch.ingest.indexer import Indexer
from runwatch.store import schema as s
from runwatch.store.db import open_engine
from runwatch.store.series import read_series
from tests.foundation.test_index_unchanged import is_unchanged
from tests.support import sdk_run


def loss_by_step(engine: Engine, name: str) -> dict[int, float]:
    with engine.connect() as conn:
        run_pk = conn.execute(select(s.runs.c.pk).where(s.runs.c.name == name)).scalar_one()
        key_id = conn.execute(select(s.metric_keys.c.id).where(
            s.metric_keys.c.run_pk == run_pk, s.metric_keys.c.key == "loss")).scalar_one()
        series = read_series(conn, key_id)
    return dict(zip(series.step.tolist(), series.value.tolist(), strict=True))


def fresh_index(runs: Path, db: Path) -> Engine:
    engine = open_engine(db)
    Indexer(engine, runs).index_once()
    return engine


def problems(engine: Engine) -> list[str]:
    with engine.connect() as conn:
        return list(conn.execute(select(s.ingest_problems.c.message)).scalars())


def keep_lines(path: Path, n: int) -> None:
    """Cut a file to its first `n` lines in place, as `head -n N old > f` would."""
    lines = path.read_bytes().splitlines(keepends=True)[:n]
    with open(path, "r+b") as f:
        f.truncate(0)
        f.write(b"".join(lines))


def test_a_file_cut_short_then_resumed_is_read_again(tmp_path: Path) -> None:
    runs, db = tmp_path / "runs", tmp_path / "index.db"
    sdk_run(runs, "a", steps=100)
    engine = fresh_index(runs, db)
    metrics = runs / "a" / "metrics.jsonl"
    keep_lines(metrics, 50)
    assert not is_unchanged(runs, db)  # shorter than what was read: not "unchanged"
    report = Indexer(engine, runs).index_once()
    said = ("metrics.jsonl of a was replaced (it is shorter than what was read, or its "
            "start changed): read again")
    assert said in report.problems
    assert sorted(loss_by_step(engine, "a")) == list(range(50))
    assert is_unchanged(runs, db)
    with runwatch.init(name="a", dir=runs, resume=True) as run:
        for step in range(200, 260):
            run.log({"loss": 0.5}, step=step)
    report = Indexer(engine, runs).index_once()
    assert not [p for p in report.problems if "metrics.jsonl" in p]
    assert loss_by_step(engine, "a") == loss_by_step(fresh_index(runs, tmp_path / "b.db"), "a")
    assert sorted(loss_by_step(engine, "a")) == [*range(50), *range(200, 260)]
    assert problems(engine).count(said) == 1


def test_a_file_cut_short_and_grown_past_the_offset_between_passes(tmp_path: Path) -> None:
    """Never seen shorter: its bytes before where the indexer stopped are other ones."""
    runs, db = tmp_path / "runs", tmp_path / "index.db"
    sdk_run(runs, "a", steps=40)
    engine = fresh_index(runs, db)
    metrics = runs / "a" / "metrics.jsonl"
    size = metrics.stat().st_size
    keep_lines(metrics, 10)
    with open(metrics, "a", encoding="utf-8") as f:
        seq = 10
        while f.tell() <= size + 100:
            f.write(json.dumps({"seq": seq, "ts": 1.7e9, "step": 1000 + seq, "loss": 7.0}) + "\n")
            seq += 1
        f.write("not json\n")
    assert not is_unchanged(runs, db)
    report = Indexer(engine, runs).index_once()
    assert any("metrics.jsonl of a was replaced" in p for p in report.problems)
    # the bad line is named by its line in the file as it is now
    assert f"{metrics}: line {seq + 1}: not JSON" in " ".join(report.problems)
    by_step = loss_by_step(engine, "a")
    assert by_step == loss_by_step(fresh_index(runs, tmp_path / "b.db"), "a")
    assert sorted(by_step)[:10] == list(range(10)) and by_step[1010] == 7.0


def test_an_older_copy_of_the_events_file_restored(tmp_path: Path) -> None:
    """The run's state follows the events the folder holds now."""
    runs, db = tmp_path / "runs", tmp_path / "index.db"
    sdk_run(runs, "a", steps=5)
    events = runs / "a" / "events.jsonl"
    older = events.read_bytes().splitlines(keepends=True)[:1]
    engine = fresh_index(runs, db)
    with engine.connect() as conn:
        assert conn.execute(select(s.runs.c.status)).scalar() == "SUCCEEDED"
    events.write_bytes(b"".join(older))
    Indexer(engine, runs).index_once()
    with engine.connect() as conn:
        stored = conn.execute(select(s.events.c.seq)).scalars().all()
    assert len(stored) == 1


def test_an_events_file_left_with_no_whole_record_leaves_no_ended_state(tmp_path: Path) -> None:
    """Emptied (or left with only a torn line) the events file says nothing, and the run no
    longer reads SUCCEEDED with an end time behind no event (found in review: the state was
    derived only while events remained). It reads as a run no event speaks for yet."""
    runs, db = tmp_path / "runs", tmp_path / "index.db"
    sdk_run(runs, "a", steps=5)
    engine = fresh_index(runs, db)
    events = runs / "a" / "events.jsonl"
    columns = (s.runs.c.status, s.runs.c.ended_at, s.runs.c.reason, s.runs.c.attempt)
    try:
        for left in (b"", b'{"seq": 0, "ts": 1.0, "pha'):
            events.write_bytes(left)
            Indexer(engine, runs).index_once()
            with engine.connect() as conn:
                assert tuple(conn.execute(select(*columns)).one()) == ("QUEUED", None, None, 1)
                assert conn.execute(select(s.events.c.seq)).scalars().all() == []
    finally:
        engine.dispose()
