"""A training process killed with SIGKILL loses at most the last flush interval."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from runwatch.ingest import Indexer
from runwatch.rundir.reader import read_new
from runwatch.store import open_engine
from runwatch.store import queries as q
from tests.support import first_line

CHILD = textwrap.dedent("""
    import sys, time, runwatch
    run = runwatch.init(name="killed", dir=sys.argv[1])
    for step in range(1000):
        run.log({"loss": 1.0 / (step + 1), "a": float(step)}, step=step)
    # Everything above is older than three flush intervals when the parent kills us.
    time.sleep(1.5)
    print("ready", flush=True)
    step = 1000
    while True:
        run.log({"loss": 0.0, "a": float(step)}, step=step)
        step += 1
        if step % 100 == 0:
            time.sleep(0.001)
""")


def test_sigkill_loses_at_most_the_last_flush_interval(runs_dir: Path, tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(runs_dir)], stdout=subprocess.PIPE,
                            text=True)
    assert first_line(proc, what="the child to log its first 1000 steps") == "ready"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    d = runs_dir / "killed"
    res = read_new(d / "metrics.jsonl", limit=1 << 30)
    steps = [r["step"] for r in res.records]
    assert steps[:1000] == list(range(1000)), "records older than the flush interval survived"
    assert res.bad == []
    events = [json.loads(line) for line in (d / "events.jsonl").read_text().splitlines()]
    assert [e["phase"] for e in events] == ["RUNNING"], "no finish was written"
    engine = open_engine(tmp_path / "i.db")
    Indexer(engine, runs_dir).index_once()
    with engine.connect() as conn:
        row = q.resolve_run(conn, "killed")
        assert row.status == "RUNNING" and row.observed_step >= 999
        assert q.process_gone(row), "the index sees that the run's process is gone"
