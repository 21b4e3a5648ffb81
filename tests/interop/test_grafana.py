"""`runwatch runs grafana RUN` and `runwatch grafana dashboard`, run as the real command
line (once each; the other checks run the same app in this process); the dashboard is
checked against the panels, queries, layout, time range and variables written out here,
read back with Grafana's own typed dashboard model (grafana-foundation-sdk), and its
queries are run by a real Prometheus in test_prometheus.py."""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from grafana_foundation_sdk.models import dashboard as grafana_model
from sqlalchemy import select

from runwatch.interop import grafana
from runwatch.rundir import append
from runwatch.rundir import format as fmt
from runwatch.sdk import init
from runwatch.store import schema as s
from runwatch.store.db import open_engine
from tests.support import MakeRun, wait_for
from tests.support.cli import cli_here, run_cli
from tests.support.rundirs import write_manifest

GRAFANA = "http://grafana.example:3000/"


def _link(runs_dir: Path, run: str, *extra: str, env: dict[str, str] | None = None,
          process: bool = False) -> tuple[str, dict[str, list[str]], str]:
    """The link `runs grafana RUN` prints, its query, and all it prints: as the real
    command line with `process`, else in this process (the same app, without a new
    interpreter's imports)."""
    cli = run_cli if process else cli_here
    cli("index", str(runs_dir))
    out = cli("runs", "grafana", run, "--dir", str(runs_dir), *extra, env=env).stdout
    url = out.splitlines()[0]
    return url, parse_qs(urlsplit(url).query), out


def _times(runs_dir: Path, run_id: str) -> tuple[float, float | None]:
    engine = open_engine(runs_dir / ".runwatch" / "index.db")
    try:
        with engine.connect() as conn:
            row = conn.execute(select(s.runs.c.started_at, s.runs.c.ended_at)
                               .where(s.runs.c.run_id == run_id)).one()
    finally:
        engine.dispose()
    return row.started_at, row.ended_at


def test_the_link_covers_a_finished_run(runs_dir: Path, make_run: MakeRun) -> None:
    run_id = make_run("done", steps=3)
    url, query, out = _link(runs_dir, "done", "--grafana-url", GRAFANA,
                            "--server", "http://127.0.0.1:9000/", process=True)
    assert url.startswith(f"http://grafana.example:3000/d/{grafana.UID}/")
    start, end = _times(runs_dir, run_id)
    assert end is not None
    assert query["from"] == [str(int((start - grafana.MARGIN_S) * 1000))]
    assert query["to"] == [str(int((end + grafana.MARGIN_S) * 1000))]
    assert query["var-run"] == [run_id]
    assert query["var-runwatch_url"] == ["http://127.0.0.1:9000"]
    assert "from its start to its end" in out and "project default" in out


def test_an_attempt_s_link_covers_that_attempt(runs_dir: Path, make_run: MakeRun) -> None:
    """A retried run: --attempt 1 ends where the first attempt failed, --attempt 2 is the
    run that is still training (to now)."""
    first = init(name="retried", dir=runs_dir, method="sft")
    first.log({"loss": 1.0}, step=0)
    first.finish("FAILED")
    again = init(name="retried", dir=runs_dir, method="sft", resume=True)
    again.log({"loss": 0.9}, step=1)
    # the SDK writes in the background: attempt 2's start and its point on disk first
    folder = runs_dir / "retried"
    wait_for(lambda: len(list(append.records(folder / fmt.EVENTS))) == 3
             and len(list(append.records(folder / fmt.METRICS))) == 2,
             what="attempt 2's start and point on disk")
    cli_here("index", str(runs_dir))
    engine = open_engine(runs_dir / ".runwatch" / "index.db")
    try:
        with engine.connect() as conn:
            ev = conn.execute(select(s.events.c.phase, s.events.c.ts, s.events.c.attempt)
                              .order_by(s.events.c.seq)).all()
    finally:
        engine.dispose()
    failed_at = next(e.ts for e in ev if e.phase == "FAILED")
    _, one, out = _link(runs_dir, "retried", "--attempt", "1", "--grafana-url", GRAFANA)
    assert one["to"] == [str(int((failed_at + grafana.MARGIN_S) * 1000))]
    assert "attempt 1 of run retried" in out and "FAILED" in out
    _, two, out = _link(runs_dir, "retried", "--attempt", "2", "--grafana-url", GRAFANA)
    assert two["to"] == ["now"] and int(two["from"][0]) > int(one["from"][0])
    missing = cli_here("runs", "grafana", "retried", "--attempt", "3", "--dir", str(runs_dir),
                       "--grafana-url", GRAFANA, check=False)
    assert missing.returncode == 2 and "no attempt 3" in missing.stderr
    again.finish("SUCCEEDED")


def test_an_attempt_no_worker_has_started_links_from_its_queue(runs_dir: Path) -> None:
    """A retried job's attempt 2, queued: `--attempt 2` said "run has no attempt 2 — its
    attempts: 1, 2" once an attempt's start became its worker's start (found in review)."""
    t0 = 1_700_000_000.0
    folder = write_manifest(runs_dir / "requeued")
    (folder / fmt.EVENTS).write_text("".join(json.dumps(e) + "\n" for e in [
        {"seq": 0, "ts": t0, "phase": "QUEUED", "attempt": 1},
        {"seq": 1, "ts": t0 + 1, "phase": "PREPARING", "attempt": 1, "worker": "w"},
        {"seq": 2, "ts": t0 + 2, "phase": "RUNNING"},
        {"seq": 3, "ts": t0 + 5, "phase": "FAILED"},
        {"seq": 4, "ts": t0 + 9, "phase": "QUEUED", "attempt": 2}]))
    _, two, out = _link(runs_dir, "requeued", "--attempt", "2", "--grafana-url", GRAFANA)
    assert two["from"] == [str(int((t0 + 9 - grafana.MARGIN_S) * 1000))], out
    assert two["to"] == ["now"] and "attempt 2 of run requeued" in out and "QUEUED" in out


def test_the_link_of_a_training_run_ends_now(runs_dir: Path, make_run: MakeRun) -> None:
    live = init(name="live", dir=runs_dir, method="sft")
    live.log({"loss": 1.0}, step=0)
    url, query, out = _link(runs_dir, "live", env={grafana.ENV_VAR: GRAFANA})
    assert url.startswith(GRAFANA)
    assert query["to"] == ["now"]
    assert query["var-run"] == [live.id]
    assert "to now" in out
    live.finish("SUCCEEDED")


def test_without_a_grafana_address_it_says_how_to_give_one(runs_dir: Path,
                                                           make_run: MakeRun) -> None:
    make_run("done", steps=2)
    proc = cli_here("runs", "grafana", "done", "--dir", str(runs_dir), check=False,
                    env={grafana.ENV_VAR: ""})
    assert proc.returncode == 2
    assert "--grafana-url" in proc.stderr and grafana.ENV_VAR in proc.stderr


def test_grafana_under_a_sub_path_keeps_its_prefix(runs_dir: Path, make_run: MakeRun) -> None:
    make_run("done", steps=2)
    for given in ("https://example.org/grafana", "https://example.org/grafana/"):
        url, query, _ = _link(runs_dir, "done", "--grafana-url", given)
        assert urlsplit(url).path == f"/grafana/d/{grafana.UID}/{grafana.SLUG}"
        assert url.startswith("https://example.org/grafana/d/") and query["orgId"] == ["1"]


def test_a_page_s_address_or_another_scheme_is_refused(runs_dir: Path,
                                                        make_run: MakeRun) -> None:
    """A dashboard's address pasted from the browser was appended to (".../d/abc?x=1/d/
    runwatch/..."), and ftp:// was taken: both are refused, from the option and from
    RUNWATCH_GRAFANA_URL alike, saying to give Grafana's base address."""
    make_run("done", steps=2)
    cli_here("index", str(runs_dir))
    pages = {"http://localhost:3000/d/abc?x=1": "http://localhost:3000",
             "http://localhost:3000/d/abc/slug": "http://localhost:3000",
             "https://example.org/grafana/d/abc": "https://example.org/grafana",
             "http://localhost:3000/?orgId=1": "http://localhost:3000",
             "http://localhost:3000/explore": "http://localhost:3000",
             "https://example.org/grafana/dashboards/f/abc": "https://example.org/grafana"}
    for given, base in pages.items():
        for how in (["--grafana-url", given], []):
            proc = cli_here("runs", "grafana", "done", "--dir", str(runs_dir), *how,
                            env={grafana.ENV_VAR: given}, check=False)
            said = " ".join(proc.stderr.split())
            assert proc.returncode == 2 and proc.stdout == "", (given, proc.stdout)
            assert "give Grafana's base URL" in said and f"(here: {base})" in said, said
    for given in ("ftp://x", "localhost:3000", "http://", "http://host:99999",
                  "http://me:secret@localhost:3000"):
        proc = cli_here("runs", "grafana", "done", "--dir", str(runs_dir), "--grafana-url",
                        given, check=False)
        said = " ".join(proc.stderr.split())
        assert proc.returncode == 2 and proc.stdout == "", (given, proc.stdout)
        assert "Grafana's base URL" in said or "give its base URL" in said, said


# What the dashboard shows, written out here rather than read from grafana.PANELS, so that
# a change to the builder (or to the SDK under it) that changes a panel fails here.
RATE = "[$__rate_interval]"
SERIES_PANELS = [  # (title, unit, [(refId, PromQL, legend)]), left to right, top to bottom
    ("Runs by phase", "short", [("A", "max by (phase) (runwatch_runs)", "{{phase}}")]),
    ("Open health findings", "short",
     [("A", "max by (severity) (runwatch_health_findings_open)", "{{severity}}")]),
    ("Points indexed per second", "short",
     [("A", f"rate(runwatch_points_ingested_total{RATE})", "{{instance}}")]),
    ("Ingest lag (p50, p95)", "s", [
        ("A", "histogram_quantile(0.5, sum by (le) "
              f"(rate(runwatch_ingest_lag_seconds_bucket{RATE})))", "p50"),
        ("B", "histogram_quantile(0.95, sum by (le) "
              f"(rate(runwatch_ingest_lag_seconds_bucket{RATE})))", "p95")]),
    ("Queue depth", "short", [("A", "max(runwatch_queue_depth)", "jobs waiting")]),
    ("Request latency p95 by route", "s", [
        ("A", "histogram_quantile(0.95, sum by (le, route, method) "
              f"(rate(runwatch_http_request_duration_seconds_bucket{RATE})))",
         "{{method}} {{route}}")]),
]
VARIABLES = [  # (name, type, label, query: the data source's type or the box's default)
    ("datasource", "datasource", "Prometheus", "prometheus"),
    ("run", "textbox", "Run", ""),
    ("runwatch_url", "textbox", "runwatch", "http://127.0.0.1:8765"),
]
# Grafana's own variables a query may name besides the dashboard's
BUILT_IN = {"__rate_interval", "__interval", "__range"}


def test_the_dashboard_file_is_grafanas_dashboard_model(tmp_path: Path) -> None:
    out = tmp_path / "runwatch.json"
    run_cli("grafana", "dashboard", "-o", str(out))
    board = json.loads(out.read_text())
    assert board == json.loads(cli_here("grafana", "dashboard").stdout)
    # Grafana's own dashboard model (generated from its schema) reads it whole: every field
    # is one the schema has, so reading and writing it again changes nothing
    model = grafana_model.Dashboard.from_json(board)
    again = json.loads(json.dumps(model.to_json(), default=lambda o: o.to_json()))
    assert again == board


def test_the_dashboard_shows_the_expected_panels_queries_and_variables() -> None:
    board = json.loads(cli_here("grafana", "dashboard").stdout)
    assert (board["uid"], board["title"]) == ("runwatch", "runwatch")
    assert isinstance(board["schemaVersion"], int) and board["schemaVersion"] >= 36
    assert board["time"] == {"from": "now-6h", "to": "now"}
    assert (board["refresh"], board["timezone"]) == ("30s", "browser")
    assert [(v["name"], v["type"], v["label"], v["query"])
            for v in board["templating"]["list"]] == VARIABLES
    text, *series = board["panels"]
    assert (text["type"], text["title"], text["options"]["mode"]) == ("text", "Run", "markdown")
    assert text["gridPos"] == {"h": 3, "w": 24, "x": 0, "y": 0}
    assert "(${runwatch_url}/runs?run=${run})" in text["options"]["content"]
    source = {"type": "prometheus", "uid": "${datasource}"}
    got = []
    for n, panel in enumerate(series):
        assert panel["type"] == "timeseries" and panel["datasource"] == source
        assert panel["gridPos"] == {"h": 8, "w": 12, "x": 12 * (n % 2), "y": 3 + 8 * (n // 2)}
        assert panel["options"]["legend"]["showLegend"] is True
        assert all(t["datasource"] == source for t in panel["targets"])
        got.append((panel["title"], panel["fieldConfig"]["defaults"]["unit"],
                    [(t["refId"], t["expr"], t["legendFormat"]) for t in panel["targets"]]))
    assert got == SERIES_PANELS
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids))
    # every variable the panels name is one the dashboard defines (or Grafana's own)
    named = set(re.findall(r"\$\{?(\w+)", json.dumps(board["panels"])))
    assert named - BUILT_IN == {name for name, *_ in VARIABLES}
    # the run links fill the dashboard's own variables
    query = parse_qs(urlsplit(grafana.run_link(GRAFANA, "r1", 0.0, None, "http://rw")).query)
    assert {k[4:] for k in query if k.startswith("var-")} <= {n for n, *_ in VARIABLES}
