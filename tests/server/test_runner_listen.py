"""The server binds its listening socket before anything else starts (server/runner.py).

A port found free with `free_port()` can be taken by another process (an xdist worker's
server, any outgoing connection's ephemeral port) before the server binds it; the
server then failed only after it had indexed the runs folder and started its indexer
and workers, which went on running behind the error. Now a taken port fails first,
with nothing started, and port 0 binds a free port atomically and names it.
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from sqlalchemy import func, select

import runwatch
from runwatch.server.runner import Runner
from runwatch.store import open_engine
from runwatch.store import schema as s
from tests.support import http


def test_a_taken_port_fails_before_anything_starts(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    with runwatch.init(project="p", name="r", dir=runs) as run:
        run.log({"loss": 1.0}, step=0)
    engine = open_engine(tmp_path / "index.db")
    try:
        with socket.create_server(("127.0.0.1", 0)) as taken:
            port = taken.getsockname()[1]
            runner = Runner(engine, runs_dir=runs, port=port, workers=1, prewarm=False,
                            save_series=False)
            with pytest.raises(OSError, match=f"could not listen on http://127.0.0.1:{port}"):
                runner.start()
        with engine.connect() as conn:  # nothing was indexed: nothing had started
            assert conn.execute(select(func.count()).select_from(s.runs)).scalar() == 0
    finally:
        engine.dispose()


def test_port_zero_listens_on_a_free_port_and_names_it(tmp_path: Path) -> None:
    engine = open_engine(tmp_path / "index.db")
    try:
        with Runner(engine, port=0, prewarm=False, save_series=False) as runner:
            assert runner.port > 0 and runner.url == f"http://127.0.0.1:{runner.port}"
            assert http.get(f"{runner.url}/api/projects").status_code == 200
    finally:
        engine.dispose()
