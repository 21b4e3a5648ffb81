"""Job-control benchmark: how soon a submitted job's first metric is on screen, and how
many queued jobs per second workers claim, on SQLite and on PostgreSQL.

First metric: `runwatch ui` (the server and its embedded worker, as `make demo` runs it)
over a fresh runs folder. Each job is submitted with POST /api/jobs, as the web app's New
job page does: a Python command that calls `runwatch.init()`, logs one metric and keeps
running for a second. The clock stops when GET /api/runs/{run}/metrics/keys (what the
run page loads; asked every 0.1 s) first lists the metric; the next job is submitted
once this one has ended, so every job meets an idle worker. Each job's time is split,
from its events and metric record, into queue (submit → the worker's PREPARING event),
start (→ the metric's timestamp in the process) and show (→ on screen: the SDK's flush,
the indexer, the poll).

Claim rate: N jobs submitted into a fresh index (runwatch.jobs.submit, folders and all;
its time per job is reported apart), then C claiming processes call store.jobs.claim,
each in its own transaction, until none is left; jobs/s = N / the time from the first
claim to the last.
Every job must be claimed exactly once. PostgreSQL: a database of its own, made and
dropped here, on the server of RUNWATCH_TEST_POSTGRES_URL, else the local cluster's
socket (.ci/postgres starts it); "skipped: no PostgreSQL" when neither answers.

    python bench/bench_jobs.py                      # 5 jobs on screen, 300 claimed
    python bench/bench_jobs.py --jobs 2 --claims 20 --claimers 1 2
"""

from __future__ import annotations

import argparse
import getpass
import json
import multiprocessing as mp
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import create_engine, make_url, text

from bench_streams import wait_until
from runwatch.jobs.spec import command_spec
from runwatch.jobs.submit import submit
from runwatch.rundir import format as fmt
from runwatch.rundir.jsonl import loads_line
from runwatch.server.runner import free_port
from runwatch.store import jobs as store_jobs
from runwatch.store.db import open_engine

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "build" / "bench" / "jobs.json"
DEADLINE_S = 300.0
JOB_CODE = ("import time, runwatch\n"
            "run = runwatch.init(project='bench')\n"
            "run.log({'loss': 1.0}, step=0)\n"
            "time.sleep(1.0)\n"
            "run.finish()\n")


def _records(path: Path) -> list[dict[str, Any]]:
    return [loads_line(line) for line in path.read_bytes().splitlines() if line.strip()]


@contextmanager
def ui_server(runs: Path) -> Iterator[httpx.Client]:
    """`runwatch ui runs` in a session of its own; its API client."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "runwatch", "ui", str(runs), "--port",
                             str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30)

    def up() -> bool:
        try:
            return client.get("/api/server").status_code == 200
        except httpx.TransportError:
            return False

    try:
        wait_until("runwatch ui to answer", up)
        yield client
    finally:
        client.close()
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def first_metric(jobs: int) -> dict[str, Any]:
    """Submit `jobs` jobs one after another; each one's seconds from submit to screen."""
    rows: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        runs = Path(tmp) / "runs"
        runs.mkdir()
        with ui_server(runs) as api:
            for i in range(jobs):
                name = f"first-metric-{i}"
                body = {"kind": "command", "argv": [sys.executable, "-c", JOB_CODE],
                        "name": name}
                sent = time.time()
                res = api.post("/api/jobs", json=body)
                assert res.status_code == 201, res.text
                wait_until(f"{name}'s first metric", lambda n=name: api.get(
                    f"/api/runs/{n}/metrics/keys").json()["keys"])
                seen = time.time()
                wait_until(f"{name} to end", lambda n=name: api.get(f"/api/runs/{n}").json()
                           ["run"]["status"] in fmt.TERMINAL_PHASES)
                started = next(e["ts"] for e in _records(runs / name / fmt.EVENTS)
                               if e["phase"] == "PREPARING")
                logged = _records(runs / name / fmt.METRICS)[0]["ts"]
                rows.append({"total_s": seen - sent, "queue_s": started - sent,
                             "start_s": logged - started, "show_s": seen - logged})
    return {"jobs": jobs, "per_job": [{k: round(v, 3) for k, v in r.items()} for r in rows],
            **{f"p50_{k}": round(statistics.median(r[k] for r in rows), 3) for k in rows[0]}}


def _claimer(url: str, worker: str, start: Any, out: Any) -> None:
    engine = open_engine(url, migrate=False)
    got: list[int] = []
    start.wait()
    began = time.perf_counter()
    while True:
        with engine.begin() as conn:
            claim = store_jobs.claim(conn, worker, 1, time.time())
        if claim is None:
            break
        got.append(claim.run_pk)
    out.put((began, time.perf_counter(), got))
    engine.dispose()


def claim_rate(url: str, jobs: int, claimers: list[int]) -> dict[str, Any]:
    """For each count of claiming processes: `jobs` queued jobs claimed, in jobs/s."""
    out: dict[str, Any] = {}
    engine = open_engine(url)
    ctx = mp.get_context("fork")
    with tempfile.TemporaryDirectory() as tmp:
        for n in claimers:
            runs = Path(tmp) / f"runs-{n}"
            t = time.perf_counter()
            pks = [submit(engine, runs, command_spec(["true"], cwd=tmp), f"c{n}-{i}").run_pk
                   for i in range(jobs)]
            submit_ms = (time.perf_counter() - t) * 1000 / jobs
            start, results = ctx.Barrier(n), ctx.Queue()
            procs = [ctx.Process(target=_claimer, args=(url, f"bench-{n}-{i}", start, results))
                     for i in range(n)]
            for p in procs:
                p.start()
            got = [results.get(timeout=DEADLINE_S) for _ in procs]
            for p in procs:
                p.join()
            claimed = sorted(pk for _, _, pks_ in got for pk in pks_)
            if claimed != sorted(pks):
                raise SystemExit(f"{n} claimers: claimed {len(claimed)} of {jobs} jobs, "
                                 f"{len(set(claimed))} distinct")
            wall = max(e for _, e, _ in got) - min(b for b, _, _ in got)
            out[f"{n}_claimers"] = {"jobs_per_s": round(jobs / wall, 1),
                                    "wall_s": round(wall, 3),
                                    "submit_ms_per_job": round(submit_ms, 1)}
    engine.dispose()
    return out


def postgres_server() -> tuple[str | None, str]:
    """The URL of a PostgreSQL server to bench on, or None and why there is none."""
    url = os.environ.get("RUNWATCH_TEST_POSTGRES_URL")
    if not url:
        port_file = ROOT / ".ci" / ".postgres-port"
        port = port_file.read_text().strip() if port_file.exists() else "5432"
        url = (f"postgresql+psycopg://{getpass.getuser()}@/postgres"
               f"?host=/var/run/postgresql&port={port}")
    try:
        probe = create_engine(url, connect_args={"connect_timeout": 3})
        with probe.connect() as conn:
            conn.execute(text("SELECT 1"))
        probe.dispose()
    except Exception as exc:  # any failure to connect means: no PostgreSQL to bench on
        why = str(getattr(exc, "orig", None) or exc).strip().splitlines() or [type(exc).__name__]
        return None, f"skipped: no PostgreSQL ({why[0]})"
    return url, ""


@contextmanager
def postgres_database(server: str) -> Iterator[str]:
    """A new, empty database on `server`, dropped afterwards."""
    name = f"runwatch_bench_{uuid.uuid4().hex[:12]}"
    admin = create_engine(server, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(server).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=5, help="jobs timed from submit to screen")
    ap.add_argument("--claims", type=int, default=300, help="queued jobs to claim")
    ap.add_argument("--claimers", type=int, nargs="+", default=[1, 4])
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = ap.parse_args()
    out: dict[str, Any] = {"load_average": [round(x, 1) for x in os.getloadavg()]}
    out["first_metric"] = first_metric(args.jobs)
    with tempfile.TemporaryDirectory() as tmp:
        out["claim_sqlite"] = claim_rate(str(Path(tmp) / "index.db"), args.claims,
                                         args.claimers)
    server, why = postgres_server()
    if server is None:
        out["claim_postgresql"] = why
    else:
        with postgres_database(server) as url:
            out["claim_postgresql"] = claim_rate(url, args.claims, args.claimers)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2))
    print(json.dumps(out, indent=2))
    fm = out["first_metric"]
    print(f"\nsubmit -> first metric on screen: p50 {fm['p50_total_s']} s over {args.jobs} "
          f"jobs (queue {fm['p50_queue_s']} s, start {fm['p50_start_s']} s, show "
          f"{fm['p50_show_s']} s)")
    for db in ("sqlite", "postgresql"):
        got = out[f"claim_{db}"]
        rates = (got if isinstance(got, str) else ", ".join(
            f"{k.split('_')[0]} claimer(s) {v['jobs_per_s']} jobs/s" for k, v in got.items()))
        print(f"claim rate on {db}: {rates}")
    print(f"results in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
