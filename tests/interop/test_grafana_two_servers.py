"""The Grafana dashboard over two servers of one index (`runwatch ui` and a `runwatch
server` on one runs folder), as docs/api.md describes that deployment: a real Prometheus
scrapes both, and each panel's query, run by it, shows the index's counts once, not once
per server; the points a server indexes stay a series per server."""

from __future__ import annotations

import math
from contextlib import ExitStack
from pathlib import Path

import pytest
from sqlalchemy import Engine

from runwatch.interop import grafana
from runwatch.server.runner import Runner, free_port
from tests.interop.test_prometheus import (
    DEADLINE_S,
    PROMETHEUS,
    QUERY_S,
    TOKEN,
    _metrics,
    _prometheus,
    _query,
    _value,
)
from tests.support import MakeRun
from tests.support.wait import wait_for

# The panels of the index's own gauges, and the series each reads
INDEX_PANELS = {"Runs by phase": ("runwatch_runs", "phase"),
                "Open health findings": ("runwatch_health_findings_open", "severity"),
                "Queue depth": ("runwatch_queue_depth", None)}


def _scraped(srv: Runner, series: str, label: str | None) -> dict[str, float]:
    """`series` by `label` as the server's /metrics says it."""
    out = {}
    for line in _metrics(srv).splitlines():
        name, _, value = line.rpartition(" ")
        if name == series or name.startswith(series + "{"):
            key = name.split(f'{label}="', 1)[1].split('"', 1)[0] if label else ""
            out[key] = float(value)
    return out


def _shown(base: str, expr: str, label: str) -> dict[str, float]:
    """The series Prometheus answers `expr` with, by `label` (all one: "")."""
    out = {}
    for result in _query(base, expr):
        metric, value = result["metric"], result["value"]
        assert isinstance(metric, dict) and isinstance(value, list)
        out[str(metric.get(label, ""))] = float(value[1])
    return out


@pytest.mark.skipif(PROMETHEUS is None, reason="needs Debian's prometheus package")
def test_two_servers_of_one_index_are_counted_once(engine: Engine, runs_dir: Path,
                                                   make_run: MakeRun, tmp_path: Path) -> None:
    make_run("done", steps=5)
    make_run("broken", steps=4, status="FAILED",
             metrics=lambda i: {"loss": math.nan if i == 3 else 1.0 / (i + 1)})
    with ExitStack() as stack:
        servers = [stack.enter_context(Runner(engine, runs_dir=runs_dir, port=free_port(),
                                              interval=0.05, token=TOKEN, warm=False))
                   for _ in range(2)]
        for srv in servers:

            def counted(s: Runner = srv) -> bool:
                return (_scraped(s, "runwatch_runs", "phase").get("FAILED") == 1 and _scraped(
                    s, "runwatch_health_findings_open", "severity").get("critical") == 1)

            wait_for(counted, what=f"server {srv.url} to count both runs")
        # what one server says of the index: what each panel must show
        want = {title: _scraped(servers[0], series, label)
                for title, (series, label) in INDEX_PANELS.items()}
        assert want["Runs by phase"]["SUCCEEDED"] == 1, want
        with _prometheus(servers, tmp_path) as base:
            # both servers scraped, each holding the index's counts
            wait_for(lambda: _value(base, 'count(runwatch_runs{phase="FAILED"} == 1)') == 2,
                     what="Prometheus to hold both servers' runwatch_runs",
                     deadline=DEADLINE_S, interval=QUERY_S)
            panels = {p["title"]: p for p in grafana.dashboard()["panels"]}
            for title, (_, label) in INDEX_PANELS.items():
                (target,) = panels[title]["targets"]
                shown = _shown(base, target["expr"], label or "")
                assert shown == want[title], (title, target["expr"], shown, want[title])
            # the points each server indexed: one series per server, named by it
            (target,) = panels["Points indexed per second"]["targets"]
            expr = target["expr"].replace("$__rate_interval", "1m")
            wait_for(lambda: len(_shown(base, expr, "instance")) == 2,
                     what=f"a series per server of {expr}", deadline=DEADLINE_S, interval=QUERY_S)
            assert set(_shown(base, expr, "instance")) == {f"127.0.0.1:{srv.port}"
                                                           for srv in servers}
            assert target["legendFormat"] == "{{instance}}"
