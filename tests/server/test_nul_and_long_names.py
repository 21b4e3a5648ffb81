"""A NUL character and an overlong run identifier are input like any other: never a 500.

A security trial (session 35) found that on PostgreSQL, whose text cannot hold NUL, one
`\\x00` in a log line, a metric key or a token's name failed its whole ingest request with
a 500 (the good batches beside it lost, the SDK's sender and `runwatch sync` stuck
resending it), and one in a URL failed every read; and that on SQLite a run identifier of
60,000 characters was a 500 (a LIKE pattern too complex) and `a-run%00garbage` resolved to
the run `a-run` (SQLite cut the pattern at the NUL).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from sqlalchemy import Engine, select

from runwatch.rundir.jsonl import NUL_STANDIN
from runwatch.sdk import init
from runwatch.server.app import create_app
from runwatch.store import schema as s
from runwatch.store import tokens

from .apiclient import Api, MakeRun, assert_error, manifest


def test_a_nul_in_the_url_is_a_400(api: Api, make_run: MakeRun,
                                   index: Callable[[], None]) -> None:
    make_run("a-run", steps=3)
    index()
    for path, params in [("/api/runs/a-run%00garbage", {}), ("/api/runs/a%00", {}),
                         ("/api/runs", {"q": "a\x00b"}), ("/api/runs", {"group": "g\x00"}),
                         ("/api/runs/a-run/logs", {"level": "info\x00"})]:
        body = assert_error(api.get(path, params=params), 400)
        assert "NUL" in body["error"]
    # the run itself still reads
    assert api.ok("/api/runs/a-run")["name"] == "a-run"


def test_an_overlong_run_identifier_is_a_short_404(api: Api, make_run: MakeRun,
                                                   index: Callable[[], None]) -> None:
    make_run("a-run", steps=3)
    index()
    long = "A" * 60_000
    for resp in (api.get(f"/api/runs/{long}"),
                 api.get("/api/series", params={"key": "loss", "run": long})):
        assert resp.status_code in (400, 404), resp.text[:300]
        body = assert_error(resp)
        assert len(resp.content) < 2_000  # the identifier is not echoed whole
        assert "60000 characters" in body["error"]


def test_text_with_nul_is_stored_over_http_with_its_neighbours(api: Api,
                                                                engine: Engine) -> None:
    run_id = "c" * 32
    now = time.time()
    logs = {"run_id": run_id, "file": "logs.jsonl", "manifest": manifest(run_id, "nul-run"),
            "records": [{"seq": 0, "ts": now, "level": "info", "message": "decoded: ab\x00cd"}]}
    metrics = {"run_id": run_id, "file": "metrics.jsonl",
               "records": [{"seq": 0, "step": 0, "ts": now, "loss": 1.5, "odd\x00key": 2.0}]}
    resp = api.post("/api/ingest", json={"batches": [logs, metrics]})
    assert resp.status_code == 200, resp.text
    (line,) = api.ok(f"/api/runs/{run_id}/logs")["logs"]
    # read as NUL_STANDIN on every backend (PostgreSQL's text cannot hold a NUL)
    assert line["message"] == f"decoded: ab{NUL_STANDIN}cd"
    keys = {k["key"] for k in api.ok(f"/api/runs/{run_id}/metrics/keys")["keys"]}
    assert keys == {"loss", f"odd{NUL_STANDIN}key"}


def test_a_folder_run_logging_nul_is_indexed(engine: Engine, runs_dir: Path,
                                             index: Callable[[], None], api: Api) -> None:
    # one log_text of raw tokenizer output: on PostgreSQL the indexer's batch failed
    run = init(name="raw-sample", dir=runs_dir, method="sft")
    run.log({"loss": 1.0}, step=0)
    run.log_text("sample: <s>\x00</s>")
    run.log({"loss": 0.5}, step=1)
    run.finish()
    index()
    with engine.connect() as conn:
        problems = conn.execute(select(s.ingest_problems.c.message)).scalars().all()
    assert problems == []
    detail = api.ok("/api/runs/raw-sample")
    assert detail["state"]["phase"] == "SUCCEEDED"
    assert any(entry["message"] == f"sample: <s>{NUL_STANDIN}</s>"
               for entry in api.ok("/api/runs/raw-sample/logs")["logs"])
    # the run's own file keeps what was written
    assert b"<s>\\u0000</s>" in (runs_dir / "raw-sample" / "logs.jsonl").read_bytes()


def test_a_token_named_with_nul_is_made(engine: Engine) -> None:
    # the token admin route stores the name as given; on PostgreSQL that was a 500
    token = "server-token-0123456789abcdef"
    with engine.begin() as conn:
        tokens.create_project(conn, "alpha", "test")
    api = Api(create_app(engine, token=token), headers={"Authorization": f"Bearer {token}"})
    resp = api.post("/api/tokens", json={"project": "alpha", "right": "read",
                                         "name": "nul\x00name"})
    assert resp.status_code in (200, 201), resp.text
    (made,) = [t for t in api.ok("/api/tokens")["tokens"] if t["name"].startswith("nul")]
    assert made["name"] in ("nul\x00name", f"nul{NUL_STANDIN}name")
