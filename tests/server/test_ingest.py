"""The ingest route: idempotent on (run, file, seq), size limits, bad batches refused alone."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any

from sqlalchemy import Engine

from runwatch.server.app import create_app
from runwatch.server.state import Limits

from .apiclient import Api, assert_error, manifest

JSON = {"Content-Type": "application/json"}


def _metrics(run_id: str, seqs: range, with_manifest: bool = True) -> dict[str, Any]:
    # logged now: a run is RUNNING from its first metrics, and one silent since long ago
    # has stalled (health rule run.stalled)
    now = time.time()
    batch: dict[str, Any] = {"run_id": run_id, "file": "metrics.jsonl",
                             "records": [{"seq": i, "step": i, "ts": now + i, "loss": i / 10}
                                         for i in seqs]}
    if with_manifest:
        batch["manifest"] = manifest(run_id, run_id)
    return batch


def test_sending_a_batch_twice_stores_it_once(api: Api) -> None:
    for _ in range(2):
        assert api.post("/api/ingest", json=_metrics("r1", range(10))).status_code == 200
    assert api.post("/api/ingest", json=_metrics("r1", range(5, 15), False)).status_code == 200
    s = api.ok("/api/series", params={"run": "r1", "key": "loss"})["series"][0]
    assert s["count"] == 15 and s["step"] == list(range(15))


def test_a_bad_batch_is_refused_and_its_neighbours_kept(api: Api) -> None:
    bad = _metrics("r2", range(3))
    bad["records"][1]["step"] = "seven"
    resp = api.post("/api/ingest", json={"batches": [_metrics("r1", range(3)), bad,
                                                     _metrics("r3", range(4))]})
    body = assert_error(resp, 400)
    assert [r["ok"] for r in body["results"]] == [True, False, True]
    assert "batch 1" in body["error"] and "step" in body["error"]
    assert api.ok("/api/series", params={"run": "r3", "key": "loss"})["series"][0]["count"] == 4
    # the bad batch stored nothing, not even its good records
    assert_error(api.get("/api/runs/r2/metrics/keys"), 404)


def test_malformed_input_is_a_clear_4xx(api: Api) -> None:
    cases: list[Any] = [
        b"{not json",
        b"[]",
        {"batches": []},
        {"run_id": "r", "file": "../etc/passwd", "records": []},
        {"run_id": "r", "file": "metrics.jsonl", "records": "nope"},
        {"run_id": "r", "file": "metrics.jsonl", "records": [{"step": 1}]},
        {"run_id": "r", "file": "metrics.jsonl", "records": [7]},
        {"run_id": "", "file": "metrics.jsonl", "records": []},
        {"run_id": "r", "file": "events.jsonl", "records": [{"seq": 0, "phase": "BOGUS"}]},
        {**_metrics("r", range(1)), "manifest": {"run_id": "other"}},
        {**_metrics("r", range(1)), "manifest": manifest("r", "../escape")},
    ]
    for case in cases:
        kw = {"content": case, "headers": JSON} if isinstance(case, bytes) else {"json": case}
        assert_error(api.post("/api/ingest", **kw))
    # a batch for a run never announced needs its manifest first
    assert_error(api.post("/api/ingest", json=_metrics("ghost", range(1), False)), 404)


def test_size_limits(engine: Engine) -> None:
    api = Api(create_app(engine, limits=Limits(max_body_bytes=20_000, max_records=50,
                                               max_batches=3)))
    assert_error(api.post("/api/ingest", json=_metrics("r", range(51))), 413)
    assert_error(api.post("/api/ingest", json={"batches": [_metrics("r", range(1))] * 4}), 413)
    assert_error(api.post("/api/ingest", content=b" " * 20_001, headers=JSON), 413)
    assert api.post("/api/ingest", json=_metrics("r", range(50))).status_code == 200


def test_events_sent_over_http_set_the_status(api: Api) -> None:
    api.post("/api/ingest", json={"run_id": "e", "file": "events.jsonl",
                                  "manifest": manifest("e", "e"),
                                  "records": [{"seq": 0, "ts": 1.0, "phase": "RUNNING"},
                                              {"seq": 1, "ts": 2.0, "phase": "FAILED",
                                               "reason": "the training job was stopped"}]})
    run = api.ok("/api/runs/e")["run"]
    assert run["status"] == "FAILED" and run["reason"] == "the training job was stopped"


def test_streamed_metrics_are_checked_by_the_health_engine(api: Api) -> None:
    batch = _metrics("hx", range(5))
    batch["records"][4]["loss"] = float("nan")
    assert api.post("/api/ingest", content=json.dumps(batch).encode(),
                    headers=JSON).status_code == 200
    findings = api.ok("/api/runs/hx/health")["findings"]
    assert [(f["rule_id"], f["first_step"]) for f in findings] == [("metric.non_finite", 4)]


def test_a_batch_that_arrives_after_a_later_one_is_checked_by_the_health_engine(
        api: Api) -> None:
    """Health evaluates incrementally after the highest seq it has seen; a new batch
    below that (sent late over HTTP) must still be evaluated, and one sent twice not."""
    late = _metrics("hl", range(5))
    early = _metrics("hl", range(5, 10))
    for record in late["records"] + early["records"]:  # a loss that falls: only the NaN
        record["loss"] = 1.0 / (1 + record["step"])     # is news (a run of no method is
    late["records"][2]["loss"] = float("nan")            # judged as its metrics tell)
    for batch in (early, late, late):
        assert api.post("/api/ingest", content=json.dumps(batch).encode(),
                        headers=JSON).status_code == 200
    health = api.ok("/api/runs/hl/health")
    # the NaN at step 2 was followed by finite values: one finding, opened and resolved
    assert health["findings"] == [] and health["resolved"] == 1


def test_a_streamed_run_is_judged_on_its_whole_log_when_its_end_arrives(api: Api) -> None:
    # eight epochs logged once each (the fewest on which it warns), the loss within 1.3%
    # of its start: judged at the end
    batch = {**_metrics("hf", range(8)), "manifest": manifest("hf", "hf", method="sft")}
    for rec, v in zip(batch["records"], [2.31, 2.30, 2.32, 2.29, 2.30, 2.28, 2.31, 2.29],
                      strict=True):
        rec["loss"] = v
    assert api.post("/api/ingest", json=batch).status_code == 200
    assert api.ok("/api/runs/hf/health")["findings"] == []
    end = {"run_id": "hf", "file": "events.jsonl",
           "records": [{"seq": 0, "ts": time.time() + 8, "phase": "SUCCEEDED"}]}
    assert api.post("/api/ingest", json=end).status_code == 200
    findings = api.ok("/api/runs/hf/health")["findings"]
    assert [(f["rule_id"], f["severity"]) for f in findings] == [
        ("loss.flat_finished_run", "warning")]


def test_an_oversized_body_is_refused_before_it_is_read_whole(engine: Engine) -> None:
    """A chunked body (no Content-Length) is counted while it streams in: the 413 comes
    once the limit is passed, not after the whole 50 MB has been read into memory."""
    limit, chunk = 64 * 1024, b" " * (64 * 1024)
    api = Api(create_app(engine, limits=Limits(max_body_bytes=limit)))
    sent = 0

    async def body() -> AsyncIterator[bytes]:
        nonlocal sent
        for _ in range(50 * 16):  # 50 MB
            sent += len(chunk)
            yield chunk

    assert_error(api.post("/api/ingest", content=body(), headers=JSON), 413)
    assert sent <= limit + 2 * len(chunk)
    # a Content-Length over the limit is refused before any of the body is read
    sent = 0
    resp = api.post("/api/ingest", content=body(), headers={**JSON, "Content-Length": "52428800"})
    assert_error(resp, 413)
    assert sent <= len(chunk)


def test_a_manifest_with_fields_of_the_wrong_kind_is_refused(api: Api) -> None:
    for field, value in (("created_at", "yesterday"), ("tags", "not-a-list")):
        batch = {**_metrics("bad-m", range(2)), "manifest": manifest("bad-m", "bad-m",
                                                                    **{field: value})}
        body = assert_error(api.post("/api/ingest", json=batch), 400)
        assert field in body["error"]
    assert_error(api.get("/api/runs/bad-m"), 404)
