"""Live streams against the real server: new points, logs and phase changes arrive, and a
reconnect with Last-Event-ID resumes without a gap."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy.exc import TimeoutError as PoolTimeout

from runwatch.sdk import init
from runwatch.server.runner import Runner, free_port
from runwatch.server.updates import LOG_PAGE, SEQ_WINDOW
from runwatch.store.db import POOL_OVERFLOW, POOL_SIZE, open_engine
from tests.killed import live_process
from tests.support import first_line, http, wait_for

from .apiclient import read_events

GUARD = httpx.Timeout(30.0)  # only stops a broken test from hanging


def _wait_for_run(client: httpx.Client, name: str, step: int | None = None) -> dict[str, Any]:
    """The run's detail once the indexer has picked the run up (and indexed `step`)."""

    def detail() -> dict[str, Any] | None:
        resp = client.get(f"/api/runs/{name}")
        body: dict[str, Any] = resp.json()
        if resp.status_code == 200 and (step is None or body["run"]["observed_step"] == step):
            return body
        return None

    got = wait_for(detail, what=f"the server to index run {name!r}"
                   + ("" if step is None else f" up to step {step}"))
    assert got is not None
    return got


def _within(lines: Iterator[str], seconds: float = 60.0) -> Iterator[str]:
    """The stream's lines, failing the test once `seconds` have passed (a stream sends a
    keep-alive line at least every 15 s, so this is checked at least that often)."""
    end = time.monotonic() + seconds
    for line in lines:
        if time.monotonic() > end:
            pytest.fail(f"the stream did not send what was awaited within {seconds:g} s")
        yield line


def _points(events: list[dict[str, Any]]) -> list[tuple[int, dict[str, Any]]]:
    return [(p["step"], p["values"]) for e in events if e["event"] == "points" for p in e["data"]]


def test_run_stream_pushes_points_logs_and_phase(server: Runner, runs_dir: Path) -> None:
    run = init(name="live", dir=runs_dir, method="sft", flush_interval=0.05)
    run.log({"loss": 1.0}, step=0)
    with http.client(base_url=server.url, timeout=GUARD) as client:
        cursor = _wait_for_run(client, "live", step=0)["cursor"]
        with client.stream("GET", "/api/runs/live/stream", params={"cursor": cursor}) as resp:
            assert resp.headers["content-type"].startswith("text/event-stream")
            run.log({"loss": 0.5, "val/loss": 0.7}, step=1)
            run.log_text("halfway", level="warning")
            run.finish("SUCCEEDED")
            events = read_events(resp.iter_lines(),
                                 lambda ev: any(e["event"] == "phase"
                                                and e["data"]["status"] == "SUCCEEDED" for e in ev)
                                 and any(e["event"] == "log" for e in ev)
                                 and any(s == 1 for s, _ in _points(ev)))
    assert (1, {"loss": 0.5, "val/loss": 0.7}) in _points(events)
    assert all(step != 0 for step, _ in _points(events))  # nothing before the cursor again
    log = next(e for e in events if e["event"] == "log")["data"]
    assert log["message"] == "halfway" and log["level"] == "WARNING"
    phase = [e for e in events if e["event"] == "phase"][-1]["data"]
    assert phase["status"] == "SUCCEEDED"


def test_reconnect_with_last_event_id_resumes(server: Runner, runs_dir: Path) -> None:
    run = init(name="resume", dir=runs_dir, flush_interval=0.05)
    with http.client(base_url=server.url, timeout=GUARD) as client:
        cursor = _wait_for_run(client, "resume")["cursor"]
        with client.stream("GET", "/api/runs/resume/stream", params={"cursor": cursor}) as resp:
            run.log({"loss": 1.0}, step=0)
            first = read_events(resp.iter_lines(), lambda ev: bool(_points(ev)))
        last_id = [e for e in first if e["event"] == "points"][-1]["id"]
        # points logged while no one listens
        for step in range(1, 6):
            run.log({"loss": 1.0 / (step + 1)}, step=step)
        run.finish("SUCCEEDED")
        with client.stream("GET", "/api/runs/resume/stream",
                           headers={"Last-Event-ID": last_id}) as resp:
            later = read_events(resp.iter_lines(),
                                lambda ev: any(s == 5 for s, _ in _points(ev)))
    steps = [s for s, _ in _points(later)]
    assert steps == [1, 2, 3, 4, 5]


def test_list_stream_announces_new_and_changed_runs(server: Runner, runs_dir: Path) -> None:
    with http.client(base_url=server.url, timeout=GUARD) as client, \
            client.stream("GET", "/api/stream/runs") as resp:
        run = init(name="newcomer", dir=runs_dir, flush_interval=0.05)
        run.finish("FAILED", reason="the training job was stopped")
        events = read_events(resp.iter_lines(), lambda ev: any(
            e["event"] == "run" and e["data"]["name"] == "newcomer"
            and e["data"]["status"] == "FAILED" for e in ev))
    assert events[0]["event"] == "ready"
    assert events[-1]["event"] == "run"
    assert events[-1]["data"]["reason"] == "the training job was stopped"


def test_many_open_streams_leave_the_api_answering(server: Runner, runs_dir: Path) -> None:
    """More open streams than the connection pool holds: the API still answers, and every
    stream gets the new point."""
    run = init(name="watched", dir=runs_dir, method="sft", flush_interval=0.05)
    run.log({"loss": 1.0}, step=0)
    with http.client(base_url=server.url, timeout=GUARD) as client, ExitStack() as streams:
        cursor = _wait_for_run(client, "watched", step=0)["cursor"]
        opened = []
        for _ in range(24):
            resp = streams.enter_context(
                client.stream("GET", "/api/runs/watched/stream", params={"cursor": cursor}))
            lines = resp.iter_lines()
            assert next(lines) == "retry: 1000"  # the stream is open on the server
            opened.append(lines)
        with http.client(base_url=server.url, timeout=httpx.Timeout(20.0)) as other:
            listed = other.get("/api/runs")
            assert listed.status_code == 200, listed.text
            assert other.get("/api/runs/watched").status_code == 200
        run.log({"loss": 0.5}, step=1)
        for lines in opened:  # and every stream still gets the new point
            events = read_events(_within(lines), lambda ev: any(s == 1 for s, _ in _points(ev)))
            assert [s for s, _ in _points(events)] == [1]
    run.finish("SUCCEEDED")


def test_exhausted_pool_answers_503_with_retry_after(tmp_path: Path, runs_dir: Path) -> None:
    """With every pooled connection taken, a request (a stream's too) is answered 503 with
    a Retry-After hint; once the connections are back it is answered as usual. The pool
    waits 0.2 s instead of POOL_TIMEOUT_S for a free connection, so each 503 comes fast."""
    init(name="busy", dir=runs_dir, flush_interval=0.05).finish("SUCCEEDED")
    engine = open_engine(tmp_path / "busy.db", pool_timeout_s=0.2)
    with Runner(engine, runs_dir=runs_dir, port=free_port(), interval=0.05, warm=False) as server, \
            http.client(base_url=server.url, timeout=GUARD) as client, ExitStack() as held:
        _wait_for_run(client, "busy")
        with pytest.raises(PoolTimeout):  # take every connection the pool will give
            for _ in range(POOL_SIZE + POOL_OVERFLOW + 1):
                held.enter_context(engine.connect())
        for path in ("/api/runs", "/api/runs/busy/stream"):
            resp = client.get(path)
            assert resp.status_code == 503, resp.text
            assert int(resp.headers["retry-after"]) > 0
            body = resp.json()
            assert body["ok"] is False and body["status"] == 503 and "retry" in body["error"]
        held.close()  # connections back: the server answers again
        assert client.get("/api/runs").status_code == 200
    engine.dispose()


def test_resume_from_the_start_pages_through_a_long_history(server: Runner,
                                                            runs_dir: Path) -> None:
    """More records and log lines than one read takes: the stream reads page after page."""
    steps, lines = 2 * SEQ_WINDOW + 10, LOG_PAGE + 20
    run = init(name="long", dir=runs_dir, flush_interval=0.05)
    for step in range(steps):
        run.log({"loss": 1.0 / (step + 1)}, step=step)
    for i in range(lines):
        run.log_text(f"line {i}")
    run.finish("SUCCEEDED")
    with http.client(base_url=server.url, timeout=GUARD) as client:
        wait_for(lambda: client.get("/api/runs/long").json().get("run", {}).get("status")
                 == "SUCCEEDED", what="the server to index the whole run")
        with client.stream("GET", "/api/runs/long/stream",
                           headers={"Last-Event-ID": "-1.-1.-1.-1"}) as resp:
            events = read_events(_within(resp.iter_lines()), lambda ev: any(
                e["event"] == "log" and e["data"]["message"] == f"line {lines - 1}" for e in ev)
                and any(s == steps - 1 for s, _ in _points(ev)))
    assert [s for s, _ in _points(events)] == list(range(steps))
    assert [e["data"]["message"] for e in events if e["event"] == "log"] == \
        [f"line {i}" for i in range(lines)]


def test_changed_findings_are_pushed_as_a_health_event(server: Runner, runs_dir: Path) -> None:
    run = init(name="diverging", dir=runs_dir, flush_interval=0.05)
    run.log({"loss": 1.0, "grad_norm": 1.0}, step=0)
    with http.client(base_url=server.url, timeout=GUARD) as client:
        cursor = _wait_for_run(client, "diverging", step=0)["cursor"]
        with client.stream("GET", "/api/runs/diverging/stream",
                           params={"cursor": cursor}) as resp:
            lines = _within(resp.iter_lines())
            # the run's first finding reaches a stream opened before it, and so does each
            # change after it
            run.log({"loss": float("nan"), "grad_norm": 1.0}, step=1)
            first = read_events(lines, lambda ev: any(
                e["event"] == "health" and e["data"]["findings"] for e in ev), deadline=30)
            run.log({"loss": 1.0, "grad_norm": 1.0}, step=2)
            read_events(lines, lambda ev: any(s == 2 for s, _ in _points(ev)))
            run.log({"loss": 1.0, "grad_norm": float("inf")}, step=3)
            events = read_events(lines, lambda ev: any(
                f["metric"] == "grad_norm" for e in ev if e["event"] == "health"
                for f in e["data"]["findings"]))
    opened = next(e["data"] for e in first if e["event"] == "health")
    assert [(f["rule_id"], f["metric"]) for f in opened["findings"]] == \
        [("metric.non_finite", "loss")]
    health = [e["data"] for e in events if e["event"] == "health"][-1]
    assert [(f["rule_id"], f["metric"]) for f in health["findings"]] == \
        [("metric.non_finite", "grad_norm")]
    run.finish("SUCCEEDED")


def test_a_phase_set_by_job_control_alone_is_pushed(server: Runner, runs_dir: Path) -> None:
    """Cancel of a running job changes the phase in the index before its process records
    anything (CANCEL_REQUESTED): an open run page must hear of it from its own stream."""
    from runwatch.jobs import control
    from runwatch.store import jobs as store_jobs
    from tests.support.jobs import submit_command

    run = submit_command(server.engine, runs_dir, "held", "import time; time.sleep(60)")
    with server.engine.begin() as conn:  # a worker holds it (no process: none is needed)
        assert store_jobs.claim(conn, "w-test", 1, time.time()) is not None
    with http.client(base_url=server.url, timeout=GUARD) as client:
        cursor = _wait_for_run(client, "held")["cursor"]
        with client.stream("GET", "/api/runs/held/stream", params={"cursor": cursor}) as resp:
            assert control.cancel(server.engine, run.run_pk).phase == "CANCEL_REQUESTED"
            events = read_events(_within(resp.iter_lines()),
                                 lambda ev: any(e["event"] == "phase" and
                                                e["data"]["status"] == "CANCEL_REQUESTED"
                                                for e in ev))
    assert [e["data"]["status"] for e in events if e["event"] == "phase"][-1] == \
        "CANCEL_REQUESTED"


def test_a_process_that_dies_is_pushed_on_the_run_stream(server: Runner,
                                                         runs_dir: Path) -> None:
    """A process that dies writes nothing, so no mark of the index moves: the run's own
    stream says so with a phase event once the server calls its process gone."""
    child = live_process(runs_dir, "dies")
    try:
        assert first_line(child, what="the training process to start") == "started"
        with http.client(base_url=server.url, timeout=GUARD) as client:
            _wait_for_run(client, "dies")

            def running() -> dict[str, Any] | None:
                got: dict[str, Any] = client.get("/api/runs/dies").json()
                return got if got["run"]["status"] == "RUNNING" else None

            body = wait_for(running, what="the server to index its RUNNING phase")
            assert body is not None and body["run"]["process_gone"] is False
            with client.stream("GET", "/api/runs/dies/stream",
                               params={"cursor": body["cursor"]}) as resp:
                lines = _within(resp.iter_lines())
                # the phase as the stream opens: the poller has its baseline by then
                opened = read_events(lines, lambda ev: ev[-1]["event"] == "phase")
                assert opened[-1]["data"]["process_gone"] is False
                child.kill()
                child.wait(timeout=60)
                events = read_events(lines, lambda ev: ev[-1]["event"] == "phase")
    finally:
        child.kill()
        child.wait(timeout=60)
    assert (events[-1]["data"]["status"], events[-1]["data"]["process_gone"]) == \
        ("RUNNING", True)
