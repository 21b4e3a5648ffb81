"""A run folder whose record file ends in a torn line (its process was killed mid-line) is
appended to again, by a resumed run or by job control: the torn line is ended first, so
no new record is glued onto it, nothing whole is lost, and readers read on right."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, select

import runwatch
from runwatch.ingest import Indexer
from runwatch.rundir import format as fmt
from runwatch.rundir.append import append_events, locked, write_records
from runwatch.rundir.reader import read_new
from runwatch.store import open_engine
from runwatch.store import queries as q
from runwatch.store import schema as s
from tests.support import first_line

# A run that records a line in every record file, then writes a line of `file` that never
# ends, 256 KiB at a time, as a process killed mid-line leaves it.
KILLED_MID_LINE = textwrap.dedent("""
    import os, sys, runwatch
    from tests.support import wait_for
    runs, name = sys.argv[1], sys.argv[2]
    run = runwatch.init(name="r", dir=runs, flush_interval=0.05)
    for step in range(3):
        run.log({"loss": 1.0}, step=step)
    run.log_checkpoint(2, "training", "ck-2")
    run.log_text("before the crash")
    lines = {"events.jsonl": 1, "metrics.jsonl": 3, "checkpoints.jsonl": 1, "logs.jsonl": 1}
    wait_for(lambda: all((run.dir / f).is_file()
                         and (run.dir / f).read_bytes().count(b"\\n") == n
                         for f, n in lines.items()), what="the records on disk")
    fd = os.open(run.dir / name, os.O_WRONLY | os.O_APPEND)
    os.write(fd, b'{"step": 3, "ts": 1.0, "seq": 3, "note": "' + b"x" * (256 << 10))
    print("writing", flush=True)
    for _ in range(31):
        os.write(fd, b"x" * (256 << 10))
    sys.stdin.readline()  # the line is never ended: the parent kills this process
""")

REPO = Path(__file__).resolve().parents[2]


def killed_mid_line(runs: Path, name: str) -> None:
    """Run "r" in `runs`, its process killed with SIGKILL while it writes a line of `name`."""
    proc = subprocess.Popen([sys.executable, "-c", KILLED_MID_LINE, str(runs), name],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=REPO)
    try:
        assert first_line(proc, what="the child to start its endless line") == "writing"
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)


def indexed(engine: Engine) -> dict[str, list[Any]]:
    """What the index holds of run "r", per record file, and the problems it reported."""
    with engine.connect() as conn:
        pk = q.resolve_run(conn, "r").pk
        return {
            fmt.METRICS: [row.step for row in q.history(conn, pk)],
            fmt.EVENTS: [e["phase"] for e in q.events(conn, pk)],
            fmt.CHECKPOINTS: list(conn.execute(select(s.checkpoints.c.ckpt_id).where(
                s.checkpoints.c.run_pk == pk).order_by(s.checkpoints.c.seq)).scalars()),
            fmt.LOGS: list(conn.execute(select(s.logs.c.message).where(
                s.logs.c.run_pk == pk).order_by(s.logs.c.seq)).scalars()),
            "problems": list(q.problems(conn, pk)),
        }


@pytest.mark.parametrize("name", fmt.FILES)
def test_a_resumed_run_ends_a_torn_line_before_its_first_record(
        name: str, runs_dir: Path, tmp_path: Path) -> None:
    killed_mid_line(runs_dir, name)
    path = runs_dir / "r" / name
    before = path.read_bytes()
    assert not before.endswith(b"\n"), "the killed process left a torn line"
    engine = open_engine(tmp_path / "index.db")
    Indexer(engine, runs_dir).index_once()  # reads up to the torn line, and waits there
    assert indexed(engine)["problems"] == []

    with runwatch.init(name="r", dir=runs_dir, resume=True) as run:
        run.log({"loss": 0.5}, step=10)
        run.log({"loss": 0.25}, step=11)
        run.log_checkpoint(11, "training", "ck-11")
        run.log_text("after the resume")

    Indexer(engine, runs_dir).index_once()
    got = indexed(engine)
    assert got[fmt.METRICS] == [0, 1, 2, 10, 11]
    assert got[fmt.CHECKPOINTS] == ["ck-2", "ck-11"]
    assert got[fmt.LOGS] == ["before the crash", "after the resume"]
    assert got[fmt.EVENTS] == ["RUNNING", "RUNNING", "SUCCEEDED"]
    torn_line = before.count(b"\n") + 1
    assert len(got["problems"]) == 1, got["problems"]
    assert f"{name}: line {torn_line}:" in got["problems"][0], "the fragment, reported once"
    assert path.read_bytes().startswith(before + b"\n"), "the fragment is ended, not cut"
    res = read_new(path, limit=1 << 30, max_line=fmt.MAX_LINE_BYTES)
    seqs = [r["seq"] for r in res.records]
    assert seqs == list(range(len(seqs))), "the file's seqs go on one by one"
    assert not res.torn and len(res.bad) == 1


def test_a_record_whole_but_for_its_newline_is_kept_and_the_next_seq_follows_it(
        runs_dir: Path, tmp_path: Path) -> None:
    with runwatch.init(name="r", dir=runs_dir) as run:
        for step in range(3):
            run.log({"loss": 1.0}, step=step)
    path = runs_dir / "r" / fmt.METRICS
    with open(path, "ab") as f:  # a writer killed just before the newline
        f.write(b'{"step": 3, "ts": 1.0, "seq": 3, "loss": 0.75}')
    with runwatch.init(name="r", dir=runs_dir, resume=True) as run:
        run.log({"loss": 0.5}, step=10)
        run.log({"loss": 0.25}, step=11)
    engine = open_engine(tmp_path / "index.db")
    Indexer(engine, runs_dir).index_once()
    got = indexed(engine)
    assert got[fmt.METRICS] == [0, 1, 2, 3, 10, 11]
    assert got["problems"] == []
    assert [json.loads(line)["seq"] for line in path.read_bytes().splitlines()] == \
        [0, 1, 2, 3, 4, 5]


def test_job_control_ends_a_torn_line_the_same_way(runs_dir: Path, tmp_path: Path) -> None:
    killed_mid_line(runs_dir, fmt.LOGS)
    run_dir = runs_dir / "r"
    with open(run_dir / fmt.EVENTS, "ab") as f:  # an event whole but for its newline
        f.write(b'{"ts": 1.0, "seq": 1, "phase": "PREPARING"}')
    with locked(run_dir):
        write_records(run_dir, fmt.LOGS, [{"level": "info", "message": "job control's line"}])
    append_events(run_dir, [{"phase": "FAILED", "reason": "killed", "code": "killed"}])
    engine = open_engine(tmp_path / "index.db")
    Indexer(engine, runs_dir).index_once()
    got = indexed(engine)
    assert got[fmt.LOGS] == ["before the crash", "job control's line"]
    assert got[fmt.EVENTS] == ["RUNNING", "PREPARING", "FAILED"]
    assert len(got["problems"]) == 1 and f"{fmt.LOGS}: line 2:" in got["problems"][0]


def test_a_resumed_run_numbers_on_past_a_long_last_line(runs_dir: Path, tmp_path: Path) -> None:
    """A log line of 8 to 16 MiB, which the SDK writes and readers read, counts for the
    next seq like any other: the resumed run's first line is not taken for a repeat."""
    with runwatch.init(name="r", dir=runs_dir) as run:
        run.log_text("m" * (10 << 20))
    with runwatch.init(name="r", dir=runs_dir, resume=True) as run:
        run.log_text("after the resume")
    engine = open_engine(tmp_path / "index.db")
    Indexer(engine, runs_dir).index_once()
    got = indexed(engine)
    assert [len(m) for m in got[fmt.LOGS]] == [10 << 20, len("after the resume")]
    assert got["problems"] == []
