"""`runwatch runs list` of a local index imports neither SQLAlchemy nor numpy (0.6 s of
its start-up), and the run list it reads with plain SQL (store/runrows.list_runs) lists
the rows store/queries.list_runs lists, in the same order, and they make the same
summaries, on SQLite and PostgreSQL: each filter, a search in another case, LIKE's own
characters searched literally, a limit, a run still running."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from runwatch.analysis.views import run_summary
from runwatch.ingest.indexer import Indexer
from runwatch.sdk import init
from runwatch.store import queries as q
from runwatch.store import runrows
from runwatch.store.plain import Reader
from tests.foundation.test_cli_startup import imported_by
from tests.support import sdk_run
from tests.support.wait import wait_for

FILTERS: list[tuple[dict[str, Any], list[str]]] = [
    ({}, ["live-run", "beta", "alpha-2", "alpha_1"]),
    ({"limit": 2}, ["live-run", "beta"]),
    ({"search": "ALPHA"}, ["alpha-2", "alpha_1"]),
    ({"search": "h%q"}, ["alpha-2"]),
    ({"search": "h_q"}, []),
    ({"search": "_1"}, ["alpha_1"]),
    ({"search": "qwen"}, ["alpha_1"]),
    ({"search": "QA_V2"}, ["alpha-2"]),
    ({"search": "failed"}, ["alpha-2"]),
    ({"project": "p1"}, ["beta", "alpha_1"]),
    ({"status": "failed"}, ["alpha-2"]),
    ({"status": "RUNNING"}, ["live-run"]),
    ({"search": "run", "project": "p2", "status": "running"}, ["live-run"]),
    ({"search": "nothing-matches"}, []),
]


def test_the_plain_list_is_the_query_s_list(engine: Engine, runs_dir: Path) -> None:
    sdk_run(runs_dir, "alpha_1", project="p1", base_model="Qwen-0.5B")
    sdk_run(runs_dir, "alpha-2", project="p2", status="FAILED", dataset="math%QA_v2")
    sdk_run(runs_dir, "beta", project="p1", group="sweep-1", tags=["a", "b"])
    live = init(name="live-run", dir=runs_dir, project="p2", method="grpo")
    try:
        live.log({"loss": 1.0}, step=0)
        live.log({"loss": 0.5}, step=1)

        def live_indexed() -> bool:  # its writer writes a moment later
            Indexer(engine, runs_dir).index_once()
            with engine.connect() as conn:
                return [r.status for r in q.list_runs(conn, search="live-run")] == ["RUNNING"]

        wait_for(live_indexed, what="the live run indexed as RUNNING")
        now = time.time()
        raw = engine.raw_connection()
        try:
            reader = Reader(raw, "?" if engine.dialect.paramstyle == "qmark" else "%s")
            for kw, names in FILTERS:
                with engine.connect() as conn:
                    want = q.list_runs(conn, **kw)
                got = runrows.list_runs(reader, **kw)
                assert [r.name for r in want] == names, kw
                assert [tuple(getattr(r, c) for c in runrows.SUMMARY_COLUMNS) for r in got] == \
                    [tuple(getattr(r, c) for c in runrows.SUMMARY_COLUMNS) for r in want], kw
                assert [run_summary(r, now) for r in got] == [run_summary(r, now) for r in want]
        finally:
            raw.close()
    finally:
        live.finish()


def test_runs_list_reads_the_index_without_sqlalchemy_or_numpy(runs_dir: Path) -> None:
    sdk_run(runs_dir, "listed", steps=3)
    first = imported_by("runs", "list", "--dir", str(runs_dir))
    assert "sqlalchemy" in first, "a folder not indexed yet is indexed first"
    for args in ([], ["-o", "json"], ["--search", "LIST", "--status", "succeeded"]):
        loaded = imported_by("runs", "list", "--dir", str(runs_dir), *args)
        assert "sqlite3" in loaded, "the probe saw the list read"
        assert loaded & {"sqlalchemy", "numpy", "alembic"} == set(), args
