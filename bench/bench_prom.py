"""Prometheus scrape benchmark: `GET /metrics` on an index of 1,000 runs holding 100,000
health findings, and what keeping its count costs where findings are written.

Each run's findings are written by the health store's own writer (`save`), as the engine
hands them over: 80% of them of rules whose findings a listing merges into incidents, 10%
open, at random steps and severities. The real server (uvicorn, in this process, indexing
nothing) is then scraped N times over HTTP, timed in the server (its own
`runwatch_http_request_duration_seconds` for /metrics: the time to answer, without the
client's round trip, ~40 ms on loopback here whatever the route) and by the client. The
gauge `runwatch_health_findings_open` must equal the open findings the listings hold
(`health_for_run`, one per incident), or the bench fails. Also timed: the gauge's query
alone (`open_by_severity`), and a `save` of one changed finding of a run (a batch that
updates an open finding: it counts the run's open findings again, `count_open`).
Figures: docs/benchmarks.md.

    python bench/bench_prom.py                            # 1,000 runs x 100 findings
    python bench/bench_prom.py --runs 100 --scrapes 5     # a quick look
    python bench/bench_prom.py --stores sqlite            # one store only

PostgreSQL comes from RUNWATCH_TEST_POSTGRES_URL (or --pg-url), in a new database that is
dropped afterwards (bench_team.postgres_database); without it only SQLite is measured.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import Engine as DbEngine
from sqlalchemy import insert, select, text

from bench_team import postgres_database
from runwatch.health import store as health_store
from runwatch.health.engine import Engine
from runwatch.health.findings import Finding
from runwatch.health.rules import CATALOGUE
from runwatch.health.rules.base import SEVERITIES
from runwatch.health.thresholds import NONE
from runwatch.server.runner import Runner, free_port
from runwatch.store import schema as s
from runwatch.store.db import open_engine
from verdict import add_strict, exit_status

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "build" / "bench" / "prom.json"
GAUGE = 'runwatch_health_findings_open{severity="'
SERVED = 'runwatch_http_request_duration_seconds_{}{{method="GET",route="/metrics"}}'
# the rules whose findings a listing may merge (store.incidents, store.same_signal)
MERGING = sorted(r.id for r in CATALOGUE
                 if r.detector in health_store.EVENT_DETECTORS or r.signal is not None)
OTHER = sorted(r.id for r in CATALOGUE if r.id not in MERGING)


def findings(rng: random.Random, n: int, merging: float, open_share: float) -> list[Finding]:
    out = []
    for _ in range(n):
        rule = rng.choice(MERGING) if rng.random() < merging else rng.choice(OTHER)
        first = rng.randint(0, 100_000)
        out.append(Finding(rule_id=rule, title=rule, severity=rng.choice(SEVERITIES),
                           status="open" if rng.random() < open_share else "resolved",
                           metric="loss", first_step=first,
                           last_step=first + rng.randint(0, 50), evidence={},
                           message="m" * 80, advice="a" * 80))
    return out


def build(engine: DbEngine, args: argparse.Namespace) -> float:
    """Runs and their findings, each run's through `save`; the seconds it took."""
    rng = random.Random(1)
    start = time.perf_counter()
    with engine.begin() as conn:
        conn.execute(insert(s.runs), [{
            "run_id": f"run-{i:05d}", "name": f"run-{i:05d}", "project": "bench",
            "tags": "[]", "method": "sft", "created_at": float(i), "status": "SUCCEEDED",
            "problems": 0, "manifest": "{}"} for i in range(args.runs)])
        pks = conn.execute(select(s.runs.c.pk)).scalars().all()
        for pk in pks:
            health_store.save(conn, pk, Engine("sft", {}, NONE, None),
                              findings(rng, args.findings, args.merging, args.open), 0,
                              now=0.0)
        if conn.dialect.name == "postgresql":
            conn.execute(text("ANALYZE"))
    return time.perf_counter() - start


def listed(engine: DbEngine) -> dict[str, int]:
    """The open findings every run's listing holds, by severity (the gauge's answer)."""
    out: Counter[str] = Counter()
    with engine.connect() as conn:
        for pk in conn.execute(select(s.runs.c.pk)).scalars():
            out.update(f["severity"] for f in health_store.health_for_run(conn, pk, now=0)
                       if f["status"] == "open")
    return dict(out)


def gauge(body: str) -> dict[str, int]:
    return {line[len(GAUGE):].split('"')[0]: int(line.split()[-1])
            for line in body.splitlines() if line.startswith(GAUGE) and int(line.split()[-1])}


def served(body: str) -> tuple[float, int]:
    """The seconds the server spent answering /metrics so far, and how many it answered."""
    values = dict(line.rsplit(" ", 1) for line in body.splitlines() if " " in line)
    return (float(values.get(SERVED.format("sum"), 0)),
            int(values.get(SERVED.format("count"), 0)))  # none before the first


def summary(ms: list[float]) -> dict[str, float]:
    ordered = sorted(ms)
    return {"median_ms": round(statistics.median(ms), 2),
            "p95_ms": round(ordered[int(0.95 * (len(ordered) - 1))], 2),
            "min_ms": round(ordered[0], 2)}


def timed(fn: Any, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t) * 1000)
    return out


def one_save(engine: DbEngine, finding_id: int) -> None:
    """A batch that moved one open finding's last step on (so its run is counted again)."""
    f = s.findings.c
    with engine.begin() as conn:
        row = conn.execute(select(f.run_pk, f.rule_id, f.severity, f.first_step, f.last_step)
                           .where(f.id == finding_id)).one()
        item = Finding(rule_id=row.rule_id, title=row.rule_id, severity=row.severity,
                       status="open", metric="loss", first_step=row.first_step,
                       last_step=row.last_step + 1, evidence={}, message="m", advice="a",
                       id=finding_id)
        health_store.save(conn, row.run_pk, Engine("sft", {}, NONE, None), [item], 0)


def one_store(db: str, args: argparse.Namespace) -> tuple[dict[str, Any], list[str]]:
    engine = open_engine(db)
    out: dict[str, Any] = {}
    wrong: list[str] = []
    try:
        out["build_s"] = round(build(engine, args), 1)
        want = listed(engine)
        with Runner(engine, port=free_port(), warm=False) as server, \
                httpx.Client(base_url=server.url, timeout=60) as client:
            bodies: list[str] = []
            out["scrape_client"] = summary(timed(
                lambda: bodies.append(client.get("/metrics").text), args.scrapes))
            out["gauge"] = gauge(bodies[-1])
            # a body holds the times of the scrapes before it: those after the first (cold)
            (s0, n0), (s1, n1) = served(bodies[0]), served(bodies[-1])
            out["scrape_server_mean_ms"] = round((s1 - s0) / (n1 - n0) * 1000, 2)
        out["listed"] = want
        if out["gauge"] != want:
            wrong.append(f"{engine.dialect.name}: the gauge says {out['gauge']}, the "
                         f"listings hold {want}")
        with engine.connect() as conn:
            out["open_by_severity"] = summary(timed(
                lambda: health_store.open_by_severity(conn), args.scrapes))
        with engine.connect() as conn:
            opened = conn.execute(select(s.findings.c.id)
                                  .where(s.findings.c.status == "open")).scalars().all()
        rng = random.Random(2)
        out["save_one_changed_finding"] = summary(timed(
            lambda: one_save(engine, rng.choice(opened)), args.scrapes))
    finally:
        engine.dispose()
    return out, wrong


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--findings", type=int, default=100, help="findings per run")
    ap.add_argument("--merging", type=float, default=0.8,
                    help="share of findings of rules that a listing merges")
    ap.add_argument("--open", type=float, default=0.1, help="share of findings open")
    ap.add_argument("--scrapes", type=int, default=30, help="at least 3")
    ap.add_argument("--stores", default="sqlite,postgresql")
    ap.add_argument("--pg-url", default=os.environ.get("RUNWATCH_TEST_POSTGRES_URL"))
    ap.add_argument("--target", type=float, default=50.0,
                    help="mean ms the server takes to answer a scrape; a miss is printed "
                         "(exit 1 with --strict)")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    add_strict(ap)
    args = ap.parse_args()
    out: dict[str, Any] = {"runs": args.runs, "findings": args.runs * args.findings}
    wrong: list[str] = []
    stores = args.stores.split(",")
    if "sqlite" in stores:
        with tempfile.TemporaryDirectory() as tmp:
            out["sqlite"], bad = one_store(str(Path(tmp) / "index.db"), args)
            wrong += bad
    if "postgresql" in stores:
        if not args.pg_url:
            print("postgresql: skipped (set RUNWATCH_TEST_POSTGRES_URL or --pg-url)")
        else:
            with postgres_database(args.pg_url) as url:
                out["postgresql"], bad = one_store(url, args)
                wrong += bad
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2))
    print(json.dumps(out, indent=2))
    missed = []
    for store in ("sqlite", "postgresql"):
        if store in out:
            took = out[store]["scrape_server_mean_ms"]
            print(f"{store}: GET /metrics over {args.runs:,} runs and "
                  f"{out['findings']:,} findings: {took} ms in the server (target <= "
                  f"{args.target:g} ms), median {out[store]['scrape_client']['median_ms']} ms "
                  f"at the client; a save of one changed finding: median "
                  f"{out[store]['save_one_changed_finding']['median_ms']} ms")
            if took > args.target:
                missed.append(f"{store} scrape {took} ms in the server > {args.target:g} ms")
    print(f"figures in {args.out}")
    return exit_status(missed, args.strict, wrong)


if __name__ == "__main__":
    sys.exit(main())
