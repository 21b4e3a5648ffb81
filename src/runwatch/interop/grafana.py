"""Grafana: a dashboard over the server's Prometheus metrics (server/routes_prom.py), and
links to it covering one run's time range.

The dashboard is built here with Grafana's builder library (grafana-foundation-sdk, the
`grafana` extra) rather than kept as a file, so each panel's PromQL is next to the others
and a test can check every metric it names against a real /metrics.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any
from urllib.parse import urlencode, urlsplit

UID = "runwatch"
TITLE = "runwatch"
SLUG = "runwatch"
ENV_VAR = "RUNWATCH_GRAFANA_URL"
# A run's link starts this much before its start and ends this much after its end, so
# the edges of the run show on the graphs.
MARGIN_S = 60.0
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
# Path segments of Grafana's pages (a dashboard, a panel alone): a URL holding one is a
# page's address, not Grafana's base.
PAGE_SEGMENTS = frozenset({"d", "d-solo", "dashboard", "dashboards", "explore", "goto",
                           "public-dashboards", "alerting", "login", "playlists"})

# (title, unit, legend, PromQL expressions): the dashboard's time series panels. The
# index's gauges (runs, findings, queue) are read from the index at each scrape, so every
# server of one index says the same: `max` shows it once, where `sum` would count it once
# per server. What a server counts of its own work (points it indexed) is a series per
# server; the latency histograms add up the servers' requests.
PANELS: tuple[tuple[str, str, str, tuple[str, ...]], ...] = (
    ("Runs by phase", "short", "{{phase}}", ("max by (phase) (runwatch_runs)",)),
    ("Open health findings", "short", "{{severity}}",
     ("max by (severity) (runwatch_health_findings_open)",)),
    ("Points indexed per second", "short", "{{instance}}",
     ("rate(runwatch_points_ingested_total[$__rate_interval])",)),
    ("Ingest lag (p50, p95)", "s", "",
     ("histogram_quantile(0.5, sum by (le) "
      "(rate(runwatch_ingest_lag_seconds_bucket[$__rate_interval])))",
      "histogram_quantile(0.95, sum by (le) "
      "(rate(runwatch_ingest_lag_seconds_bucket[$__rate_interval])))")),
    ("Queue depth", "short", "jobs waiting", ("max(runwatch_queue_depth)",)),
    ("Request latency p95 by route", "s", "{{method}} {{route}}",
     ("histogram_quantile(0.95, sum by (le, route, method) "
      "(rate(runwatch_http_request_duration_seconds_bucket[$__rate_interval])))",)),
)


class GrafanaSDKMissing(ImportError):
    """The dashboard is built with grafana-foundation-sdk, which is not installed."""


def dashboard() -> dict[str, Any]:
    """The dashboard JSON (Grafana's dashboard model), ready for import or provisioning.

    It is built with Grafana's own builder library, grafana-foundation-sdk (the `grafana`
    extra), whose types are generated from Grafana's dashboard schema."""
    try:
        from grafana_foundation_sdk.builders import common, prometheus, text, timeseries
        from grafana_foundation_sdk.builders import dashboard as board
        from grafana_foundation_sdk.models import common as common_model
        from grafana_foundation_sdk.models import dashboard as model
        from grafana_foundation_sdk.models import text as text_model
    except ImportError as exc:
        raise GrafanaSDKMissing(str(exc), name=exc.name) from exc

    source = model.DataSourceRef(type_val=DATASOURCE["type"], uid=DATASOURCE["uid"])
    built = (
        board.Dashboard(TITLE).uid(UID).tags(["runwatch"]).timezone("browser").editable()
        .refresh("30s").time("now-6h", "now").version(1)
        .with_variable(board.DatasourceVariable("datasource").label("Prometheus")
                       .type("prometheus"))
        .with_variable(board.TextBoxVariable("run").label("Run").default_value(""))
        .with_variable(board.TextBoxVariable("runwatch_url").label("runwatch")
                       .default_value("http://127.0.0.1:8765"))
        .with_panel(text.Panel().id(1).title("Run")
                    .grid_pos(model.GridPos(h=3, w=24, x=0, y=0))
                    .mode(text_model.TextMode.MARKDOWN)
                    .content("Run **${run}** · [open it in runwatch]"
                             "(${runwatch_url}/runs?run=${run})")))
    for n, (title, unit, legend, exprs) in enumerate(PANELS):
        panel = (timeseries.Panel().id(n + 2).title(title).datasource(source).unit(unit)
                 .grid_pos(model.GridPos(h=8, w=12, x=12 * (n % 2), y=3 + 8 * (n // 2)))
                 .legend(common.VizLegendOptions().show_legend(True)
                         .display_mode(common_model.LegendDisplayMode.LIST)
                         .placement(common_model.LegendPlacement.BOTTOM)))
        for i, expr in enumerate(exprs):
            panel.with_target(prometheus.Dataquery().ref_id(chr(ord("A") + i))
                              .datasource(source).expr(expr)
                              .legend_format(legend or ("p50" if i == 0 else "p95")))
        built.with_panel(panel)
    data: dict[str, Any] = built.build().to_json()
    return _plain(data)


def _plain(value: Any) -> Any:
    """The SDK's model as plain JSON values (its nested objects and enums included)."""
    if hasattr(value, "to_json"):
        return _plain(value.to_json())
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, StrEnum):
        return str(value)
    return value


def base_url(url: str) -> str:
    """Grafana's base address from `url`: http or https, a host, an optional port and an
    optional path prefix (Grafana served under a sub-path), without a trailing slash.

    A page's address (a query, a fragment, a `/d/` dashboard path) is refused rather than
    cut down, as are credentials in it. Raises ValueError saying what to give instead."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port  # ValueError for a port that is no number or out of range
    except ValueError:
        parts, port = None, None
    if (parts is None or parts.scheme.lower() not in ("http", "https") or not parts.hostname
            or port == 0):
        raise ValueError(f"{url!r} is not Grafana's address: give its base URL, "
                         "http(s)://HOST[:PORT][/PATH], such as http://localhost:3000")
    if parts.username is not None or parts.password is not None:
        raise ValueError(f"{url!r} holds a user name or password: give Grafana's base URL "
                         "without them (whoever opens a link signs in to Grafana as usual)")
    segments = parts.path.split("/")
    page = next((i for i, seg in enumerate(segments) if seg in PAGE_SEGMENTS), None)
    if page is not None or parts.query or parts.fragment:
        base = (f"{parts.scheme.lower()}://{parts.netloc}"
                f"{'/'.join(segments[:page]).rstrip('/')}")
        raise ValueError(f"{url!r} is the address of a page in Grafana: give Grafana's base "
                         "URL instead, without a query or a page's path such as /d/ or "
                         f"/explore (here: {base})")
    return f"{parts.scheme.lower()}://{parts.netloc}{parts.path.rstrip('/')}"


def run_link(grafana_url: str, run_id: str, start: float, end: float | None,
             runwatch_url: str | None = None) -> str:
    """A link to the dashboard over one run: its start to its end, or to now while it
    runs (Grafana's `now`, so the open page keeps following it). Raises ValueError where
    `grafana_url` is not Grafana's base address (`base_url`)."""
    params = {"orgId": "1", "from": str(int((start - MARGIN_S) * 1000)),
              "to": "now" if end is None else str(int((end + MARGIN_S) * 1000)),
              "var-run": run_id}
    if runwatch_url:
        params["var-runwatch_url"] = runwatch_url.rstrip("/")
    return f"{base_url(grafana_url)}/d/{UID}/{SLUG}?{urlencode(params)}"
