"""Poison input is a problem of its line (or a 4xx over HTTP), never a stuck run or a 500.

Lines nested 10,000 deep, integers far beyond 64 bits next to NaN, in every record file,
and manifests with fields of the wrong kind: the indexer reports each and indexes the
rest of the run in the same pass, and POST /api/ingest refuses them with 400.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine, select

from runwatch.ingest import Indexer
from runwatch.rundir import format as fmt
from runwatch.server.app import create_app
from runwatch.store import queries as q
from runwatch.store import schema as s
from tests.support import manifest, write_manifest, write_run

DEEP = "[" * 10_000 + "]" * 10_000
BIG = "1" + "0" * 30  # beyond 64 bits, still a float
HUGE = "1" + "0" * 400  # beyond any float


def good(file: str, seq: int) -> str:
    """A valid record of `file` with this seq."""
    rec: dict[str, Any] = {"seq": seq, "ts": 1e9 + seq}
    if file == fmt.METRICS:
        rec.update(step=seq, loss=float(seq))
    elif file == fmt.EVENTS:
        rec.update(phase="RUNNING")
    elif file == fmt.CHECKPOINTS:
        rec.update(step=seq, kind="training", id=f"c{seq}")
    else:
        rec.update(message=f"line {seq}")
    return json.dumps(rec)


# Lines refused whole: each is a problem of its line.
POISON = {
    "metrics nested 10,000 deep": (fmt.METRICS, '{"seq":1,"step":1,"ts":1e9,"x":' + DEEP + '}'),
    "metrics NaN and an integer beyond floats": (
        fmt.METRICS, '{"seq":1,"step":1,"ts":1e9,"loss":NaN,"big":' + HUGE + '}'),
    "events seq beyond 64 bits": (fmt.EVENTS, '{"seq":' + BIG + ',"ts":NaN,"phase":"RUNNING"}'),
    "checkpoints step beyond 64 bits": (
        fmt.CHECKPOINTS, '{"seq":1,"ts":NaN,"step":' + BIG + ',"kind":"training","id":"c"}'),
    "logs nested 10,000 deep": (fmt.LOGS, '{"seq":1,"ts":1e9,"message":"m","data":' + DEEP + '}'),
}
# Lines kept without their unusable value (a time, an optional count), as the format says.
KEPT = {
    "metrics ts beyond floats": (fmt.METRICS, '{"seq":1,"step":1,"ts":' + HUGE + ',"loss":NaN}'),
    "events done beyond 64 bits": (
        fmt.EVENTS, '{"seq":1,"ts":NaN,"phase":"RUNNING","done":' + BIG + '}'),
    "events ts beyond floats": (fmt.EVENTS, '{"seq":1,"ts":' + HUGE + ',"phase":"RUNNING"}'),
}


def offset_of(engine: Engine, name: str, file: str) -> int:
    with engine.connect() as conn:
        o = s.ingest_offsets.c
        pk = q.resolve_run(conn, name).pk
        return int(conn.execute(select(o.offset).where(o.run_pk == pk, o.file == file))
                   .scalar() or 0)


@pytest.mark.parametrize("case", [*POISON, *KEPT])
def test_a_poison_line_is_a_problem_and_the_rest_of_the_run_is_indexed(
        case: str, runs_dir: Path, engine: Engine) -> None:
    file, line = POISON.get(case) or KEPT[case]
    run = write_manifest(runs_dir / "poisoned")
    path = run / file
    path.write_text("\n".join([good(file, 0), line, good(file, 2)]) + "\n", encoding="utf-8")
    report = Indexer(engine, runs_dir).index_once()
    assert not any("indexing failed" in p for p in report.problems), report.problems
    line_2 = [p for p in report.problems if f"{file} line 2" in p or f"{file}: line 2" in p]
    assert bool(line_2) == (case in POISON), report.problems
    assert offset_of(engine, "poisoned", file) == path.stat().st_size, "the file was read whole"
    again = Indexer(engine, runs_dir).index_once()
    assert again.problems == [] and again.rows == 0


@pytest.mark.parametrize("fields", [
    '"created_at": "yesterday"',
    f'"created_at": {HUGE}',
    '"created_at": NaN',
    '"tags": "not-a-list"',
    f'"extra": {"[" * 300 + "]" * 300}',
])
def test_bad_manifest_fields_are_problems_not_a_stuck_run(fields: str, runs_dir: Path,
                                                          engine: Engine) -> None:
    """The run is indexed (its bad fields set aside) and the problem is reported once."""
    run = runs_dir / "bad-manifest"
    run.mkdir(parents=True)
    text = json.dumps(manifest("bad-manifest"))[:-1] + ", " + fields + "}"
    (run / fmt.MANIFEST).write_text(text, encoding="utf-8")
    (run / fmt.METRICS).write_text(good(fmt.METRICS, 0) + "\n", encoding="utf-8")
    report = Indexer(engine, runs_dir).index_once()
    assert not any("indexing failed" in p for p in report.problems), report.problems
    assert any(fmt.MANIFEST in p for p in report.problems), report.problems
    with engine.connect() as conn:
        row = q.resolve_run(conn, "bad-manifest")
        assert q.last_values(conn, row.pk)["loss"]["points"] == 1
        assert isinstance(row.created_at, float)
        json.loads(row.tags)
    assert Indexer(engine, runs_dir).index_once().problems == []


def post(engine: Engine, runs_dir: Path, body: bytes) -> httpx.Response:
    async def go() -> httpx.Response:
        app = create_app(engine, runs_dir=runs_dir)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url="http://127.0.0.1") as client:
            return await client.post("/api/ingest", content=body,
                                     headers={"content-type": "application/json"})

    return asyncio.run(go())


def batch(name: str, file: str, records: str, manifest_text: str | None = None) -> bytes:
    head = json.dumps(manifest(name)) if manifest_text is None else manifest_text
    return (f'{{"run_id": "id-{name}", "file": "{file}", "manifest": {head}, '
            f'"records": [{records}]}}').encode()


@pytest.mark.parametrize("case", [*POISON, *KEPT])
def test_poison_records_over_http_answer_400(case: str, runs_dir: Path,
                                             engine: Engine) -> None:
    file, line = POISON.get(case) or KEPT[case]
    res = post(engine, runs_dir, batch("http", file, line))
    assert res.status_code == (400 if case in POISON else 200), res.text


def test_a_body_nested_10000_deep_answers_400(runs_dir: Path, engine: Engine) -> None:
    assert post(engine, runs_dir, f'{{"batches": {DEEP}}}'.encode()).status_code == 400


def test_a_bad_manifest_over_http_answers_400(runs_dir: Path, engine: Engine) -> None:
    text = json.dumps(manifest("http-manifest"))[:-1] + ', "created_at": "yesterday"}'
    res = post(engine, runs_dir, batch("http-manifest", fmt.METRICS, good(fmt.METRICS, 0),
                                       text))
    assert res.status_code == 400 and "created_at" in res.text, res.text


def test_poison_samples_are_set_aside_and_the_rest_stored(runs_dir: Path,
                                                          engine: Engine) -> None:
    """A samples file with a reward beyond floats, a group beyond 64 bits and an item
    nested deeper than JSON writers go: those are set aside and reported, the good item
    is stored, the run indexed."""
    run = write_manifest(runs_dir / "samples")
    items = ['{"prompt": "ok", "reward": 1.0}', '{"prompt": "a", "reward": ' + HUGE + '}',
             '{"prompt": "b", "group": ' + BIG + '}',
             '{"prompt": "c", "extra": ' + "[" * 300 + "]" * 300 + '}']
    (run / fmt.sample_file_name(1, "train")).write_text(
        '{"samples": [' + ", ".join(items) + "]}", encoding="utf-8")
    report = Indexer(engine, runs_dir).index_once()
    assert not any("indexing failed" in p for p in report.problems), report.problems
    assert any("3 samples" in p for p in report.problems), report.problems
    with engine.connect() as conn:
        prompts = conn.execute(select(s.samples.c.prompt).order_by(s.samples.c.idx)).scalars()
        assert list(prompts) == ["ok"]


def test_a_run_id_longer_than_its_column_is_refused_with_a_problem(runs_dir: Path,
                                                                   engine: Engine) -> None:
    """PostgreSQL refuses a run_id over 64 characters, so the run could never be stored:
    it is not indexed, and the problem says why (SQLite behaves the same)."""
    write_run(runs_dir, "long-id", [json.loads(good(fmt.METRICS, 0))], run_id="r" * 65)
    report = Indexer(engine, runs_dir).index_once()
    assert any("run_id" in p and "64" in p for p in report.problems), report.problems
    with engine.connect() as conn:
        assert conn.execute(select(s.runs)).first() is None


def test_a_samples_file_whose_kind_no_column_holds_is_a_problem(runs_dir: Path,
                                                                engine: Engine) -> None:
    """PostgreSQL holds a samples kind of at most 64 characters: a longer one (the file
    name allows it) is reported instead of failing the run's every pass."""
    run = write_manifest(runs_dir / "long-kind")
    name = fmt.sample_file_name(1, "train", "k" * 65)
    (run / name).write_text('{"samples": [{"prompt": "p"}]}', encoding="utf-8")
    report = Indexer(engine, runs_dir).index_once()
    assert any(name in p and "64" in p for p in report.problems), report.problems
    with engine.connect() as conn:
        assert conn.execute(select(s.samples)).first() is None


def test_a_run_that_keeps_failing_is_not_retried_every_pass(runs_dir: Path,
                                                            engine: Engine) -> None:
    """A run whose indexing fails for a reason no check foresaw is tried again when its
    folder changes (or after a wait that grows), not on every pass: each try costs a
    traceback in the log and a core for as long as the try takes."""
    run = write_run(runs_dir, "fails", [json.loads(good(fmt.METRICS, 0))])
    tries = []

    def hook(conn: object, run_pk: int, points: object) -> None:
        tries.append(run_pk)
        raise RuntimeError("an unforeseen failure")

    indexer = Indexer(engine, runs_dir, hooks=[hook])
    indexer.index_once()
    indexer.index_once()
    assert len(tries) == 1, "the second pass right after the first did not try again"
    with open(run / fmt.METRICS, "a", encoding="utf-8") as f:
        f.write(good(fmt.METRICS, 1) + "\n")
    indexer.index_once()
    assert len(tries) == 2, "a change to the folder is tried at once"
