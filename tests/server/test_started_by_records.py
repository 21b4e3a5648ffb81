"""A run whose records show it has started is not QUEUED (runwatch/ingest/lifecycle.py):
one sent over HTTP with metrics and no events (a hand-written client, the sync of a folder
whose events.jsonl was lost) is RUNNING from its first record, as a runs folder that holds
the same files is; and `runs wait --server` on it says what it waits for, since nothing
will see its process stop, and keeps to its --timeout."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, select

from runwatch.ingest import Indexer
from runwatch.rundir import format as fmt
from runwatch.server.runner import Runner
from runwatch.store import schema as s
from tests.support import cli_here, http, write_run

from .apiclient import manifest

T0 = 1_700_000_000.0  # the first record's time


def _metrics(steps: range) -> list[dict[str, Any]]:
    return [{"seq": i, "step": i, "ts": T0 + i, "loss": 1.0 / (i + 1)} for i in steps]


def _send(server: Runner, name: str, file: str, records: list[dict[str, Any]]) -> None:
    """One batch of run `name`, with its manifest, as a client posts it."""
    body = {"run_id": f"id-{name}", "file": file, "records": records,
            "manifest": manifest(f"id-{name}", name)}
    answer = http.post(f"{server.url}/api/ingest", json=body)
    assert answer.status_code == 200, answer.text


def _state(server: Runner, name: str) -> dict[str, Any]:
    answer = http.request("GET", f"{server.url}/api/runs/{name}")
    assert answer.status_code == 200, answer.text
    state: dict[str, Any] = answer.json()["state"]
    return state


def test_a_run_sent_with_metrics_and_no_events_is_running_and_wait_says_why_it_waits(
        server: Runner) -> None:
    _send(server, "no-events", fmt.METRICS, _metrics(range(5)))
    state = _state(server, "no-events")
    assert (state["phase"], state["started_at"], state["observed_step"]) == (
        "RUNNING", T0, 4)

    wait = ["runs", "wait", "no-events", "--server", server.url, "--interval", "0.1"]
    still = cli_here(*wait, "--timeout", "0.3", check=False)
    assert still.returncode == 124, still.stdout
    assert "RUNNING" in still.stdout and "still RUNNING after 0.3s" in still.stdout
    said = " ".join(still.stdout.split())  # the table wraps the note at the console's width
    assert ("waiting for no-events to record its end (SUCCEEDED, FAILED or CANCELLED): its "
            "manifest names no process to watch (no pid and host)") in said, said
    assert "until --timeout (0.3s)" in said, said

    # its end, sent without an event of its start: the start its records gave stays
    _send(server, "no-events", fmt.EVENTS, [{"seq": 0, "ts": T0 + 9, "phase": "SUCCEEDED"}])
    state = _state(server, "no-events")
    assert (state["phase"], state["started_at"], state["ended_at"]) == ("SUCCEEDED", T0, T0 + 9)
    ended = cli_here(*wait, "--exit-status", "-o", "json", "--timeout", "60", check=False)
    assert ended.returncode == 0, ended.stdout
    assert json.loads(ended.stdout.splitlines()[0])["phase"] == "SUCCEEDED"


def test_metrics_of_several_runs_sent_in_one_request_start_each(server: Runner) -> None:
    """On PostgreSQL the runs of one request's metrics advance in one statement."""
    batches = [{"run_id": f"id-{name}", "file": fmt.METRICS, "records": _metrics(range(3)),
                "manifest": manifest(f"id-{name}", name)} for name in ("a", "b")]
    answer = http.post(f"{server.url}/api/ingest", json={"batches": batches})
    assert answer.status_code == 200, answer.text
    for name in ("a", "b"):
        assert (_state(server, name)["phase"], _state(server, name)["started_at"]) == (
            "RUNNING", T0)


def test_checkpoints_and_samples_start_a_run_and_logs_one_no_event_speaks_for(
        server: Runner) -> None:
    ckpt = {"seq": 0, "ts": T0 + 3, "step": 3, "kind": "training", "id": "c3"}
    _send(server, "ckpt", fmt.CHECKPOINTS, [ckpt])
    assert (_state(server, "ckpt")["phase"], _state(server, "ckpt")["started_at"]) == (
        "RUNNING", T0 + 3)

    samples = {"run_id": "id-rollouts", "file": "step_0002_train.json",
               "content": {"step": 2, "split": "train", "ts": T0 + 2,
                           "samples": [{"prompt": "p", "completion": "c", "reward": 1.0}]},
               "manifest": manifest("id-rollouts", "rollouts")}
    assert http.post(f"{server.url}/api/ingest", json=samples).status_code == 200
    assert (_state(server, "rollouts")["phase"], _state(server, "rollouts")["started_at"]) == (
        "RUNNING", T0 + 2)

    log = {"seq": 0, "ts": T0 + 1, "level": "info", "message": "loading the model"}
    _send(server, "logged", fmt.LOGS, [log])
    assert _state(server, "logged")["phase"] == "RUNNING"

    # a process that says it is QUEUED may log while it waits: its logs start nothing ...
    _send(server, "waits", fmt.EVENTS, [{"seq": 0, "ts": T0, "phase": "QUEUED"}])
    _send(server, "waits", fmt.LOGS, [{**log, "message": "waiting for a device"}])
    assert _state(server, "waits")["phase"] == "QUEUED"
    # ... and its first checkpoint does
    _send(server, "waits", fmt.CHECKPOINTS, [ckpt])
    assert (_state(server, "waits")["phase"], _state(server, "waits")["started_at"]) == (
        "RUNNING", T0 + 3)


@pytest.mark.parametrize("events_last", [False, True])
def test_a_queued_event_says_less_than_records_of_its_attempt_but_a_new_attempt_has_none(
        server: Runner, events_last: bool) -> None:
    """The records of an attempt outrank a QUEUED event of that attempt, whichever came
    first; a QUEUED event of a new attempt (a retry) forgets the old attempt's records, so
    the run is QUEUED again."""
    queued = [{"seq": 0, "ts": T0 - 5, "phase": "QUEUED", "attempt": 1}]
    for file, records in sorted([(fmt.EVENTS, queued), (fmt.METRICS, _metrics(range(2)))],
                                reverse=events_last):
        _send(server, "held", file, records)
    state = _state(server, "held")
    assert (state["phase"], state["started_at"]) == ("RUNNING", T0)

    retry = [{"seq": 1, "ts": T0 + 5, "phase": "FAILED", "reason": "the training job was "
              "stopped"}, {"seq": 2, "ts": T0 + 6, "phase": "QUEUED", "attempt": 2}]
    _send(server, "held", fmt.EVENTS, retry)
    state = _state(server, "held")
    assert (state["phase"], state["started_at"], state["observed_step"]) == (
        "QUEUED", None, None)


@pytest.mark.parametrize("first", [fmt.METRICS, fmt.CHECKPOINTS, fmt.LOGS])
def test_records_of_a_run_that_stays_preparing_start_its_duration(server: Runner,
                                                                    first: str) -> None:
    """A plain command a worker runs reports no phase: its run is PREPARING (the worker's
    event) until its end. Its records start it, so its duration counts from the first, not
    from its end (0 s); its phase stays the one its events say. A PREPARING event that
    comes after its records keeps that start."""
    name = f"plain-{first.split('.')[0]}"
    _send(server, name, fmt.EVENTS, [{"seq": 0, "ts": T0 - 5, "phase": "QUEUED"},
                                     {"seq": 1, "ts": T0 - 1, "phase": "PREPARING"}])
    record = {"seq": 0, "ts": T0 + 2, **({"step": 0, "loss": 1.0} if first == fmt.METRICS
                                         else {"step": 0, "kind": "training", "id": "c0"}
                                         if first == fmt.CHECKPOINTS
                                         else {"level": "info", "message": "training"})}
    _send(server, name, first, [record])
    state = _state(server, name)
    # logs outlive attempts: they start only a run no event speaks for
    started = None if first == fmt.LOGS else T0 + 2
    assert (state["phase"], state["started_at"]) == ("PREPARING", started)
    _send(server, name, fmt.EVENTS, [{"seq": 2, "ts": T0 + 3, "phase": "PREPARING"}])
    assert _state(server, name)["started_at"] == started
    _send(server, name, fmt.EVENTS, [{"seq": 3, "ts": T0 + 30, "phase": "SUCCEEDED"}])
    state = _state(server, name)
    assert (state["phase"], state["started_at"], state["ended_at"]) == (
        "SUCCEEDED", started, T0 + 30)


def test_a_folder_run_with_metrics_and_no_events_is_running_as_a_sent_one(
        engine: Engine, runs_dir: Path) -> None:
    run = write_run(runs_dir, "folder", _metrics(range(3)))
    indexer = Indexer(engine, runs_dir)

    def row() -> tuple[Any, ...]:
        indexer.index_once()
        r = s.runs.c
        with engine.connect() as conn:
            return tuple(conn.execute(select(r.status, r.started_at, r.ended_at, r.observed_step)
                                      .where(r.name == "folder")).one())

    assert row() == ("RUNNING", T0, None, 2)
    # the CLI's own index of the folder reads it so, and its wait says what it waits for
    still = cli_here("runs", "wait", "folder", "--dir", str(runs_dir), "--timeout", "0.3",
                     "--interval", "0.1", check=False)
    said = " ".join(still.stdout.split())
    assert still.returncode == 124 and "still RUNNING after 0.3s" in said, said
    assert "folder to record its end" in said and "names no process to watch" in said, said
    (run / fmt.EVENTS).write_text(json.dumps({"seq": 0, "ts": T0 + 9, "phase": "SUCCEEDED"})
                                  + "\n", encoding="utf-8")
    assert row() == ("SUCCEEDED", T0, T0 + 9, 2)


def test_an_end_sent_before_the_records_of_its_request_is_stored_after_them(
        server: Runner) -> None:
    """A hand-written client that puts a run's end first in a request, beside its metrics:
    the end was stored first, so the run ended before anything started it (no start, no
    duration) and its finished-run judgement saw no loss. The server stores the end after
    the request's other batches, and answers each batch where it was sent."""
    name = "end-first"
    flat = [{"seq": i, "step": i, "ts": T0 + i, "loss": 2.0 + 0.001 * (i % 2)}
            for i in range(14)]
    batches = [
        {"run_id": f"id-{name}", "file": fmt.EVENTS,
         "manifest": manifest(f"id-{name}", name, method="sft"),
         "records": [{"seq": 0, "ts": T0 + 20, "phase": "SUCCEEDED"}]},
        {"run_id": f"id-{name}", "file": fmt.METRICS, "records": flat},
    ]
    answer = http.post(f"{server.url}/api/ingest", json={"batches": batches})
    assert answer.status_code == 200, answer.text
    assert [(r["file"], r["records"]) for r in answer.json()["results"]] == [
        (fmt.EVENTS, 1), (fmt.METRICS, 14)]
    state = _state(server, name)
    assert (state["phase"], state["started_at"], state["ended_at"]) == (
        "SUCCEEDED", T0, T0 + 20)
    found = http.request("GET", f"{server.url}/api/runs/{name}/health").json()
    rules = {f["rule_id"] for f in (found["findings"] if isinstance(found, dict) else found)}
    assert "loss.flat_finished_run" in rules, rules


def test_a_batch_that_starts_the_next_attempt_stays_before_that_attempts_records(
        server: Runner) -> None:
    """A client mirroring a retried job sends its events (attempt 1's end, attempt 2's
    start and end) beside attempt 2's metrics. Stored after the metrics, the events'
    attempt 2 forgot them as attempt 1's: the run showed no step at all."""
    name = "retried"
    events = [{"seq": 0, "ts": T0, "phase": "QUEUED"},
              {"seq": 1, "ts": T0 + 1, "phase": "RUNNING"},
              {"seq": 2, "ts": T0 + 5, "phase": "FAILED"},
              {"seq": 3, "ts": T0 + 6, "phase": "QUEUED", "attempt": 2},
              {"seq": 4, "ts": T0 + 7, "phase": "RUNNING", "attempt": 2},
              {"seq": 5, "ts": T0 + 20, "phase": "SUCCEEDED"}]
    batches = [{"run_id": f"id-{name}", "file": fmt.EVENTS, "records": events,
                "manifest": manifest(f"id-{name}", name)},
               {"run_id": f"id-{name}", "file": fmt.METRICS,
                "records": _metrics(range(8, 13))}]
    answer = http.post(f"{server.url}/api/ingest", json={"batches": batches})
    assert answer.status_code == 200, answer.text
    state = _state(server, name)
    assert (state["phase"], state["observed_step"]) == ("SUCCEEDED", 12)
    detail = http.request("GET", f"{server.url}/api/runs/{name}").json()
    assert [a["attempt"] for a in detail["attempts"]] == [1, 2]
