"""Each run's open findings by severity, as listed, kept where findings are written: the
count /metrics sums stays the listings' through every writer (a new batch, a
re-evaluation, a new attempt, a deleted run, another process), and a scrape reads no
finding, so it costs a row a run however long the findings' history."""

from __future__ import annotations

import math
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Connection, Engine, event, text

from runwatch.health import store as health_store
from runwatch.health.engine import Engine as HealthEngine
from runwatch.health.findings import Finding
from runwatch.health.thresholds import NONE
from runwatch.ingest.lifecycle import purge_attempt
from runwatch.server.runner import Runner, free_port
from runwatch.store.runs import delete_run
from tests.support import http
from tests.support.wait import wait_for

from .test_store import append, index, listing, run_pk, steps, write_run

NAN = math.nan


def write_runs(runs: Path, phase: str = "RUNNING") -> list[str]:
    """Runs whose listings merge findings (one signal at four speeds, a spike in two
    metrics at one step, a NaN in two metrics at once beside one that has passed) and one
    whose truncation is open until more steps come (`resolve_truncation`)."""
    write_run(runs, "entropy", "grpo",
              [{"step": i, "entropy": 2.8 * math.exp(-i / 15)} for i in range(60)], phase)
    write_run(runs, "spikes", "sft",
              [{"step": i, "loss": 3.0 if i == 20 else 2.0 - 0.01 * i,
                "grad_norm": 20.0 if i == 20 else 1.0} for i in range(25)], phase)
    write_run(runs, "nan", "dpo", [{"step": i, "loss": NAN if i in (3, 11) else 0.5,
                                    "grad_norm": math.inf if i == 11 else 1.0}
                                   for i in range(12)], phase)
    write_run(runs, "trunc", "grpo", steps(0, 20, truncated_ratio=0.5), phase)
    return ["entropy", "spikes", "nan", "trunc"]


def resolve_truncation(runs: Path) -> None:
    append(runs / "trunc", steps(20, 40, truncated_ratio=0.1), 20)


def listed(engine: Engine, names: list[str]) -> dict[str, int]:
    out: Counter[str] = Counter()
    for name in names:
        out.update(f["severity"] for f in listing(engine, name, now=0) if f["status"] == "open")
    return dict(out)


def counted(engine: Engine) -> dict[str, int]:
    with engine.connect() as conn:
        return health_store.open_by_severity(conn)


def test_the_count_follows_every_writer_of_findings(engine: Engine, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    names = write_runs(runs)
    index(engine, runs)
    first = listed(engine, names)
    assert first["warning"] >= 2 and first["critical"] == 1, first
    assert counted(engine) == first
    # a batch resolves a finding
    resolve_truncation(runs)
    index(engine, runs)
    resolved = listed(engine, names)
    assert resolved["warning"] == first["warning"] - 1
    assert counted(engine) == resolved
    # thresholds under which a re-evaluation finds nothing: its findings were deleted
    with engine.begin() as conn:
        health_store.set_thresholds(conn, "p", {"rules": {"metric.non_finite": {"enabled": False}}})
        health_store.refresh_project(conn, "p")
    assert listed(engine, ["nan"]).get("critical", 0) == 0
    assert counted(engine) == listed(engine, names)
    with engine.begin() as conn:
        health_store.set_thresholds(conn, "p", None)
        health_store.refresh_project(conn, "p")
    assert counted(engine) == listed(engine, names) == resolved
    # a new attempt forgets its findings; a deleted run takes them along
    with engine.begin() as conn:
        purge_attempt(conn, run_pk(engine, "entropy"))
        delete_run(conn, run_pk(engine, "spikes"))
    assert counted(engine) == listed(engine, ["nan", "trunc"])
    assert counted(engine) != resolved


@pytest.fixture
def server(engine: Engine) -> Iterator[Runner]:
    """A server that indexes nothing itself: findings come from other processes."""
    with Runner(engine, port=free_port(), warm=False) as srv:
        yield srv


def gauge(srv: Runner) -> dict[str, int]:
    got = http.get(f"{srv.url}/metrics")
    assert got.status_code == 200, got.text
    prefix = 'runwatch_health_findings_open{severity="'
    return {line[len(prefix):].split('"')[0]: int(line.split()[-1])
            for line in got.text.splitlines()
            if line.startswith(prefix) and int(line.split()[-1])}


def listed_by_api(srv: Runner, names: list[str]) -> dict[str, int]:
    out: Counter[str] = Counter()
    for name in names:
        got = http.get(f"{srv.url}/api/runs/{name}/health")
        assert got.status_code == 200, got.text
        # a silent running run's live stall is listed, not stored, so not counted
        out.update(f["severity"] for f in got.json()["findings"]
                   if f["status"] == "open" and f["id"] is not None)
    return dict(out)


def test_a_server_counts_what_another_process_indexed(server: Runner, engine: Engine,
                                                      db_url: str, tmp_path: Path) -> None:
    """`runwatch index` in a process of its own writes the findings; the server, which
    keeps no count of its own, scrapes what the API lists, before and after a change."""
    runs = tmp_path / "runs"
    names = write_runs(runs)

    def index_elsewhere() -> None:
        done = subprocess.run([sys.executable, "-m", "runwatch", "index", str(runs),
                               "--db", db_url], capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr

    index_elsewhere()
    before = listed_by_api(server, names)
    assert before["critical"] == 1, before
    assert gauge(server) == before
    resolve_truncation(runs)
    index_elsewhere()
    after = listed_by_api(server, names)
    assert after["warning"] == before["warning"] - 1
    assert gauge(server) == after


def test_a_scrape_reads_no_finding(server: Runner, engine: Engine, tmp_path: Path) -> None:
    """The gauge sums each run's count: a scrape reads no finding, open or resolved (it
    read every finding of the runs with one open, ~450 ms at 100,000 findings)."""
    runs = tmp_path / "runs"
    write_runs(runs)
    index(engine, runs)
    statements: list[str] = []

    def seen(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        statements.append(statement)

    event.listen(engine, "before_cursor_execute", seen)
    try:
        assert gauge(server)["critical"] == 1
    finally:
        event.remove(engine, "before_cursor_execute", seen)
    assert any("health_state" in sql for sql in statements), statements
    assert not [sql for sql in statements if "findings" in sql]


def opened(conn: Connection, pk: int, rule_id: str, severity: str, step: int) -> None:
    """A batch of run `pk` that opens one finding (the store's own writer)."""
    found = Finding(rule_id=rule_id, title=rule_id, severity=severity, status="open",
                    metric="loss", first_step=step, last_step=step, evidence={},
                    message="m", advice="a")
    health_store.save(conn, pk, HealthEngine("sft", {}, NONE, None), [found], step)


# PostgreSQL only: SQLite lets one writer in at a time, so two never write side by side
@pytest.mark.parametrize("db_url", ["postgres"], indirect=True)
def test_two_writers_of_one_run_at_once_leave_its_count_right(engine: Engine,
                                                               tmp_path: Path) -> None:
    """Two transactions (two servers, or a server and `runwatch index`) each open a finding
    of one run: the one that commits last counts the other's finding too, as it waits for
    the run's health_state row before counting."""
    runs = tmp_path / "runs"
    write_run(runs, "r", "sft", steps(0, 5, loss=1.0))
    index(engine, runs)
    pk = run_pk(engine, "r")
    with engine.connect() as first:
        with first.begin():
            opened(first, pk, "loss.above_max", "critical", 10)

            def second() -> None:
                with engine.begin() as conn:
                    opened(conn, pk, "grpo.clip_high", "warning", 20)

            writer = threading.Thread(target=second)
            writer.start()

            def waiting() -> bool:
                with engine.connect() as conn:
                    return bool(conn.execute(text(
                        "SELECT count(*) FROM pg_stat_activity WHERE datname = "
                        "current_database() AND wait_event_type = 'Lock'")).scalar())

            wait_for(waiting, what="the second writer waiting for the run's row")
        writer.join()
    assert listed(engine, ["r"]) == {"critical": 1, "warning": 1}
    assert counted(engine) == {"critical": 1, "warning": 1}
