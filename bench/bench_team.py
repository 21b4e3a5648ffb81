"""Team-server benchmark: many live runs streaming over HTTP, and the list of 10,000 runs.

For each store (PostgreSQL, then SQLite) the real `runwatch server --db …` runs in its own
process, and a load generator in another process (asyncio, one keep-alive HTTP/1.1
connection per run, as each run's SDK holds its own) plays N live runs the
way the SDK's sender streams them: every run logs one step a second with M metrics, and
its sender posts what is pending every 0.5 s as one gzip request (`{"batches": [...]}`,
the run's manifest with each batch), records with their seq, retrying with backoff
until the server stores them. After S seconds the runs stop logging, the senders deliver
what is left, and the store is counted: points lost (logged but not stored) and stored
twice (impossible by the key, counted anyway). Lag is, per record, the time from its
`ts` (when it was logged) to the answer that stored it, so it includes the sender's
0.5 s wait. Server CPU is the server process's user + system time over the streaming
window (psutil), in cores.

Then the store is filled to 10,000 runs (in 10 projects) and `GET /api/runs` is timed:
the first page (100 runs), a page deep in the list (by cursor), one project's first
page, and a search. PostgreSQL's figures are given beside SQLite's, as ratios, from the
same invocation.

    python bench/bench_team.py                          # 500 runs x 20 metrics x 60 s
    python bench/bench_team.py --runs 50 --seconds 10   # a quick look
    python bench/bench_team.py --stores sqlite          # one store only

PostgreSQL comes from RUNWATCH_TEST_POSTGRES_URL (or --pg-url): the bench makes a new
database on that server and drops it afterwards. Without it only SQLite is measured,
and the output says so.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import os
import random
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
import orjson
import psutil
from sqlalchemy import create_engine, func, insert, make_url, select, text

from runwatch.server.runner import free_port
from runwatch.store import schema as s
from runwatch.store.db import open_engine
from runwatch.store.runs import manifest_json

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "build" / "bench" / "team.json"
SEND_INTERVAL_S = 0.5  # the SDK sender's (runwatch.sdk.sender.Sender.interval)
BACKOFF_MIN_S, BACKOFF_MAX_S = 0.5, 15.0
DRAIN_S = 120.0  # how long senders may take to deliver what is left after the last step
LIST_RUNS = 10_000
PROJECTS = 10
LIST_REQUESTS = 200
GZIP_LEVEL = 1  # the sender's


# --- the load generator (its own process: `--load URL`) ------------------------------


class Conn:
    """One run's HTTP/1.1 keep-alive connection to the server. The generator stands in for
    500 machines, so it speaks HTTP over asyncio's streams itself: an async client's pool
    of 500 connections cost it most of a core here, taken from the server it measures."""

    def __init__(self, url: str) -> None:
        host, _, port = url.removeprefix("http://").partition(":")
        self.host, self.port = host, int(port or 80)
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def post(self, path: str, body: bytes, headers: dict[str, str]) -> int:
        """The answer's status; OSError / asyncio errors when the request failed (the
        connection is closed then, and opened again by the next request)."""
        try:
            return await asyncio.wait_for(self._post(path, body, headers), 30.0)
        except BaseException:
            self.close()
            raise

    async def _post(self, path: str, body: bytes, headers: dict[str, str]) -> int:
        if self.writer is None or self.reader is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        self.writer.write(f"POST {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n{head}"
                          f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
        await self.writer.drain()
        status = int((await self.reader.readline()).split()[1])
        length, chunked, close = 0, False, False
        while (line := await self.reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode("latin-1").partition(":")
            name, value = name.strip().lower(), value.strip().lower()
            if name == "content-length":
                length = int(value)
            elif name == "transfer-encoding" and "chunked" in value:
                chunked = True
            elif name == "connection" and value == "close":
                close = True
        if chunked:
            while (size := int((await self.reader.readline()).strip() or b"0", 16)):
                await self.reader.readexactly(size + 2)
            await self.reader.readline()
        else:
            await self.reader.readexactly(length)
        if close:
            self.close()
        return status

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None


class Live:
    """One run: a loop that logs a step a second, and its sender."""

    def __init__(self, index: int, metrics: int, out: dict[str, Any]) -> None:
        self.run_id = f"live-{index:04d}-{uuid.uuid4().hex[:8]}"
        self.manifest = orjson.dumps({"schema_version": 1, "run_id": self.run_id,
                                      "name": f"live-{index:04d}",
                                      "project": f"team-{index % PROJECTS}",
                                      "created_at": time.time(), "method": "grpo"})
        self.names = [f"train/m{i:02d}" for i in range(metrics)]
        self.pending: list[dict[str, Any]] = []
        self.events: list[dict[str, Any]] = [{"seq": 0, "ts": time.time(),
                                              "phase": "RUNNING"}]
        self.logged = 0
        self.out = out

    def log(self, step: int) -> None:
        rec: dict[str, Any] = {"seq": step, "step": step, "ts": time.time()}
        rec.update(zip(self.names, (random.random() for _ in self.names), strict=True))
        self.pending.append(rec)
        self.logged += 1

    def body(self) -> tuple[bytes, int, int]:
        head = b'{"run_id":"' + self.run_id.encode() + b'","manifest":' + self.manifest
        parts = []
        n_ev, n_m = len(self.events), len(self.pending)
        if self.events:
            parts.append(head + b',"file":"events.jsonl","records":'
                         + orjson.dumps(self.events) + b"}")
        if self.pending:
            parts.append(head + b',"file":"metrics.jsonl","records":'
                         + orjson.dumps(self.pending) + b"}")
        raw = b'{"batches":[' + b",".join(parts) + b"]}"
        return gzip.compress(raw, GZIP_LEVEL, mtime=0), n_ev, n_m

    async def send(self, client: Conn) -> None:
        """Post what is pending until the server stores it, backing off on failure."""
        wait = BACKOFF_MIN_S
        while self.pending or self.events:
            data, n_ev, n_m = self.body()
            start = time.time()
            try:
                status = await client.post("/api/ingest", data, {
                    "Content-Type": "application/json", "Content-Encoding": "gzip"})
                ok = status == 200
                if not ok:
                    self.out["errors"][str(status)] = self.out["errors"].get(str(status), 0) + 1
            except (TimeoutError, OSError, ValueError, IndexError,
                    asyncio.IncompleteReadError) as exc:
                ok = False
                name = type(exc).__name__
                self.out["errors"][name] = self.out["errors"].get(name, 0) + 1
            done = time.time()
            if ok:
                self.out["request_ms"].append((done - start) * 1000)
                self.out["lag_ms"].extend((done - r["ts"]) * 1000 for r in self.pending[:n_m])
                self.out["requests"] += 1
                del self.pending[:n_m]
                del self.events[:n_ev]
                return
            self.out["retries"] += 1
            await asyncio.sleep(wait * random.uniform(0.5, 1.0))
            wait = min(wait * 2, BACKOFF_MAX_S)

    async def play(self, client: Conn, seconds: float, start: float) -> None:
        """Log a step a second for `seconds` (never waiting for the sender, as the SDK's
        log() does not), while the sender posts what is pending every 0.5 s."""
        first = start + random.random()  # runs do not tick in step
        sender = asyncio.create_task(self.sender(client, start + seconds,
                                                 first + SEND_INTERVAL_S * random.random()))
        step = 0
        while first + step < start + seconds:
            await asyncio.sleep(max(0.0, first + step - time.time()))
            self.log(step)
            step += 1
        await sender

    async def sender(self, client: Conn, stop: float, wake: float) -> None:
        while True:
            await asyncio.sleep(max(0.0, wake - time.time()))
            if self.pending or self.events:
                await self.send(client)
            elif time.time() >= stop:
                return
            if time.time() >= stop + DRAIN_S:
                return
            wake = max(wake + SEND_INTERVAL_S, time.time())


async def _load(url: str, runs: int, metrics: int, seconds: float) -> dict[str, Any]:
    out: dict[str, Any] = {"errors": {}, "retries": 0, "requests": 0, "request_ms": [],
                           "lag_ms": []}
    lives = [Live(i, metrics, out) for i in range(runs)]
    conns = [Conn(url) for _ in lives]
    start = time.time()
    try:
        await asyncio.gather(*(live.play(conn, seconds, start)
                               for live, conn in zip(lives, conns, strict=True)))
    finally:
        for conn in conns:
            conn.close()
    out["wall_s"] = time.time() - start
    out["runs"] = {live.run_id: live.logged for live in lives}
    out["undelivered"] = sum(len(live.pending) for live in lives)
    return out


def load_main(args: argparse.Namespace) -> int:
    cpu = time.process_time()
    out = asyncio.run(_load(args.load, args.runs, args.metrics, args.seconds))
    out["generator_cpu_s"] = time.process_time() - cpu
    Path(args.load_out).write_bytes(orjson.dumps(out))
    return 0


# --- the bench --------------------------------------------------------------------


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@contextmanager
def postgres_database(server_url: str) -> Iterator[str]:
    """A new, empty database on the PostgreSQL server of `server_url`, dropped at the end."""
    server = make_url(server_url)
    name = f"runwatch_bench_{uuid.uuid4().hex[:12]}"
    admin = create_engine(server, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield server.set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@contextmanager
def server_process(db: str) -> Iterator[tuple[str, psutil.Process]]:
    """`runwatch server --db db` on a free port, until the block ends."""
    open_engine(db).dispose()  # create the schema before timing anything
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "runwatch", "server", "--db", db,
                             "--port", str(port)], cwd=ROOT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{url}/api/runs?limit=1", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the server did not start on {url}")
            time.sleep(0.2)
        yield url, psutil.Process(proc.pid)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def cpu_s(proc: psutil.Process) -> float:
    t = proc.cpu_times()
    return float(t.user + t.system)


def backends_cpu_s(db: str) -> float | None:
    """CPU seconds of the PostgreSQL server processes serving database `db` (their titles
    name it), or None for SQLite (it runs inside the server process)."""
    if not db.startswith("postgresql"):
        return None
    name = make_url(db).database or ""
    total = 0.0
    for p in psutil.process_iter(["cmdline"]):
        try:
            if any(name in part for part in p.info["cmdline"] or []):
                total += cpu_s(p)
        except psutil.Error:
            continue
    return total


def stream(url: str, proc: psutil.Process, db: str, args: argparse.Namespace
           ) -> dict[str, Any]:
    """The live-runs part: the generator process against the server, then the count."""
    with tempfile.TemporaryDirectory() as tmp:
        load_out = Path(tmp) / "load.json"
        cpu0, wall0, pg0 = cpu_s(proc), time.monotonic(), backends_cpu_s(db)
        subprocess.run([sys.executable, __file__, "--load", url, "--load-out", str(load_out),
                        "--runs", str(args.runs), "--metrics", str(args.metrics),
                        "--seconds", str(args.seconds)], check=True, cwd=ROOT)
        cpu1, wall1, pg1 = cpu_s(proc), time.monotonic(), backends_cpu_s(db)
        load = orjson.loads(load_out.read_bytes())
    engine = open_engine(db, migrate=False)
    with engine.connect() as conn:
        pks = dict(conn.execute(select(s.runs.c.run_id, s.runs.c.pk)).all())
        counts = dict(conn.execute(
            select(s.metric_keys.c.run_pk, func.sum(s.metric_keys.c.points))
            .group_by(s.metric_keys.c.run_pk)).all())
        stored_rows = conn.execute(select(func.count()).select_from(s.metric_points)).scalar()
    engine.dispose()
    logged = sum(load["runs"].values()) * args.metrics
    stored = sum(int(counts.get(pks.get(rid), 0) or 0) for rid in load["runs"])
    lost = sum(max(0, n * args.metrics - int(counts.get(pks.get(rid), 0) or 0))
               for rid, n in load["runs"].items())
    return {
        "runs": args.runs, "metrics": args.metrics, "seconds": args.seconds,
        "points_logged": logged, "points_stored": stored, "points_in_table": stored_rows,
        "points_lost": lost, "points_duplicated": max(0, int(stored_rows or 0) - logged),
        "points_per_s": round(stored / args.seconds),
        "requests": load["requests"], "retries": load["retries"], "errors": load["errors"],
        "lag_p50_ms": round(pct(load["lag_ms"], 0.5), 1),
        "lag_p99_ms": round(pct(load["lag_ms"], 0.99), 1),
        "lag_max_ms": round(max(load["lag_ms"], default=float("nan")), 1),
        "request_p50_ms": round(pct(load["request_ms"], 0.5), 1),
        "request_p99_ms": round(pct(load["request_ms"], 0.99), 1),
        "server_cpu_s": round(cpu1 - cpu0, 1),
        "server_cpu_us_per_point": round((cpu1 - cpu0) / max(stored, 1) * 1e6, 1),
        "server_cpu_us_per_request": round((cpu1 - cpu0) / max(load["requests"], 1) * 1e6),
        # PostgreSQL's own processes (connections opened and closed meanwhile not counted)
        "postgres_cpu_s": None if pg0 is None or pg1 is None else round(pg1 - pg0, 1),
        "postgres_cpu_us_per_point": (None if pg0 is None or pg1 is None
                                      else round((pg1 - pg0) / max(stored, 1) * 1e6, 1)),
        "server_cores": round((cpu1 - cpu0) / (wall1 - wall0), 2),
        "server_rss_mib": round(proc.memory_info().rss / 2**20),
        "generator_cpu_s": round(load["generator_cpu_s"], 1),
        "window_s": round(wall1 - wall0, 1),
    }


def fill_runs(db: str, total: int) -> int:
    """Add runs (manifests only, as upsert_run stores them) until the store holds `total`,
    in one statement; returns how many it holds."""
    engine = open_engine(db, migrate=False)
    with engine.begin() as conn:
        have = int(conn.execute(select(func.count()).select_from(s.runs)).scalar() or 0)
        base = time.time() - total * 60
        rows = []
        for i in range(have, total):
            manifest = {"schema_version": 1, "run_id": f"old-{i:05d}-{uuid.uuid4().hex[:6]}",
                        "name": f"sweep-{i % 37}-arm-{i:05d}", "project": f"team-{i % PROJECTS}",
                        "group": f"sweep-{i % 37}", "method": ("sft", "dpo", "grpo")[i % 3],
                        "base_model": "Qwen/Qwen2.5-0.5B", "dataset": "gsm8k",
                        "created_at": base + i * 60, "tags": ["bench"]}
            rows.append({"run_id": manifest["run_id"], "name": manifest["name"],
                         "project": manifest["project"], "group_name": manifest["group"],
                         "tags": '["bench"]', "method": manifest["method"],
                         "base_model": manifest["base_model"], "dataset": manifest["dataset"],
                         "created_at": manifest["created_at"], "status": "SUCCEEDED",
                         "problems": 0, "manifest": manifest_json(manifest)})
        if rows:
            conn.execute(insert(s.runs), rows)
    with engine.begin() as conn:
        held = int(conn.execute(select(func.count()).select_from(s.runs)).scalar() or 0)
        if conn.dialect.name == "postgresql":
            conn.execute(text("ANALYZE"))
    engine.dispose()
    return held


def list_bench(url: str, requests: int, total: int) -> dict[str, Any]:
    """Times of GET /api/runs on the full store: first page, deep page, project, search."""
    out: dict[str, Any] = {}
    with httpx.Client(base_url=url, timeout=60) as client:
        # walk to a page about half way down for the deep-cursor case
        cursor, seen = None, 0
        while seen < total // 2 and (cursor or not seen):
            body = client.get("/api/runs", params={"limit": 500, **(
                {"cursor": cursor} if cursor else {})}).json()
            seen += len(body["runs"])
            cursor = body["next_cursor"]
        cases: dict[str, dict[str, Any]] = {"first_page": {}, "deep_page": {"cursor": cursor},
                 "project_page": {"project": "team-3"}, "search": {"q": "arm-0421"}}
        for name, params in cases.items():
            times = []
            for _ in range(requests):
                t = time.perf_counter()
                resp = client.get("/api/runs", params=params)
                times.append((time.perf_counter() - t) * 1000)
                resp.raise_for_status()
            out[name] = {"p50_ms": round(statistics.median(times), 2),
                         "p99_ms": round(pct(times, 0.99), 2),
                         "runs": len(resp.json()["runs"])}
    return out


def one_store(kind: str, db: str, args: argparse.Namespace) -> dict[str, Any]:
    print(f"\n--- {kind}: {args.runs} live runs x {args.metrics} metrics x {args.seconds} s",
          flush=True)
    res: dict[str, Any] = {}
    with server_process(db) as (url, proc):
        res["stream"] = stream(url, proc, db, args)
        print(json.dumps(res["stream"]), flush=True)
        if not args.no_list:
            t = time.perf_counter()
            res["list_runs_held"] = fill_runs(db, args.list_runs)
            res["fill_s"] = round(time.perf_counter() - t, 1)
            res["list"] = list_bench(url, args.list_requests, args.list_runs)
            print(json.dumps(res["list"]), flush=True)
    return res


def ratio(a: Any, b: Any) -> str:
    try:
        return f"{a / b:.2f}"
    except (TypeError, ZeroDivisionError):
        return "-"


def report(out: dict[str, Any], list_runs: int) -> None:
    stores = [k for k in ("postgresql", "sqlite") if k in out]
    head = "| figure | " + " | ".join(stores) + (" | PG / SQLite |" if len(stores) == 2 else " |")
    print("\n" + head)
    print("|---" * (len(stores) + 1 + (len(stores) == 2)) + "|")
    rows = [("points logged", "stream", "points_logged"),
            ("points lost", "stream", "points_lost"),
            ("points stored twice", "stream", "points_duplicated"),
            ("requests / retries", "stream", None),
            ("ingest lag p50 ms", "stream", "lag_p50_ms"),
            ("ingest lag p99 ms", "stream", "lag_p99_ms"),
            ("request p99 ms", "stream", "request_p99_ms"),
            ("server CPU, cores", "stream", "server_cores"),
            ("server CPU s", "stream", "server_cpu_s"),
            ("server CPU µs per point", "stream", "server_cpu_us_per_point"),
            ("server CPU µs per request", "stream", "server_cpu_us_per_request"),
            ("PostgreSQL processes CPU s", "stream", "postgres_cpu_s"),
            ("PostgreSQL processes CPU µs per point", "stream", "postgres_cpu_us_per_point"),
            ("load generator CPU s", "stream", "generator_cpu_s")]
    for label, part, key in rows:
        if key is None:
            vals = [f"{out[k][part]['requests']} / {out[k][part]['retries']}" for k in stores]
            print(f"| {label} | " + " | ".join(vals) + (" | |" if len(stores) == 2 else " |"))
            continue
        vals = [out[k][part][key] for k in stores]
        r = f" | {ratio(vals[0], vals[1])} |" if len(stores) == 2 else " |"
        print(f"| {label} | " + " | ".join(f"{v:,}" if isinstance(v, int) else str(v)
                                            for v in vals) + r)
    if all("list" in out[k] for k in stores):
        for case in ("first_page", "deep_page", "project_page", "search"):
            for q in ("p50_ms", "p99_ms"):
                vals = [out[k]["list"][case][q] for k in stores]
                r = f" | {ratio(vals[0], vals[1])} |" if len(stores) == 2 else " |"
                print(f"| list of {list_runs:,}: {case} {q.replace('_ms', '')} ms | "
                      + " | ".join(str(v) for v in vals) + r)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=500)
    ap.add_argument("--metrics", type=int, default=20)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--stores", default="postgresql,sqlite")
    ap.add_argument("--pg-url", default=os.environ.get("RUNWATCH_TEST_POSTGRES_URL"))
    ap.add_argument("--no-list", action="store_true", help="skip the 10,000-run list")
    ap.add_argument("--list-runs", type=int, default=LIST_RUNS,
                    help="runs the store holds when the list is timed")
    ap.add_argument("--list-requests", type=int, default=LIST_REQUESTS)
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--load", help=argparse.SUPPRESS)  # the generator process: server URL
    ap.add_argument("--load-out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.load:
        return load_main(args)
    out: dict[str, Any] = {"load_average_before": [round(x, 1) for x in os.getloadavg()],
                           "cores": os.cpu_count()}
    stores = args.stores.split(",")
    if "postgresql" in stores:
        if not args.pg_url:
            print("postgresql: skipped (set RUNWATCH_TEST_POSTGRES_URL or --pg-url)")
        else:
            with postgres_database(args.pg_url) as url:
                out["postgresql"] = one_store("postgresql", url, args)
    if "sqlite" in stores:
        with tempfile.TemporaryDirectory() as tmp:
            out["sqlite"] = one_store("sqlite", str(Path(tmp) / "index.db"), args)
    out["load_average_after"] = [round(x, 1) for x in os.getloadavg()]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2))
    report(out, args.list_runs)
    print(f"\nload average before {out['load_average_before']}, after "
          f"{out['load_average_after']} on {out['cores']} cores; figures in {args.out}")
    lost = sum(out[k]["stream"]["points_lost"] for k in ("postgresql", "sqlite") if k in out)
    return 1 if lost else 0


if __name__ == "__main__":
    sys.exit(main())
