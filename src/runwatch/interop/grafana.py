"""Grafana: a dashboard over the server's Prometheus metrics (server/routes_prom.py), and
links to it covering one run's time range.

The dashboard is generated here rather than kept as a file, so each panel's PromQL is
next to the others and a test can check every metric it names against a real /metrics.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

UID = "runwatch"
TITLE = "runwatch"
SLUG = "runwatch"
ENV_VAR = "RUNWATCH_GRAFANA_URL"
# the dashboard schema version of the Grafana 10/11 dashboard JSON model
SCHEMA_VERSION = 39
# A run's link starts this much before its start and ends this much after its end, so
# the edges of the run show on the graphs.
MARGIN_S = 60.0
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}

# (title, unit, legend, PromQL expressions): the dashboard's time series panels.
PANELS: tuple[tuple[str, str, str, tuple[str, ...]], ...] = (
    ("Runs by phase", "short", "{{phase}}", ("sum by (phase) (runwatch_runs)",)),
    ("Open health findings", "short", "{{severity}}",
     ("sum by (severity) (runwatch_health_findings_open)",)),
    ("Points indexed per second", "short", "points/s",
     ("rate(runwatch_points_ingested_total[$__rate_interval])",)),
    ("Ingest lag (p50, p95)", "s", "",
     ("histogram_quantile(0.5, sum by (le) "
      "(rate(runwatch_ingest_lag_seconds_bucket[$__rate_interval])))",
      "histogram_quantile(0.95, sum by (le) "
      "(rate(runwatch_ingest_lag_seconds_bucket[$__rate_interval])))")),
    ("Queue depth", "short", "jobs waiting", ("runwatch_queue_depth",)),
    ("Request latency p95 by route", "s", "{{method}} {{route}}",
     ("histogram_quantile(0.95, sum by (le, route, method) "
      "(rate(runwatch_http_request_duration_seconds_bucket[$__rate_interval])))",)),
)


def dashboard() -> dict[str, Any]:
    """The dashboard JSON (Grafana's dashboard model), ready for import or provisioning."""
    panels: list[dict[str, Any]] = [{
        "id": 1, "type": "text", "title": "Run", "gridPos": {"h": 3, "w": 24, "x": 0, "y": 0},
        "options": {"mode": "markdown", "content":
                    "Run **${run}** · [open it in runwatch](${runwatch_url}/runs?run=${run})"},
    }]
    for n, (title, unit, legend, exprs) in enumerate(PANELS):
        panels.append({
            "id": n + 2,
            "type": "timeseries",
            "title": title,
            "datasource": DATASOURCE,
            "gridPos": {"h": 8, "w": 12, "x": 12 * (n % 2), "y": 3 + 8 * (n // 2)},
            "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
            "options": {"legend": {"displayMode": "list", "placement": "bottom"}},
            "targets": [{"refId": chr(ord("A") + i), "datasource": DATASOURCE, "expr": expr,
                         "legendFormat": legend or ("p50" if i == 0 else "p95")}
                        for i, expr in enumerate(exprs)],
        })
    return {
        "uid": UID,
        "title": TITLE,
        "tags": ["runwatch"],
        "timezone": "browser",
        "schemaVersion": SCHEMA_VERSION,
        "version": 1,
        "editable": True,
        "refresh": "30s",
        "time": {"from": "now-6h", "to": "now"},
        "templating": {"list": [
            {"name": "datasource", "label": "Prometheus", "type": "datasource",
             "query": "prometheus"},
            {"name": "run", "label": "Run", "type": "textbox", "query": ""},
            {"name": "runwatch_url", "label": "runwatch", "type": "textbox",
             "query": "http://127.0.0.1:8765"},
        ]},
        "annotations": {"list": []},
        "panels": panels,
    }


def run_link(base_url: str, run_id: str, start: float, end: float | None,
             runwatch_url: str | None = None) -> str:
    """A link to the dashboard over one run: its start to its end, or to now while it
    runs (Grafana's `now`, so the open page keeps following it)."""
    params = {"orgId": "1", "from": str(int((start - MARGIN_S) * 1000)),
              "to": "now" if end is None else str(int((end + MARGIN_S) * 1000)),
              "var-run": run_id}
    if runwatch_url:
        params["var-runwatch_url"] = runwatch_url.rstrip("/")
    return f"{base_url.rstrip('/')}/d/{UID}/{SLUG}?{urlencode(params)}"
