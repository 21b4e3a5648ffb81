"""What a server's live parts hold of its index when the index file is made again (deleted
while `runwatch ui` runs, every run indexed anew under new pks): an open run stream ends,
and a stream opened again finds its run by id and resumes at its cursor with that run's
points alone; the OTLP export sends the spans of runs that end afterwards and counts points
for the run they belong to."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader, NumberDataPoint
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from runwatch.cli.context import default_db
from runwatch.interop.otel import RUN_ID, OtelExport
from runwatch.sdk import init
from runwatch.server.runner import Runner
from runwatch.store.db import open_engine
from tests.support import http
from tests.support.rundirs import sdk_run
from tests.support.wait import wait_for

GUARD = httpx.Timeout(30.0)  # only stops a broken test from hanging


def _events(lines: Iterator[str], deadline: float = 30.0) -> Iterator[dict[str, Any]]:
    """The server-sent events of a stream, until it ends; the test fails once `deadline`
    seconds have passed (a stream sends a keep-alive line at least every 15 s)."""
    end = time.monotonic() + deadline
    current: dict[str, str] = {}
    for line in lines:
        if time.monotonic() > end:
            pytest.fail(f"the stream did not end or send what was awaited in {deadline:g} s")
        if line == "":
            if "data" in current:
                yield current
            current = {}
        elif not line.startswith(":") and ":" in line:
            field, _, value = line.partition(":")
            current[field] = value[1:] if value.startswith(" ") else value


def _detail(client: httpx.Client, name: str) -> dict[str, Any] | None:
    resp = client.get(f"/api/runs/{name}")
    body: dict[str, Any] = resp.json()
    return body if resp.status_code == 200 else None


def test_a_run_stream_ends_and_one_opened_again_resumes_with_its_own_run(
        runs_dir: Path) -> None:
    # the other run comes first: the watched run's pk is 2, and 1 in the index made again
    # only if the other run's folder is read after it; either way its stream reads by id
    sdk_run(runs_dir, "other", steps=4, metrics=lambda i: {"reward": 100.0 + i})
    live = init(name="watched", dir=runs_dir, flush_interval=0.02)
    for step in range(3):
        live.log({"loss": 1.0 / (step + 1)}, step=step)
    engine = open_engine(default_db(runs_dir))
    with (Runner(engine, runs_dir=runs_dir, port=0, interval=0.05, warm=False) as srv,
          http.client(base_url=srv.url, timeout=GUARD) as client):
        got = wait_for(lambda: (d := _detail(client, "watched")) is not None
                       and d["run"]["observed_step"] == 2 and d,
                       what="the watched run indexed up to step 2")
        assert got
        cursor = got["cursor"]
        first: list[dict[str, Any]] = []
        with client.stream("GET", "/api/runs/watched/stream",
                           params={"cursor": cursor}) as resp:
            events = _events(resp.iter_lines())
            first.append(next(events))  # the run's phase: the stream watches
            default_db(runs_dir).unlink()  # as `rm index.db` while the page is open
            first.extend(events)  # until the server ends the stream
        assert first[0]["event"] == "phase"
        assert json.loads(first[0]["data"])["name"] == "watched"
        last_id = next((e["id"] for e in reversed(first) if e.get("id")), cursor)

        live.log({"loss": 0.125}, step=3)
        wait_for(lambda: (d := _detail(client, "watched")) is not None
                 and d["run"]["observed_step"] == 3,
                 what="the watched run in the index made again, up to step 3")
        again: list[dict[str, Any]] = []
        with client.stream("GET", "/api/runs/watched/stream",
                           headers={"Last-Event-ID": last_id}) as resp:
            for ev in _events(resp.iter_lines()):
                again.append(ev)
                if ev["event"] == "points":
                    break
        live.finish("SUCCEEDED")
    engine.dispose()
    assert again[0]["event"] == "phase"
    assert json.loads(again[0]["data"])["name"] == "watched"
    points = [p for e in again if e["event"] == "points" for p in json.loads(e["data"])]
    # after the cursor, the watched run's new point alone: none of the other run's
    assert [(p["step"], p["values"]) for p in points] == [(3, {"loss": 0.125})]


def _export() -> tuple[OtelExport, InMemorySpanExporter, InMemoryMetricReader]:
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    reader = InMemoryMetricReader()
    export = OtelExport(tracer_provider, MeterProvider(metric_readers=[reader]),
                        since=time.time())
    return export, spans, reader


def _points_by_run(reader: InMemoryMetricReader) -> dict[str, float]:
    data = reader.get_metrics_data()
    assert data is not None
    return {str(p.attributes[RUN_ID]): p.value
            for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics
            if m.name == "runwatch.points.ingested" for p in m.data.data_points
            if isinstance(p, NumberDataPoint) and p.attributes is not None}


def _run_spans(spans: InMemorySpanExporter) -> list[str]:
    return sorted(str(s.attributes[RUN_ID]) for s in spans.get_finished_spans()
                  if s.name == "runwatch.run" and s.attributes is not None)


def test_the_otlp_export_keeps_runs_apart_across_an_index_made_again(runs_dir: Path) -> None:
    export, spans, reader = _export()
    first = sdk_run(runs_dir, "first", steps=2)  # 2 steps of loss and learning_rate
    live = init(name="second", dir=runs_dir, flush_interval=0.02)
    live.log({"loss": 1.0}, step=0)
    engine = open_engine(default_db(runs_dir))
    with (Runner(engine, runs_dir=runs_dir, port=0, interval=0.05, warm=False,
                 otel=export) as srv,
          http.client(base_url=srv.url, timeout=GUARD) as client):
        wait_for(lambda: _run_spans(spans) == [first], what="the first run's span")
        wait_for(lambda: _detail(client, "second") is not None, what="the second run")
        assert _points_by_run(reader)[first] == 4
        # the first run's folder goes, then the index: the second run alone is indexed
        # into the index made again, under the pk the first run had
        shutil.rmtree(runs_dir / "first")
        wait_for(lambda: _detail(client, "first") is None, what="the first run forgotten")
        default_db(runs_dir).unlink()
        wait_for(lambda: default_db(runs_dir).exists() and _detail(client, "second") is not None,
                 what="the second run in the index made again")
        live.log({"loss": 0.5}, step=1)
        live.finish("SUCCEEDED")
        wait_for(lambda: _run_spans(spans) == sorted([first, str(live.id)]),
                 what="the second run's span, once it ended")
    engine.dispose()
    counts = _points_by_run(reader)
    assert counts[first] == 4  # the second run's points were never counted as the first's
    assert counts[str(live.id)] >= 2
