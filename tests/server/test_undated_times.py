"""Times no date can show (a run folder written by hand, or an HTTP client, may hold any
number as `ts`: 1e15, -1e12, 1e300) read as unknown in the API and the CLI: never a 500,
never a traceback that takes the whole run list down with it."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from runwatch.analysis.timing import iso, phase_millis, run_duration_s
from runwatch.rundir import format as fmt
from tests.support import cli_here, run_cli, write_manifest

from .apiclient import Api, manifest

UNDATED = {"far": 1e15, "past": -1e12, "huge": 1e300}


def write_undated_run(runs: Path, name: str, ts: float) -> None:
    """A finished run whose every time is `ts` (its end `-ts`): what the readers show."""
    run = write_manifest(runs / name, created_at=ts)
    start, end = sorted((ts, -ts))
    lines: dict[str, list[dict[str, Any]]] = {
        fmt.EVENTS: [{"ts": start, "seq": 0, "phase": "RUNNING"},
                     {"ts": end, "seq": 1, "phase": "SUCCEEDED"}],
        fmt.METRICS: [{"step": i, "ts": ts + i, "seq": i, "loss": 1 / (i + 1)} for i in range(4)],
        fmt.LOGS: [{"ts": ts, "seq": 0, "level": "info", "message": "hello"}],
        fmt.CHECKPOINTS: [{"ts": ts, "seq": 0, "step": 3, "kind": "training", "id": "c3"}],
    }
    for file, records in lines.items():
        (run / file).write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")


def test_the_api_sends_undated_times_as_null(api: Api, runs_dir: Path,
                                             index: Callable[[], None]) -> None:
    for name, ts in UNDATED.items():
        write_undated_run(runs_dir, name, ts)
    # an HTTP client sends the same
    records = [{"seq": i, "step": i, "ts": 1e18 + i, "loss": 1.0} for i in range(3)]
    sent = api.post("/api/ingest", json={"run_id": "sent", "file": fmt.METRICS,
                                         "manifest": manifest("sent", "sent", created_at=1e18),
                                         "records": records})
    assert sent.status_code == 200, sent.text
    index()
    listed = api.ok("/api/runs")["runs"]
    assert sorted(r["name"] for r in listed) == ["far", "huge", "past", "sent"]
    for name in UNDATED:
        detail = api.ok(f"/api/runs/{name}")
        run = detail["run"]
        assert (run["created_at"], run["started_at"], run["ended_at"]) == (None, None, None)
        assert run["duration_s"] is None and detail["timing"]["phaseMillis"] == {}
        assert [e["ts"] for e in api.ok(f"/api/runs/{name}/events")["events"]] == [None, None]
        assert api.ok(f"/api/runs/{name}/logs")["logs"][0]["ts"] is None
        assert api.ok(f"/api/runs/{name}/checkpoints")["checkpoints"][0]["ts"] is None
        series = api.ok("/api/series", params={"run": name, "key": "loss"})["series"][0]
        assert series["step"] == [0, 1, 2, 3]
    assert api.ok("/api/runs/sent")["run"]["created_at"] is None


def test_the_cli_reads_undated_times_as_unknown(runs_dir: Path) -> None:
    for name, ts in UNDATED.items():
        write_undated_run(runs_dir, name, ts)
    listed = run_cli("runs", "list", "--dir", str(runs_dir))
    assert all(name in listed.stdout for name in UNDATED), listed.stdout
    got = json.loads(cli_here("runs", "get", "huge", "--dir", str(runs_dir), "-o", "json").stdout)
    assert got["run"]["created_at"] is None and got["run"]["duration_s"] is None
    assert "hello" in cli_here("runs", "logs", "far", "--dir", str(runs_dir)).stdout
    assert "Training time: -" in cli_here("runs", "get", "past", "--dir", str(runs_dir)).stdout
    waited = cli_here("runs", "wait", "far", "--dir", str(runs_dir)).stdout
    assert "?  SUCCEEDED" in waited  # the end event's time, unknown


@pytest.mark.parametrize("ts", [*UNDATED.values(), -1e300, float("nan")])
def test_timing_of_an_undated_time_is_unknown(ts: float) -> None:
    assert iso(ts) is None
    assert run_duration_s(ts, 1e9, None, False) is None
    assert run_duration_s(1e9, ts, None, False) is None
    assert phase_millis([{"ts": ts, "phase": "RUNNING"}, {"ts": 1e9, "phase": "SUCCEEDED"}]) == {}
    dated = time.time()
    assert iso(dated) is not None and run_duration_s(dated - 5, dated, None, False) == 5
