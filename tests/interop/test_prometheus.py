"""/metrics read by its real consumers: Debian's `prometheus` scraping a real runwatch
server (with its token, as docs/prometheus.md configures it) and `promtool`'s linter."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import urllib.parse
import urllib.request
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, select

from runwatch.interop import grafana
from runwatch.sdk import init
from runwatch.server.runner import Runner, free_port
from runwatch.store import schema as s
from tests.support import MakeRun, http, manifest
from tests.support.wait import wait_for

TOKEN = "prom-test-token-0123456789"
PROMETHEUS = shutil.which("prometheus")
PROMTOOL = shutil.which("promtool")
# a loaded machine may take a while to start Prometheus
DEADLINE_S = 90.0
# A scrape every quarter second (as often as a timeout allows: one must be no longer than
# the interval), so that the two samples a rate needs come within half a second; a scrape
# that times out on a loaded machine is only taken again. What Prometheus holds is asked
# as often (QUERY_S).
SCRAPE = "250ms"
QUERY_S = 0.1


@pytest.fixture
def token_server(engine: Engine, runs_dir: Path) -> Iterator[Runner]:
    with Runner(engine, runs_dir=runs_dir, port=free_port(), interval=0.05,
                token=TOKEN, warm=False) as srv:
        yield srv


@pytest.fixture
def records(runs_dir: Path, make_run: MakeRun) -> Iterator[int]:
    """Two finished runs, one failed on a NaN loss (an open critical finding), one running
    (finished once the test is done); the number of metric records they logged."""
    make_run("done", steps=5)
    make_run("broken", steps=4, status="FAILED",
             metrics=lambda i: {"loss": float("nan") if i == 3 else 1.0 / (i + 1)})
    live = init(name="live", dir=runs_dir, method="sft")
    live.log({"loss": 1.0}, step=0)
    yield 5 + 4 + 1
    live.finish()


def _metrics(srv: Runner) -> str:
    got = http.get(f"{srv.url}/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    assert got.status_code == 200, got.text
    assert got.headers["content-type"].startswith("text/plain; version=0.0.4")
    return got.text


def test_metrics_follow_the_token_rule(token_server: Runner) -> None:
    refused = http.get(f"{token_server.url}/metrics")
    assert refused.status_code == 401
    assert refused.json()["ok"] is False


def _counter(text: str, name: str) -> float:
    return sum(float(line.split()[-1]) for line in text.splitlines()
               if line.startswith(name + " ") or line.startswith(name + "{"))


def test_points_streamed_over_http_are_counted_like_indexed_ones(token_server: Runner) -> None:
    text = _metrics(token_server)
    before = _counter(text, "runwatch_points_ingested_total")
    lags_before = _counter(text, "runwatch_ingest_lag_seconds_count")
    batch: dict[str, Any] = {
        "run_id": "id-streamed", "file": "metrics.jsonl", "manifest": manifest("streamed"),
        "records": [{"seq": i, "ts": 1_700_000_000.0 + i, "step": i,
                     "loss": 1.0 / (i + 1), "lr": 0.1} for i in range(3)]}
    sent = http.post(f"{token_server.url}/api/ingest", json={"batches": [batch]},
                     headers={"Authorization": f"Bearer {TOKEN}"})
    assert sent.status_code == 200, sent.text
    text = _metrics(token_server)
    assert _counter(text, "runwatch_points_ingested_total") - before == 6
    assert _counter(text, "runwatch_ingest_lag_seconds_count") - lags_before == 3
    # a bad batch beside a good one: the request is stored again batch by batch, and the
    # good batch's points are still counted once
    good = dict(batch, run_id="id-beside", manifest=manifest("beside"))
    bad = dict(batch, run_id="id-bad", manifest=manifest("bad"),
               records=[dict(r, step="seven") for r in batch["records"]])
    # (its events batch makes the group store its points before the bad batch comes)
    events = {"run_id": "id-beside", "file": "events.jsonl",
              "records": [{"seq": 0, "ts": 1_700_000_000.0, "phase": "RUNNING"}]}
    sent = http.post(f"{token_server.url}/api/ingest", json={"batches": [good, events, bad]},
                     headers={"Authorization": f"Bearer {TOKEN}"})
    assert sent.status_code == 400, sent.text
    assert [r["ok"] for r in sent.json()["results"]] == [True, True, False]
    assert _counter(_metrics(token_server), "runwatch_points_ingested_total") - before == 12


@pytest.mark.skipif(PROMTOOL is None, reason="needs Debian's prometheus package (promtool)")
def test_promtool_finds_nothing_to_lint(token_server: Runner, records: int) -> None:

    def counted() -> str | None:
        text = _metrics(token_server)
        return text if f"runwatch_ingest_lag_seconds_count {records}" in text else None

    text = wait_for(counted, what="the three runs' records counted in /metrics")
    assert text is not None
    assert 'runwatch_runs{phase="SUCCEEDED"} 1' in text
    assert 'runwatch_runs{phase="FAILED"} 1' in text
    assert 'runwatch_runs{phase="RUNNING"} 1' in text
    # requests are timed by route template, never by the path they asked for
    auth = {"Authorization": f"Bearer {TOKEN}"}
    assert http.get(f"{token_server.url}/api/runs/done", headers=auth).status_code == 200
    assert http.get(f"{token_server.url}/no/such/page", headers=auth).status_code == 404
    text = _metrics(token_server)
    assert ('runwatch_http_request_duration_seconds_count{method="GET",route="/api/runs/{run}"} 1'
            in text)
    assert 'route="unmatched"' in text and "/api/runs/done" not in text
    assert PROMTOOL is not None
    lint = subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True,
                          text=True, timeout=60)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    assert lint.stdout.strip() == "" and lint.stderr.strip() == "", lint.stdout + lint.stderr


def _query(base: str, expr: str) -> list[dict[str, object]]:
    url = f"{base}/api/v1/query?{urllib.parse.urlencode({'query': expr})}"
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            body = json.load(resp)
    except OSError:
        return []  # not listening yet
    assert body["status"] == "success", body
    result: list[dict[str, object]] = body["data"]["result"]
    return result


def _targets(base: str) -> list[tuple[object, object]]:
    """Each scrape target's health and last error, as Prometheus says them."""
    try:
        with urllib.request.urlopen(f"{base}/api/v1/targets", timeout=5) as resp:
            active = json.load(resp)["data"]["activeTargets"]
    except OSError as exc:
        return [("unreachable", str(exc))]
    return [(t.get("health"), t.get("lastError")) for t in active]


def _value(base: str, expr: str) -> float | None:
    result = _query(base, expr)
    if len(result) != 1:
        return None
    value = result[0]["value"]
    assert isinstance(value, list)
    return float(value[1])


@contextmanager
def _prometheus(srv: Runner | list[Runner], tmp_path: Path) -> Iterator[str]:
    """A real Prometheus scraping `srv` every SCRAPE with its token, ready; its address.
    A Prometheus that exits before it is ready (its port taken meanwhile by another test's
    server: a free port is only free when it is picked) is started again on another port,
    twice at most; one that never gets ready fails the test with its log."""
    for attempt in range(3):
        with _prometheus_on(free_port(), srv, tmp_path / f"prometheus-{attempt}") as base:
            if base is not None:
                yield base
                return
    log = (tmp_path / "prometheus-2" / "prometheus.log").read_text(errors="replace")
    pytest.fail(f"Prometheus exited before it was ready, three times; its log ends:\n"
                f"{log[-2000:]}")


@contextmanager
def _prometheus_on(port: int, srv: Runner | list[Runner], tmp_path: Path
                   ) -> Iterator[str | None]:
    """Prometheus on `port`, scraping `srv` (one server or several) each SCRAPE with the
    token, once it answers ready, or None where it exited first."""
    tmp_path.mkdir()
    config = tmp_path / "prometheus.yml"
    targets = ", ".join(f"'127.0.0.1:{s.port}'" for s in
                        (srv if isinstance(srv, list) else [srv]))
    config.write_text(
        f"global:\n  scrape_interval: {SCRAPE}\n  scrape_timeout: {SCRAPE}\n"
        "scrape_configs:\n  - job_name: runwatch\n"
        "    authorization:\n      type: Bearer\n"
        f"      credentials: {TOKEN}\n"
        f"    static_configs:\n      - targets: [{targets}]\n")
    assert PROMETHEUS is not None
    with (tmp_path / "prometheus.log").open("w") as log:
        proc = subprocess.Popen(
            [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{port}"], stdout=log, stderr=subprocess.STDOUT)
        base = f"http://127.0.0.1:{port}"

        def ready() -> bool:
            if proc.poll() is not None:
                return True  # exited: not to be waited for
            try:
                with urllib.request.urlopen(f"{base}/-/ready", timeout=5) as resp:
                    return bool(resp.status == 200)
            except OSError:
                return False

        try:
            wait_for(ready, what=f"Prometheus ready (its log: {log.name})",
                     deadline=DEADLINE_S, interval=0.2)
            yield base if proc.poll() is None else None
        finally:
            proc.terminate()
            proc.wait(timeout=30)


@pytest.mark.skipif(PROMETHEUS is None, reason="needs Debian's prometheus package")
def test_prometheus_scrapes_the_server(token_server: Runner, records: int,
                                       tmp_path: Path) -> None:
    with _prometheus(token_server, tmp_path) as base:
        want = {
            'runwatch_runs{phase="SUCCEEDED"}': 1,
            'runwatch_runs{phase="FAILED"}': 1,
            'runwatch_runs{phase="RUNNING"}': 1,
            'runwatch_runs{phase="QUEUED"}': 0,
            "runwatch_points_ingested_total": 2 * 5 + 4 + 1,  # loss and lr, loss, loss
            "runwatch_points_stored": 2 * 5 + 4 + 1,
            "runwatch_ingest_lag_seconds_count": records,
            'runwatch_health_findings_open{severity="critical"}': 1,
            "runwatch_queue_depth": 0,
            'up{job="runwatch"}': 1,
        }
        for expr, value in want.items():
            wait_for(lambda e=expr, v=value: _value(base, e) == v,  # type: ignore[misc]
                     what=f"Prometheus to hold {expr} = {value} (last: {_value(base, expr)})",
                     deadline=DEADLINE_S, interval=QUERY_S)
        # the scrapes themselves were timed, under the route's template
        wait_for(lambda: (_value(base, 'runwatch_http_request_duration_seconds_count'
                                 '{route="/metrics",method="GET"}') or 0) >= 1,
                 what="the latency of /metrics scraped", deadline=DEADLINE_S, interval=QUERY_S)
        # a lag quantile comes out of the buckets: every record was indexed within a minute
        lag = _value(base, "histogram_quantile(0.99, runwatch_ingest_lag_seconds_bucket)")
        assert lag is not None and 0 <= lag <= 60
        # every query of the Grafana dashboard (runwatch grafana dashboard) has series
        for panel in grafana.dashboard()["panels"]:
            for target in panel.get("targets", []):
                expr = target["expr"].replace("$__rate_interval", "1m")
                wait_for(lambda e=expr: _query(base, e),  # type: ignore[misc]
                         what=f"series of the panel {panel['title']!r}: {expr}",
                         deadline=DEADLINE_S, interval=QUERY_S)


def _listed_open(srv: Runner, runs: list[str]) -> Counter[str]:
    """Open findings by severity as the API lists them, over `runs`."""
    auth = {"Authorization": f"Bearer {TOKEN}"}
    out: Counter[str] = Counter()
    for run in runs:
        got = http.get(f"{srv.url}/api/runs/{run}/health", headers=auth)
        assert got.status_code == 200, got.text
        out.update(f["severity"] for f in got.json()["findings"] if f["status"] == "open")
    return out


@pytest.mark.skipif(PROMETHEUS is None, reason="needs Debian's prometheus package")
def test_open_findings_count_as_listed(token_server: Runner, engine: Engine,
                                       make_run: MakeRun, tmp_path: Path) -> None:
    """Findings the API lists as one incident count once: an entropy that four rules judge
    (one signal at four speeds), a loss and a gradient norm that spike at one step (one
    event), a NaN in two metrics at once beside another NaN step that has passed."""
    make_run("entropy", steps=60, method="grpo",
             metrics=lambda i: {"entropy": 2.8 * math.exp(-i / 15)})
    make_run("spikes", steps=25, metrics=lambda i: {
        "loss": 3.0 if i == 20 else 2.0 - 0.01 * i, "grad_norm": 20.0 if i == 20 else 1.0})
    make_run("nan", steps=12, status="FAILED", metrics=lambda i: {
        "loss": math.nan if i in (3, 11) else 1.0 / (i + 1),
        "grad_norm": math.inf if i == 11 else 1.0})
    runs = ["entropy", "spikes", "nan"]
    auth = {"Authorization": f"Bearer {TOKEN}"}
    # a run that has ended in the index has all its points there (and judged)
    for run in runs:
        wait_for(lambda r=run: http.get(f"{token_server.url}/api/runs/{r}",  # type: ignore[misc]
                                        headers=auth).json().get("run", {}).get("status")
                 in ("SUCCEEDED", "FAILED"), what=f"run {run} indexed to its end")
    listed = _listed_open(token_server, runs)
    with engine.connect() as conn:
        f = s.findings.c
        stored = Counter(conn.execute(select(f.severity).where(f.status == "open")).scalars())
    # the listing merged some: the stored rows alone would count more
    assert sum(stored.values()) > sum(listed.values()), (stored, listed)
    assert listed["warning"] == 1 and listed["critical"] == 1, listed
    text = _metrics(token_server).splitlines()
    for severity in ("info", "warning", "critical"):
        assert f'runwatch_health_findings_open{{severity="{severity}"}} {listed[severity]}' \
            in text, text
    # the Grafana panel "Open health findings" reads the gauge by severity, as Prometheus
    # scraped it
    (panel,) = [p for p in grafana.dashboard()["panels"] if p["title"] == "Open health findings"]
    (target,) = panel["targets"]
    want = {sev: float(listed[sev]) for sev in ("info", "warning", "critical")}

    def by_severity(base: str) -> dict[str, float]:
        return {str(r["metric"]["severity"]): float(r["value"][1])  # type: ignore[index]
                for r in _query(base, target["expr"])}

    with _prometheus(token_server, tmp_path) as base:
        try:
            wait_for(lambda: by_severity(base) == want, what=f"Prometheus to hold {want}",
                     deadline=DEADLINE_S, interval=QUERY_S)
        except pytest.fail.Exception as exc:
            pytest.fail(f"{exc} (last: {by_severity(base)}; its scrapes: {_targets(base)})")
