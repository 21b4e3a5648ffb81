"""OpenTelemetry export read back by the SDK's in-memory exporter and reader, and over
real OTLP/HTTP by a receiver decoding the protocol's own protobuf messages."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    HistogramDataPoint,
    InMemoryMetricReader,
    NumberDataPoint,
)
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from sqlalchemy import Engine

from runwatch.health.store import on_metrics
from runwatch.ingest import Indexer
from runwatch.interop.otel import RUN_ID, OtelExport, from_env
from runwatch.server.runner import Runner, free_port
from tests.support import MakeRun
from tests.support.wait import wait_for

STEPS = 6


def _export(since: float) -> tuple[OtelExport, InMemorySpanExporter, InMemoryMetricReader]:
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    reader = InMemoryMetricReader()
    return OtelExport(tracer_provider, MeterProvider(metric_readers=[reader]), since), spans, reader


def _index(engine: Engine, runs_dir: Path, export: OtelExport) -> None:
    Indexer(engine, runs_dir, hooks=[on_metrics, export.on_points]).index_once()


def test_ended_runs_are_spans_of_their_phases(engine: Engine, runs_dir: Path,
                                              make_run: MakeRun) -> None:
    export, spans, _ = _export(since=time.time())
    ok = make_run("ok", steps=STEPS)
    failed = make_run("failed", steps=2, status="FAILED")
    _index(engine, runs_dir, export)
    assert export.after_pass(engine) == 2
    assert export.after_pass(engine) == 0  # each run once
    got = spans.get_finished_spans()
    by_run: dict[str, dict[str, ReadableSpan]] = {}
    for span in got:
        assert span.attributes is not None
        by_run.setdefault(str(span.attributes[RUN_ID]), {})[span.name] = span
    assert set(by_run) == {ok, failed}
    for run_id, named in by_run.items():
        assert set(named) == {"runwatch.run", "runwatch.run.queued", "runwatch.run.running"}
        root, queued, running = (named[n] for n in ("runwatch.run", "runwatch.run.queued",
                                                    "runwatch.run.running"))
        assert root.start_time is not None and root.end_time is not None
        for child in (queued, running):
            assert child.parent is not None and child.parent.span_id == root.context.span_id
            assert child.start_time is not None and child.end_time is not None
            assert root.start_time <= child.start_time <= child.end_time <= root.end_time
        assert queued.end_time == running.start_time
        assert root.attributes is not None
        assert root.attributes["runwatch.run.phase"] == (
            "SUCCEEDED" if run_id == ok else "FAILED")
        want = StatusCode.ERROR if run_id == failed else StatusCode.UNSET
        assert root.status.status_code == want


def test_runs_ended_before_the_export_started_are_not_sent_again(
        engine: Engine, runs_dir: Path, make_run: MakeRun) -> None:
    make_run("old", steps=2)
    export, spans, _ = _export(since=time.time() + 60)
    _index(engine, runs_dir, export)
    assert export.after_pass(engine) == 0
    assert spans.get_finished_spans() == ()


def test_step_timing_and_points_are_metrics_of_the_run(engine: Engine, runs_dir: Path,
                                                       make_run: MakeRun) -> None:
    export, _, reader = _export(since=time.time())
    run_id = make_run("timed", steps=STEPS)
    _index(engine, runs_dir, export)
    data = reader.get_metrics_data()
    assert data is not None
    metrics = {m.name: m for rm in data.resource_metrics for sm in rm.scope_metrics
               for m in sm.metrics}
    assert set(metrics) == {"runwatch.step.duration", "runwatch.points.ingested"}
    (duration,) = metrics["runwatch.step.duration"].data.data_points
    assert isinstance(duration, HistogramDataPoint)
    assert duration.attributes == {RUN_ID: run_id}
    assert duration.count == STEPS - 1  # one duration between each two steps
    assert duration.min >= 0 and duration.sum < 60
    (points,) = metrics["runwatch.points.ingested"].data.data_points
    assert isinstance(points, NumberDataPoint)
    assert points.value == 2 * STEPS  # loss and learning_rate


class _Receiver(BaseHTTPRequestHandler):
    """An OTLP/HTTP endpoint keeping each request's path and body."""

    got: list[tuple[str, bytes]]

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.got.append((self.path, body))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[tuple[str, list[tuple[str, bytes]]]]:
    got: list[tuple[str, bytes]] = []
    handler = type("Handler", (_Receiver,), {"got": got})
    server = HTTPServer(("127.0.0.1", free_port()), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}", got
    server.shutdown()
    thread.join(timeout=10)


def test_without_the_endpoint_nothing_is_exported() -> None:
    assert from_env(0.0, {}) is None


def test_otlp_over_http_carries_the_spans_and_metrics(
        engine: Engine, runs_dir: Path, make_run: MakeRun,
        receiver: tuple[str, list[tuple[str, bytes]]]) -> None:
    url, got = receiver
    export = from_env(time.time(), {"OTEL_EXPORTER_OTLP_ENDPOINT": url})
    assert export is not None
    run_id = make_run("sent", steps=STEPS)
    _index(engine, runs_dir, export)
    assert export.after_pass(engine) == 1
    export.shutdown()  # sends what the batch processor and the periodic reader hold
    span_names, metric_names, service = set(), set(), set()
    for path, body in got:
        if path == "/v1/traces":
            traces = ExportTraceServiceRequest.FromString(body)
            for rs in traces.resource_spans:
                service |= {a.value.string_value for a in rs.resource.attributes
                            if a.key == "service.name"}
                for ss in rs.scope_spans:
                    for span in ss.spans:
                        assert {a.key: a.value.string_value for a in span.attributes}[RUN_ID] \
                            == run_id
                        span_names.add(span.name)
        elif path == "/v1/metrics":
            sent = ExportMetricsServiceRequest.FromString(body)
            metric_names |= {m.name for rm in sent.resource_metrics for sm in rm.scope_metrics
                             for m in sm.metrics}
    assert span_names == {"runwatch.run", "runwatch.run.queued", "runwatch.run.running"}
    assert metric_names == {"runwatch.step.duration", "runwatch.points.ingested"}
    assert service == {"runwatch"}


def test_a_server_sends_the_spans_of_a_run_that_ends_while_it_runs(
        engine: Engine, runs_dir: Path, make_run: MakeRun) -> None:
    export, spans, reader = _export(since=time.time())
    with Runner(engine, runs_dir=runs_dir, port=free_port(), interval=0.05, otel=export,
                warm=False):
        run_id = make_run("served", steps=STEPS)
        got = wait_for(lambda: [s for s in spans.get_finished_spans() if s.name == "runwatch.run"],
                       what="the run's span sent by the server")
    assert [s.attributes[RUN_ID] for s in got if s.attributes] == [run_id]
    data = reader.get_metrics_data()
    assert data is not None
    assert "runwatch.step.duration" in {m.name for rm in data.resource_metrics
                                        for sm in rm.scope_metrics for m in sm.metrics}
