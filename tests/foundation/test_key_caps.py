"""Metric keys are capped per record and per run, each cap with a problem that names it.

A record with more metrics than MAX_KEYS_PER_RECORD is refused whole (it would hold the
index's write lock for as long as it takes to create every key); a run stops taking
new keys at MAX_KEYS_PER_RUN and reports each key it refused. Over HTTP both are a 400.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine, func, select

from runwatch.ingest import Indexer
from runwatch.ingest.points import MAX_KEYS_PER_RECORD, MAX_KEYS_PER_RUN
from runwatch.server.app import create_app
from runwatch.store import queries as q
from runwatch.store import schema as s
from runwatch.store.points import SEQ_MASK, key_of, run_points
from tests.support import manifest, write_run


def record(seq: int, keys: range, prefix: str = "k") -> dict[str, Any]:
    return {"seq": seq, "step": seq, "ts": 1e9 + seq,
            **{f"{prefix}/{i:06d}": float(i) for i in keys}}


def key_count(engine: Engine, name: str) -> int:
    with engine.connect() as conn:
        pk = q.resolve_run(conn, name).pk
        k = s.metric_keys.c
        return int(conn.execute(select(func.count()).where(k.run_pk == pk)).scalar() or 0)


def test_a_record_with_too_many_metrics_is_refused_whole(runs_dir: Path,
                                                         engine: Engine) -> None:
    write_run(runs_dir, "wide", [
        record(0, range(3)),
        record(1, range(MAX_KEYS_PER_RECORD + 1), prefix="w"),
        record(2, range(3)),
    ])
    report = Indexer(engine, runs_dir).index_once()
    assert key_count(engine, "wide") == 3
    refused = [p for p in report.problems if "line 2" in p]
    assert len(refused) == 1, report.problems
    assert f"{MAX_KEYS_PER_RECORD + 1} metrics" in refused[0]
    assert f"at most {MAX_KEYS_PER_RECORD}" in refused[0]
    with engine.connect() as conn:
        assert q.last_values(conn, q.resolve_run(conn, "wide").pk)["k/000000"]["points"] == 2


def test_a_run_takes_at_most_max_keys_per_run(runs_dir: Path, engine: Engine) -> None:
    per = MAX_KEYS_PER_RECORD
    records = [record(i, range(i * per, (i + 1) * per)) for i in range(MAX_KEYS_PER_RUN // per)]
    over = len(records)
    records.append(record(over, range(over * per, over * per + 5)))
    records.append(record(over + 1, range(3)))  # known keys are still taken
    write_run(runs_dir, "many", records)
    report = Indexer(engine, runs_dir).index_once()
    assert key_count(engine, "many") == MAX_KEYS_PER_RUN
    capped = [p for p in report.problems if f"{MAX_KEYS_PER_RUN} metric keys" in p]
    assert capped and f"line {over + 1}" in capped[0], report.problems
    with engine.connect() as conn:
        values = q.last_values(conn, q.resolve_run(conn, "many").pk)
    assert values["k/000000"]["points"] == 2


def test_a_record_with_too_many_metrics_over_http_answers_400(runs_dir: Path,
                                                              engine: Engine) -> None:
    body = {"run_id": "id-http-wide", "file": "metrics.jsonl", "manifest": manifest("http-wide"),
            "records": [record(0, range(MAX_KEYS_PER_RECORD + 1))]}

    async def go() -> httpx.Response:
        app = create_app(engine, runs_dir=runs_dir)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url="http://127.0.0.1") as client:
            return await client.post("/api/ingest", json=body)

    res = asyncio.run(go())
    assert res.status_code == 400 and f"at most {MAX_KEYS_PER_RECORD}" in res.text, res.text


def test_the_sdk_splits_a_wide_log_and_leaves_out_keys_past_the_runs_cap(
        runs_dir: Path, engine: Engine) -> None:
    """`log()` of 3,000 metrics was accepted and then skipped whole by the indexer (the
    loss with it); keys past 10,000 were dropped at indexing with no word at the call.
    Past the cap a new key is left out of its call, with one warning, and the rest of the
    call is recorded: raising would end a loop hours in for a key, the loss with it."""
    from runwatch.sdk import init

    run = init(name="sdk-wide", dir=runs_dir)
    run.log({"loss": 0.5, **{f"m/{i:05d}": float(i) for i in range(3000)}}, step=8)
    run.log({f"n/{i:05d}": 1.0 for i in range(6999)}, step=9)
    with pytest.warns(RuntimeWarning, match=r"'late/0' would be run 'sdk-wide'.s metric key "
                                         r"number 10,001.*left out"):
        run.log({"loss": 0.4, "late/0": 1.0, "late/1": 2.0}, step=10)
    run.log({"loss": 0.3, "late/0": 1.0}, step=11)  # said once
    assert run.keys_left_out == 3
    run.finish()
    Indexer(engine, runs_dir).index_once()
    assert key_count(engine, "sdk-wide") == MAX_KEYS_PER_RUN
    with engine.connect() as conn:
        pk = q.resolve_run(conn, "sdk-wide").pk
        # the keys of each step in one statement: `q.history` of every key reads each key
        # apart, seconds for 10,000 of them
        keys_at: dict[int, set[int]] = {}
        for point, step, _ in run_points(conn, pk, -1, SEQ_MASK):
            keys_at.setdefault(step, set()).add(key_of(point))
        steps = q.history(conn, pk, ["loss", "m/02999"])
        problems = conn.execute(select(s.ingest_problems.c.message)).scalars().all()
    assert sorted((step, len(keys)) for step, keys in keys_at.items()) == [
        (8, 3001), (9, 6999), (10, 1), (11, 1)]
    assert [h.step for h in steps] == [8, 10, 11]
    assert steps[0].values["m/02999"] == 2999.0 and steps[0].values["loss"] == 0.5
    assert [h.values["loss"] for h in steps[1:]] == [0.4, 0.3]
    assert problems == []  # nothing the index had to drop
