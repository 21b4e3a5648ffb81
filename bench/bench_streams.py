"""Live streams benchmark: many SSE clients on many live runs, against `runwatch ui`.

`runwatch ui` runs in its own process (its RSS is sampled once a second). A writer
process logs 50 runs through the SDK (10 steps/s, 10 metrics each) for 60 s while 200
clients follow the runs' streams (4 per run) and 10 more follow the run list; each run
client reconnects from its last event id, as a browser does, if its stream drops.
Meanwhile `/api/runs` is asked 4 times a second. Recorded: /api/runs latency (p50/p99),
points lost, repeated or out of order (target 0 each), 5xx answers, reconnects, and
the server's RSS and CPU time (it indexes the runs too).

    python bench/bench_streams.py                               # 200 clients, 50 runs, 60 s
    python bench/bench_streams.py --runs 5 --clients 20 --seconds 10   # a quick look
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "build" / "bench" / "streams.json"
STEPS_PER_S = 10
KEYS = [f"metric_{j}" for j in range(9)]
GRACE_S = 60.0  # after the writers finish, how long clients may take to get the rest
WRITER = r"""
import sys, threading, time
from pathlib import Path
from runwatch.sdk import init
runs_dir, n_runs, steps, keys = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
runs = [init(name=f"live-{i:03d}", dir=runs_dir, method="grpo", flush_interval=0.1)
        for i in range(n_runs)]
go = runs_dir / "go"
while not go.exists():
    time.sleep(0.05)
def one(i, run):
    start = time.time()
    for step in range(steps):
        time.sleep(max(0.0, start + step / 10 - time.time()))
        run.log({"loss": i + 1 / (step + 1), **{k: step * 1e-3 + j for j, k in enumerate(keys)}},
                step=step)
    run.finish("SUCCEEDED")
threads = [threading.Thread(target=one, args=(i, r)) for i, r in enumerate(runs)]
for t in threads: t.start()
for t in threads: t.join()
"""


@dataclass
class Tally:
    """What the clients saw."""

    server_errors: int = 0
    other_errors: int = 0
    reconnects: int = 0
    steps: list[list[int]] = field(default_factory=list)
    list_finished: list[set[str]] = field(default_factory=list)
    gave_up: int = 0
    runs_ms: list[float] = field(default_factory=list)
    runs_failed: int = 0
    indexed_at: float | None = None  # when /api/runs first showed every run finished
    streamed_at: float | None = None  # when the last run client had every point


async def sse(resp: httpx.Response) -> AsyncIterator[dict[str, Any]]:
    current: dict[str, Any] = {}
    async for line in resp.aiter_lines():
        if line == "":
            if "data" in current:
                current["data"] = json.loads(current["data"])
                yield current
            current = {}
        elif not line.startswith(":") and ":" in line:
            key, _, value = line.partition(":")
            current[key] = value[1:] if value.startswith(" ") else value


async def follow_run(client: httpx.AsyncClient, name: str, cursor: str, steps: int,
                     tally: Tally) -> None:
    got: list[int] = []
    tally.steps.append(got)
    while True:
        try:
            async with client.stream("GET", f"/api/runs/{name}/stream",
                                     params={"cursor": cursor}) as resp:
                if resp.status_code != 200:
                    tally.server_errors += resp.status_code >= 500
                    tally.other_errors += resp.status_code < 500
                    await asyncio.sleep(1.0)
                    continue
                async for event in sse(resp):
                    cursor = event.get("id", cursor)
                    if event["event"] == "points":
                        got.extend(p["step"] for p in event["data"])
                        if got and got[-1] == steps - 1:
                            return
        except httpx.HTTPError:
            pass
        tally.reconnects += 1


async def follow_list(client: httpx.AsyncClient, runs: int, tally: Tally) -> None:
    done: set[str] = set()
    tally.list_finished.append(done)
    async with client.stream("GET", "/api/stream/runs") as resp:
        tally.server_errors += resp.status_code >= 500
        async for event in sse(resp):
            if event["event"] == "run" and event["data"]["status"] == "SUCCEEDED":
                done.add(event["data"]["name"])
                if len(done) == runs:
                    return


async def until(deadline: float, work: Any, tally: Tally) -> None:
    """Run `work` until it ends or the deadline passes (a client that never got it all)."""
    try:
        await asyncio.wait_for(work, max(0.0, deadline - time.monotonic()))
    except (TimeoutError, httpx.HTTPError):
        tally.gave_up += 1


async def probe(client: httpx.AsyncClient, runs: int, stop: asyncio.Event,
                tally: Tally) -> None:
    while not stop.is_set():
        t = time.perf_counter()
        try:
            resp = await client.get("/api/runs", params={"limit": runs})
            tally.runs_ms.append((time.perf_counter() - t) * 1000)
            if resp.status_code != 200:
                tally.runs_failed += 1
                tally.server_errors += resp.status_code >= 500
            elif tally.indexed_at is None and all(
                    r["status"] == "SUCCEEDED" for r in resp.json()["runs"]):
                tally.indexed_at = time.monotonic()
        except httpx.HTTPError:
            tally.runs_failed += 1
        await asyncio.sleep(0.25)


def cpu_s(pid: int) -> float:
    """CPU seconds (user + system) the process has used."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def rss_mib(pid: int, field_name: str = "VmRSS") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field_name + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


async def sample_rss(pid: int, stop: asyncio.Event, samples: list[float]) -> None:
    while not stop.is_set():
        samples.append(rss_mib(pid))
        await asyncio.sleep(1.0)


def wait_until(what: str, check: Any, timeout: float = 120.0) -> Any:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        got = check()
        if got:
            return got
        time.sleep(0.1)
    raise SystemExit(f"gave up waiting for {what}")


def pct(ordered: list[float], q: float) -> float:
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 1)


def run_bench(tmp: Path, n_runs: int, clients: int, list_clients: int,
              seconds: float) -> dict[str, Any]:
    runs_dir, db, port = tmp / "runs", tmp / "index.db", free_port()
    runs_dir.mkdir()
    token = secrets.token_urlsafe(24)
    server = subprocess.Popen([sys.executable, "-m", "runwatch", "ui", str(runs_dir),
                               "--db", str(db), "--port", str(port), "--token", token])
    steps = int(seconds * STEPS_PER_S)
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(runs_dir), str(n_runs),
                               str(steps), *KEYS])
    headers = {"Authorization": f"Bearer {token}"}
    url = f"http://127.0.0.1:{port}"
    try:
        with httpx.Client(base_url=url, headers=headers, timeout=30) as c:
            def listed() -> list[dict[str, Any]] | None:
                try:
                    body = c.get("/api/runs", params={"limit": n_runs + 10}).json()
                except (httpx.HTTPError, ValueError):
                    return None
                found = body.get("runs", [])
                return found if len(found) >= n_runs else None

            names = sorted(r["name"] for r in wait_until("the runs to be indexed", listed))
            cursors = {n: c.get(f"/api/runs/{n}").json()["cursor"] for n in names}
        tally = Tally()
        rss: list[float] = []
        cpu0 = cpu_s(server.pid)
        t0 = time.perf_counter()
        asyncio.run(clients_main(url, headers, cursors, steps, clients, list_clients,
                                 seconds, runs_dir, server.pid, tally, rss))
        took = time.perf_counter() - t0
        cpu = cpu_s(server.pid) - cpu0
        writer.wait(timeout=60)
        peak = max([rss_mib(server.pid, "VmHWM"), *rss])
    finally:
        for proc in (writer, server):
            proc.terminate()
            proc.wait(timeout=30)
    expected = steps * len(tally.steps)
    received = sum(len(set(s)) for s in tally.steps)
    ordered = sorted(tally.runs_ms)
    return {
        "runs": n_runs, "run_clients": len(tally.steps), "list_clients": list_clients,
        "seconds": seconds, "steps_per_run": steps, "metrics_per_step": len(KEYS) + 1,
        "wall_s": round(took, 1), "server_cpu_s": round(cpu, 1),
        # from the writers' start: every run indexed as finished, every point streamed
        "all_indexed_s": None if tally.indexed_at is None else round(tally.indexed_at, 1),
        "all_streamed_s": None if tally.streamed_at is None else round(tally.streamed_at, 1),
        "points_expected": expected, "points_lost": expected - received,
        "points_repeated": sum(len(s) - len(set(s)) for s in tally.steps),
        "clients_out_of_order": sum(s != sorted(s) for s in tally.steps),
        "list_clients_saw_all_finish": sum(len(d) == n_runs for d in tally.list_finished),
        "clients_gave_up": tally.gave_up,
        "server_5xx": tally.server_errors, "other_errors": tally.other_errors,
        "reconnects": tally.reconnects,
        "api_runs": {"n": len(ordered), "failed": tally.runs_failed,
                     "p50_ms": pct(ordered, 0.50), "p99_ms": pct(ordered, 0.99),
                     "max_ms": round(ordered[-1], 1),
                     "mean_ms": round(statistics.fmean(ordered), 1)},
        "server_rss_mib": {"start": round(rss[0], 1), "end": round(rss[-1], 1),
                           "peak": round(peak, 1)},
    }


async def clients_main(url: str, headers: dict[str, str], cursors: dict[str, str], steps: int,
                       clients: int, list_clients: int, seconds: float, runs_dir: Path,
                       pid: int, tally: Tally, rss: list[float]) -> None:
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    names = sorted(cursors)
    deadline = time.monotonic() + seconds + GRACE_S
    async with httpx.AsyncClient(base_url=url, headers=headers, limits=limits,
                                 timeout=httpx.Timeout(60.0)) as client:
        stop = asyncio.Event()
        side = [asyncio.create_task(probe(client, len(names), stop, tally)),
                asyncio.create_task(sample_rss(pid, stop, rss))]
        streams = [asyncio.create_task(until(deadline, follow_run(
                       client, names[i % len(names)], cursors[names[i % len(names)]], steps,
                       tally), tally)) for i in range(clients)]
        streams += [asyncio.create_task(until(deadline, follow_list(client, len(names), tally),
                                              tally)) for _ in range(list_clients)]
        await asyncio.sleep(1.0)  # every stream has opened
        (runs_dir / "go").touch()
        go = time.monotonic()
        await asyncio.gather(*streams)
        tally.streamed_at = time.monotonic() - go
        while tally.indexed_at is None and time.monotonic() < deadline:
            await asyncio.sleep(0.25)
        if tally.indexed_at is not None:
            tally.indexed_at -= go
        stop.set()
        await asyncio.gather(*side)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--clients", type=int, default=200, help="run stream clients")
    ap.add_argument("--list-clients", type=int, default=10)
    ap.add_argument("--seconds", type=float, default=60.0, help="how long the runs log")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = ap.parse_args()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        out = run_bench(Path(tmp), args.runs, args.clients, args.list_clients, args.seconds)
    out["load_avg_before"] = [round(x, 2) for x in load_before]
    out["load_avg_after"] = [round(x, 2) for x in os.getloadavg()]
    out["cpus"] = os.cpu_count()
    out["date"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2))
    print(json.dumps(out, indent=2))
    ok = (out["points_lost"] == 0 and out["points_repeated"] == 0
          and out["clients_out_of_order"] == 0 and out["server_5xx"] == 0
          and out["api_runs"]["failed"] == 0 and out["clients_gave_up"] == 0)
    if not ok:
        print("FAILED: a point was lost, repeated or out of order, or the server failed")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
