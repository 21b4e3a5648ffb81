"""OpenTelemetry export: each ended run's phases as spans, and per-step timing as metrics,
under the `runwatch.` prefix, over OTLP when OTEL_EXPORTER_OTLP_ENDPOINT is set.

`OtelExport.on_points` is an indexer points hook (the step timing of runs as they are
indexed); `after_pass` sends the spans of runs that ended since the last pass. The
providers are passed in, so a test reads what is sent with the SDK's in-memory exporter.
What it keeps of a run is kept by its id, which a run folder gives it: a pk names another
run once the index is made again (`start_over`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, Engine, select

from runwatch.rundir.format import TERMINAL_PHASES
from runwatch.store import schema as s
from runwatch.store.points import PointColumns

if TYPE_CHECKING:  # the SDK is an optional extra (`otel`), imported only when configured
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.trace import TracerProvider

ENDPOINT_VAR = "OTEL_EXPORTER_OTLP_ENDPOINT"
TRACES_VAR = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
METRICS_VAR = "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"
SERVICE_NAME = "runwatch"
# the attribute naming a run, on every span and data point
RUN_ID = "runwatch.run.id"


# how far behind the latest run's end a later pass still looks for runs that ended
SPAN_LAG_S = 600.0


class OtelExport:
    """Sends run phases as spans and step timing as metrics to the given providers."""

    def __init__(self, tracer_provider: TracerProvider, meter_provider: MeterProvider,
                 since: float) -> None:
        self.tracer_provider = tracer_provider
        self.meter_provider = meter_provider
        self.tracer = tracer_provider.get_tracer("runwatch")
        meter = meter_provider.get_meter("runwatch")
        self.step_duration = meter.create_histogram(
            "runwatch.step.duration", unit="s",
            description="Wall seconds per training step, from the times its metrics were logged.")
        self.points = meter.create_counter(
            "runwatch.points.ingested", unit="{point}",
            description="Metric points indexed, by run.")
        # runs that ended before `since` were someone else's to send (an earlier server)
        self.since = since
        self._sent: set[str] = set()  # the ids of the runs whose spans were sent
        # each run's id by its pk in the index, and per run id the last step indexed with
        # the time it was logged
        self._run_ids: dict[int, str] = {}
        self._last_step: dict[str, tuple[int, float]] = {}
        self._shut = False

    def start_over(self) -> None:
        """The index was made again (its file deleted or replaced): its pks name other
        runs. What was sent, and each run's last step, are kept by run id."""
        self._run_ids.clear()

    def on_points(self, conn: Connection, run_pk: int,
                  points: Mapping[str, PointColumns]) -> None:
        """Record the new steps' durations: the time between consecutive steps' records."""
        run_id = self._run_id(conn, run_pk)
        step_ts: dict[int, float] = {}
        count = 0
        for cols in points.values():
            count += len(cols.seqs)
            for step, ts in zip(cols.steps, cols.ts, strict=True):
                if ts > 0 and ts > step_ts.get(step, 0.0):
                    step_ts[step] = ts
        attributes = {RUN_ID: run_id}
        self.points.add(count, attributes)
        last = self._last_step.get(run_id)
        for step in sorted(step_ts):
            ts = step_ts[step]
            if last is not None and step > last[0] and ts >= last[1]:
                # a run that logs every k-th step spreads the time over the k steps
                self.step_duration.record((ts - last[1]) / (step - last[0]), attributes)
            if last is None or step > last[0]:
                last = (step, ts)
        if last is not None:
            self._last_step[run_id] = last

    def after_pass(self, engine: Engine) -> int:
        """Send the phase spans of runs that ended since the last call; returns how many."""
        r = s.runs.c
        with engine.connect() as conn:
            rows = conn.execute(
                select(r.pk, r.run_id, r.name, r.project, r.method, r.status, r.reason,
                       r.created_at, r.started_at, r.ended_at)
                .where(r.status.in_(sorted(TERMINAL_PHASES)), r.ended_at >= self.since)
            ).all()
        fresh = [row for row in rows if row.run_id not in self._sent]
        for row in fresh:
            self._run_spans(row)
            self._sent.add(row.run_id)
            self._last_step.pop(row.run_id, None)
            self._run_ids.pop(row.pk, None)
        if rows:
            # the next pass reads only runs that ended lately: a run indexed a while after
            # its end (a slow pass, a clock apart) still falls within the lag kept
            since = max(self.since, max(row.ended_at for row in rows) - SPAN_LAG_S)
            self._sent = {row.run_id for row in rows if row.ended_at >= since}
            self.since = since
        return len(fresh)

    def _run_spans(self, row: Any) -> None:
        """One span for the run, QUEUED to its end, with a child per phase it went through."""
        from opentelemetry import trace
        from opentelemetry.trace import Status, StatusCode

        def ns(t: float) -> int:
            return int(t * 1e9)

        end = max(row.ended_at, row.created_at)
        attributes = {RUN_ID: row.run_id, "runwatch.run.name": row.name,
                      "runwatch.run.project": row.project, "runwatch.run.method": row.method or "",
                      "runwatch.run.phase": row.status}
        run = self.tracer.start_span("runwatch.run", start_time=ns(row.created_at),
                                     attributes=attributes)
        inside = trace.set_span_in_context(run)
        started = row.started_at if row.started_at is not None else end
        phases = [("runwatch.run.queued", row.created_at, min(max(started, row.created_at), end))]
        if row.started_at is not None:
            phases.append(("runwatch.run.running", phases[0][2], end))
        for name, start, stop in phases:
            child = self.tracer.start_span(name, context=inside, start_time=ns(start),
                                           attributes={RUN_ID: row.run_id})
            child.end(end_time=ns(stop))
        if row.status == "FAILED":
            run.set_status(Status(StatusCode.ERROR, row.reason or "the run failed"))
        run.end(end_time=ns(end))

    def _run_id(self, conn: Connection, run_pk: int) -> str:
        run_id = self._run_ids.get(run_pk)
        if run_id is None:
            run_id = str(conn.execute(select(s.runs.c.run_id)
                                      .where(s.runs.c.pk == run_pk)).scalar_one())
            self._run_ids[run_pk] = run_id
        return run_id

    def shutdown(self) -> None:
        """Send what is buffered and stop the providers (once: a server may stop twice)."""
        if self._shut:
            return
        self._shut = True
        self.tracer_provider.shutdown()
        self.meter_provider.shutdown()


def from_env(since: float, environ: Mapping[str, str] | None = None) -> OtelExport | None:
    """An export over OTLP/HTTP when OTEL_EXPORTER_OTLP_ENDPOINT is set, else None.

    Traces go to `<endpoint>/v1/traces` and metrics to `<endpoint>/v1/metrics`, unless
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT / _METRICS_ENDPOINT say otherwise (as the SDK reads
    them); the exporters read the other OTEL_EXPORTER_OTLP_* settings (headers, timeout).
    """
    env = os.environ if environ is None else environ
    base = env.get(ENDPOINT_VAR, "").rstrip("/")
    if not base:
        return None
    try:
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as exc:
        raise RuntimeError(f"{ENDPOINT_VAR} is set, but OpenTelemetry is not installed: "
                           "pip install 'runwatch[otel]', or unset it") from exc
    resource = Resource.create({"service.name": SERVICE_NAME})
    tracer_provider = TracerProvider(resource=resource)
    traces = env.get(TRACES_VAR) or f"{base}/v1/traces"
    metrics = env.get(METRICS_VAR) or f"{base}/v1/metrics"
    tracer_provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=traces)))
    reader = PeriodicExportingMetricReader(OTLPMetricExporter(endpoint=metrics))
    meter_provider = MeterProvider(resource=resource, metric_readers=[reader])
    return OtelExport(tracer_provider, meter_provider, since)
