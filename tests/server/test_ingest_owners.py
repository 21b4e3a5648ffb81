"""What ingest may not write over HTTP: a run the server indexes from a runs folder (the folder
is its record), and a run under a name another run holds (the name would name two runs).

Over real HTTP to a real server (runwatch.server.runner.Runner) on the suite's `engine`,
SQLite and PostgreSQL alike."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine, func, insert, select
from sqlalchemy.exc import IntegrityError

from runwatch.server import routes_ingest
from runwatch.server.runner import Runner, free_port
from runwatch.store import schema as s
from runwatch.store.db import open_engine
from runwatch.store.runs import upsert_run
from tests.support import MakeRun, cli_here, http, sdk_run, wait_for
from tests.support.migrations import downgrade

from .apiclient import assert_error, manifest

OTHER_ID = "d" * 32


def post(server: Runner, body: Any) -> httpx.Response:
    return http.post(f"{server.url}/api/ingest", json=body, timeout=30)


def get(server: Runner, path: str, **params: Any) -> dict[str, Any]:
    resp = http.get(f"{server.url}{path}", params=params, timeout=30)
    assert resp.status_code == 200, resp.text
    body: dict[str, Any] = resp.json()
    return body


def indexed(server: Runner, name: str) -> dict[str, Any]:
    """The run `name` once the server's indexer has read its folder to its end."""
    def ended() -> dict[str, Any]:
        resp = http.get(f"{server.url}/api/runs/{name}", timeout=30)
        run: dict[str, Any] = resp.json().get("run") or {} if resp.status_code == 200 else {}
        return run if run.get("status") == "SUCCEEDED" else {}

    return wait_for(ended, what=f"the server to index {name}")


def losses(server: Runner, run_id: str) -> list[float]:
    series = get(server, "/api/series", run=run_id, key="loss", points=1000)["series"]
    return list(series[0]["value"]) if series else []


def names_in_index(engine: Engine, name: str) -> int:
    with engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(s.runs)
                                .where(s.runs.c.name == name)).scalar_one())


@pytest.fixture
def slow_server(engine: Engine, runs_dir: Path) -> Iterator[Runner]:
    """A server whose indexer reads the runs folder as it starts and then not for an hour:
    a run written to the folder after that is one the folder holds and the index does not."""
    with Runner(engine, runs_dir=runs_dir, port=free_port(), interval=3600,
                warm=False) as srv:
        yield srv


def test_a_run_of_the_runs_folder_cannot_be_written_over_http(
        server: Runner, make_run: MakeRun, runs_dir: Path) -> None:
    run_id = make_run("sft-1", steps=5)
    indexed(server, "sft-1")
    before = (runs_dir / "sft-1" / "events.jsonl").read_bytes()
    hacks = [
        {"run_id": run_id, "file": "events.jsonl",
         "records": [{"seq": 50, "ts": time.time(), "phase": "FAILED", "reason": "hacked"}]},
        {"run_id": run_id, "file": "metrics.jsonl",
         "records": [{"seq": 500, "step": 500, "ts": time.time(), "loss": 999.0}]},
        {"run_id": run_id, "file": "job.json",
         "content": {"kind": "command", "argv": ["true"], "cwd": "/"}},
        {"run_id": run_id, "file": "config.yaml", "content": "lr: 1.0\n"},
        # its own manifest, with another name or none: the folder's stays
        {"run_id": run_id, "file": "logs.jsonl", "records": [],
         "manifest": manifest(run_id, "renamed")},
    ]
    for batch in hacks:
        err = assert_error(post(server, batch), 409)
        assert "runs folder" in err["error"] and "sft-1" in err["error"], err
        assert err["results"][0]["status"] == 409
    run = get(server, "/api/runs/sft-1")["run"]
    assert (run["name"], run["status"], run["reason"]) == ("sft-1", "SUCCEEDED", None)
    assert 999.0 not in losses(server, run_id) and len(losses(server, run_id)) == 5
    assert get(server, "/api/runs/sft-1")["job"] is None
    assert (runs_dir / "sft-1" / "events.jsonl").read_bytes() == before
    # a request that mixes it with a run sent over HTTP: that one is stored
    mixed = {"batches": [hacks[1], {"run_id": OTHER_ID, "file": "metrics.jsonl",
                                    "manifest": manifest(OTHER_ID, "sent-1"),
                                    "records": [{"seq": 0, "step": 0, "ts": 1.0, "loss": 1}]}]}
    err = assert_error(post(server, mixed), 409)
    assert [r["ok"] for r in err["results"]] == [False, True]
    assert get(server, "/api/runs/sent-1")["run"]["run_id"] == OTHER_ID


def test_a_run_the_folder_holds_before_the_index_reads_it_cannot_be_written_first(
        slow_server: Runner, make_run: MakeRun, index: Any) -> None:
    """An early batch under the folder run's name would take seqs the folder writes later."""
    run_id = make_run("late", steps=3)
    early = {"run_id": run_id, "file": "metrics.jsonl", "manifest": manifest(run_id, "late"),
             "records": [{"seq": 1, "step": 1, "ts": 1.0, "loss": 999.0}]}
    err = assert_error(post(slow_server, early), 409)
    assert "runs folder" in err["error"]
    # this very run: coded so, for a sender that streams the run the folder holds (it was a
    # plain "name taken" before its folder was indexed)
    assert err["results"][0]["code"] == "folder_run", err
    index()  # the pass the server would run next
    assert losses(slow_server, run_id) == pytest.approx([2.0, 1.0, 2 / 3])


def test_a_run_sent_over_http_is_refused_once_a_folder_indexed_holds_it(
        server: Runner, runs_dir: Path) -> None:
    """A run streamed first and then found in the runs folder (the same run id) is the
    folder's from then on."""
    # written outside the runs folder, which the server indexes on its own: written there
    # and moved out, the server could index it first (and then refuse the batch)
    outside = runs_dir.parent / "outside"
    run_id = sdk_run(outside, "both", steps=3)
    moved = runs_dir.parent / "elsewhere"
    (outside / "both").rename(moved)
    sent = {"run_id": run_id, "file": "metrics.jsonl", "manifest": manifest(run_id, "both"),
            "records": [{"seq": 0, "step": 0, "ts": 1.0, "loss": 2.0}]}
    # the folder's own manifest text: the indexer finds it unchanged when it reads the folder
    sent["manifest"] = json.loads((moved / "manifest.json").read_text())
    assert post(server, sent).status_code == 200
    moved.rename(runs_dir / "both")
    indexed(server, "both")
    assert_error(post(server, sent), 409)
    assert losses(server, run_id) == pytest.approx([2.0, 1.0, 2 / 3])


def test_a_name_the_runs_folder_holds_is_taken(server: Runner, make_run: MakeRun) -> None:
    folder_id = make_run("sft-1", steps=2)
    indexed(server, "sft-1")
    taken = {"run_id": OTHER_ID, "file": "metrics.jsonl", "manifest": manifest(OTHER_ID, "sft-1"),
             "records": [{"seq": 0, "step": 0, "ts": 1.0, "loss": 1.0}]}
    err = assert_error(post(server, taken), 409)
    assert "'sft-1'" in err["error"] and "taken" in err["error"]
    assert get(server, "/api/runs/sft-1")["run"]["run_id"] == folder_id
    assert_error(http.get(f"{server.url}/api/runs/{OTHER_ID}", timeout=30), 404)


def test_a_name_the_runs_folder_holds_unindexed_is_taken(slow_server: Runner,
                                                         make_run: MakeRun, index: Any) -> None:
    folder_id = make_run("fresh", steps=2)
    taken = {"run_id": OTHER_ID, "file": "logs.jsonl", "manifest": manifest(OTHER_ID, "fresh"),
             "records": []}
    assert "taken" in assert_error(post(slow_server, taken), 409)["error"]
    index()
    assert get(slow_server, "/api/runs/fresh")["run"]["run_id"] == folder_id


def test_a_name_an_earlier_ingest_took_is_taken(server: Runner, engine: Engine) -> None:
    def first(run_id: str, name: str) -> dict[str, Any]:
        return {"run_id": run_id, "file": "metrics.jsonl", "manifest": manifest(run_id, name),
                "records": [{"seq": 0, "step": 0, "ts": 1.0, "loss": 1.0}]}

    a, b = "a" * 32, "b" * 32
    assert post(server, first(a, "sent-1")).status_code == 200
    assert post(server, first(a, "sent-1")).status_code == 200  # the same run again: fine
    err = assert_error(post(server, first(b, "sent-1")), 409)
    assert "'sent-1'" in err["error"] and "taken" in err["error"]
    # nor by renaming a run: the manifest of b that names it sent-1
    assert post(server, first(b, "sent-2")).status_code == 200
    assert_error(post(server, first(b, "sent-1")), 409)
    # a run with no name in its manifest is named by its id: that name is taken too
    unnamed = first("c" * 32, "x")
    del unnamed["manifest"]["name"]
    assert post(server, unnamed).status_code == 200
    assert_error(post(server, first(OTHER_ID, "c" * 32)), 409)
    # two in one request: the first is stored, the second refused
    both = {"batches": [first("e" * 32, "sent-3"), first("f" * 32, "sent-3")]}
    assert [r["ok"] for r in assert_error(post(server, both), 409)["results"]] == [True, False]
    assert get(server, "/api/runs/sent-1")["run"]["run_id"] == a
    assert get(server, "/api/runs/sent-2")["run"]["run_id"] == b
    assert get(server, "/api/runs/sent-3")["run"]["run_id"] == "e" * 32
    for name in ("sent-1", "sent-2", "sent-3"):
        assert names_in_index(engine, name) == 1


def test_a_run_stored_under_a_name_keeps_sending_when_its_manifest_changes(
        server: Runner, make_run: MakeRun, engine: Engine) -> None:
    """A name is checked when it is given, not at each change of the manifest: a run sent
    before names were checked, under the name a folder run holds too, goes on (a changed
    manifest, from set_manifest_fields or a resume, read as a new name refused it for
    good). A name that is another run's id is taken as a name is."""
    make_run("shared", steps=1)
    sent_id = "5e" * 16
    with engine.begin() as conn:  # as an index written before the check holds it
        conn.execute(insert(s.runs).values(
            run_id=sent_id, name="shared", created_at=1.0, status="RUNNING",
            manifest=json.dumps(manifest(sent_id, "shared"))))
    changed = {**manifest(sent_id, "shared"), "tags": ["resumed"]}
    batch = {"run_id": sent_id, "file": "metrics.jsonl", "manifest": changed,
             "records": [{"seq": 0, "step": 0, "ts": 1.0, "loss": 1.0}]}
    assert post(server, batch).status_code == 200
    by_id = {"run_id": OTHER_ID, "file": "logs.jsonl", "records": [],
             "manifest": manifest(OTHER_ID, sent_id)}
    assert "taken" in assert_error(post(server, by_id), 409)["error"]


def test_two_ingests_racing_for_one_name_store_one_run(server: Runner, engine: Engine) -> None:
    """Many senders at once, each its own run id under one name: one run is stored."""
    go = threading.Barrier(12)
    answers: list[int] = []

    def send(i: int) -> None:
        run_id = f"{i:032x}"
        go.wait()
        answers.append(post(server, {"run_id": run_id, "file": "logs.jsonl", "records": [],
                                     "manifest": manifest(run_id, "raced")}).status_code)

    threads = [threading.Thread(target=send, args=(i,)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(answers) == [200] + [409] * 11
    assert names_in_index(engine, "raced") == 1


def test_the_database_refuses_a_second_run_under_a_sent_name(engine: Engine) -> None:
    """The index itself holds the rule, so no check made before an insert can race it."""
    with engine.begin() as conn:
        upsert_run(conn, manifest("a" * 32, "one"), None)
    with pytest.raises(IntegrityError), engine.begin() as conn:
        upsert_run(conn, manifest("b" * 32, "one"), None)
    with engine.begin() as conn:
        upsert_run(conn, manifest("b" * 32, "two"), None)
    with pytest.raises(IntegrityError), engine.begin() as conn:
        upsert_run(conn, {**manifest("b" * 32, "one"), "tags": ["renamed"]}, None)
    assert names_in_index(engine, "one") == 1


def test_a_check_that_loses_the_race_is_still_a_conflict(
        server: Runner, engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    """When another ingest stores the name between this one's check and its insert, the
    database refuses the insert, and the answer is the same 409 (not a 500)."""
    with engine.begin() as conn:
        upsert_run(conn, manifest("a" * 32, "won"), None)
    monkeypatch.setattr(routes_ingest, "name_taken", lambda *_: False)
    batch = {"run_id": "b" * 32, "file": "logs.jsonl", "records": [],
             "manifest": manifest("b" * 32, "won")}
    err = assert_error(post(server, batch), 409)
    assert "'won'" in err["error"] and "taken" in err["error"]
    ok = {"run_id": "c" * 32, "file": "logs.jsonl", "records": [],
          "manifest": manifest("c" * 32, "free")}
    assert [r["ok"] for r in assert_error(post(server, {"batches": [ok, batch]}), 409)
            ["results"]] == [True, False]
    assert names_in_index(engine, "won") == 1 and names_in_index(engine, "free") == 1


def test_an_index_with_two_sent_runs_under_one_name_keeps_both_when_upgraded(
        engine: Engine, db_url: str) -> None:
    """Runs an earlier ingest stored under one name stay, the later ones renamed so that each
    can be named again; a folder's run keeps its name."""
    downgrade(engine, "0010")
    renamed = f"twin.{'a' * 32}"  # the name the upgrade would give the second: taken already
    with engine.begin() as conn:
        for run_id, name, run_dir in (("b" * 32, "twin", None), ("a" * 32, "twin", None),
                                      ("c" * 32, "twin", "/runs/twin"),
                                      ("e" * 32, renamed, None)):
            conn.execute(insert(s.runs).values(
                run_id=run_id, name=name, created_at=1.0, dir=run_dir, status="SUCCEEDED",
                manifest=json.dumps(manifest(run_id, name))))
    engine.dispose()
    upgraded = open_engine(db_url)
    try:
        with upgraded.connect() as conn:
            names = dict(conn.execute(select(s.runs.c.run_id, s.runs.c.name)).all())
        assert names == {"b" * 32: "twin", "a" * 32: f"{renamed}.2", "c" * 32: "twin",
                         "e" * 32: renamed}
        with pytest.raises(IntegrityError), upgraded.begin() as conn:
            upsert_run(conn, manifest(OTHER_ID, "twin"), None)
        # the renamed run's sender goes on with its manifest, which still names it twin: a
        # change of it (tags) keeps the row's name, and is no conflict
        with upgraded.begin() as conn:
            upsert_run(conn, {**manifest("a" * 32, "twin"), "tags": ["later"]}, None)
        with upgraded.connect() as conn:
            assert conn.execute(select(s.runs.c.name).where(
                s.runs.c.run_id == "a" * 32)).scalar_one() == f"{renamed}.2"
    finally:
        upgraded.dispose()


def test_a_job_that_streams_to_the_server_that_indexes_its_folder_sends_quietly(
        server: Runner, runs_dir: Path) -> None:
    """A worker pointed at the team server that also indexes the runs folder (docs/team.md)
    streams each job's records there too: the server refuses them (409, its folder is the
    run's record) with a code the sender reads, so it stops without a warning in the job's
    output, and the run is shown whole from its folder."""
    import subprocess
    import sys

    script = ("import runwatch\n"
              f"run = runwatch.init(name='streamed', dir={str(runs_dir)!r}, "
              f"server={server.url!r}, flush_interval=0.05)\n"
              "for step in range(5):\n"
              "    run.log({'loss': 1.0 / (step + 1)}, step=step)\n"
              "run.finish()\n")
    done = subprocess.run([sys.executable, "-W", "always", "-c", script], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "runwatch" not in done.stderr, done.stderr  # no "stopped sending" warning
    run = indexed(server, "streamed")
    # its metrics come from the folder, and a run the index shows ended holds them all
    assert len(losses(server, run["run_id"])) == 5
    # `runwatch sync` of that folder says the server holds it, and is no failure
    synced = cli_here("sync", str(runs_dir / "streamed"), "--server", server.url)
    assert "holds it already" in synced.stdout, synced.stdout
