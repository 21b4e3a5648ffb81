"""The real `runwatch server` as a subprocess (killed and started again by the sender tests),
and what it stored, read back from its SQLite file to compare with a run folder."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import Engine, select

from runwatch.rundir import append
from runwatch.rundir import format as fmt
from runwatch.server.runner import free_port
from runwatch.server.settings import new_token
from runwatch.store import schema as s
from runwatch.store.db import open_engine
from runwatch.store.keys import metric_keys
from runwatch.store.points import read_points
from tests.support import first_line, http, wait_for


class ServerProcess:
    """`runwatch server --db DB --port P --token T`, on one free loopback port for its life."""

    def __init__(self, db: Path, token: str | None = None) -> None:
        self.db = db
        self.token = token or new_token()
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[str] | None = None

    def start(self) -> ServerProcess:
        env = {k: v for k, v in os.environ.items() if not k.startswith("RUNWATCH_")}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "runwatch", "server", "--db", str(self.db),
             "--port", str(self.port), "--token", self.token],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
        said = first_line(self.proc, what="runwatch server to start")
        assert "serving" in said, said
        headers = {"Authorization": f"Bearer {self.token}"}
        wait_for(lambda: _answers(f"{self.url}/api/runs", headers), what="the server to answer")
        return self

    def kill(self) -> None:
        """SIGKILL: no chance to finish a request or close the database."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc = None


def _answers(url: str, headers: dict[str, str]) -> bool:
    try:
        return http.get(url, headers=headers, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def stored(db: Path | Engine, run_id: str) -> dict[str, Any] | None:
    """What the server's index (its SQLite file, or its engine) holds of a run: metric
    points per key as (seq, step, value), and the seqs of its events and logs; None while
    the run is unknown there."""
    engine = db if isinstance(db, Engine) else open_engine(db)
    try:
        with engine.connect() as conn:
            pk = conn.execute(select(s.runs.c.pk).where(s.runs.c.run_id == run_id)).scalar()
            if pk is None:
                return None
            points = {key: [(seq, step, value) for seq, step, _ts, value
                            in read_points(conn, key_id)]
                      for key, key_id in metric_keys(conn, pk).items()}
            events = conn.execute(select(s.events.c.seq).where(s.events.c.run_pk == pk)
                                  .order_by(s.events.c.seq)).scalars().all()
            logs = conn.execute(select(s.logs.c.seq).where(s.logs.c.run_pk == pk)
                                .order_by(s.logs.c.seq)).scalars().all()
    finally:
        if engine is not db:
            engine.dispose()
    return {"points": points, "events": list(events), "logs": list(logs)}


def in_folder(run_dir: Path) -> dict[str, Any]:
    """The same view of a run folder's files, as the SDK wrote them."""
    points: dict[str, list[tuple[int, int, float | None]]] = {}
    for rec in append.records(run_dir / fmt.METRICS):
        for key, value in rec.items():
            if key not in ("seq", "step", "ts", "_line"):
                # the index stores NaN as NULL
                points.setdefault(key, []).append(
                    (rec["seq"], rec["step"], None if value != value else value))
    return {"points": points,
            "events": [r["seq"] for r in append.records(run_dir / fmt.EVENTS)],
            "logs": [r["seq"] for r in append.records(run_dir / fmt.LOGS)]}


def metric_lines(run_dir: Path) -> int:
    """Complete lines of a run's metrics.jsonl so far."""
    try:
        return (run_dir / fmt.METRICS).read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0
