"""A read command on a folder a server indexes (`runwatch ui`) waits for the server's
next pass instead of indexing the folder beside it (ingest/lease.py).

Found in a trial (session 36): `runwatch runs list` run while `runwatch ui` read a new
run of 400,000 steps took 30-40 s (the two indexers took turns on the index's lock, and
the command judged the run's health itself), once 250 s with "database is locked"
tracebacks."""

from __future__ import annotations

from pathlib import Path

import pytest

from runwatch.ingest import lease
from runwatch.server.runner import Runner
from runwatch.store.db import open_engine
from tests.support.cli import cli_here
from tests.support.rundirs import sdk_run


def test_a_read_beside_a_server_shows_what_its_next_pass_read(server: Runner, db_url: str,
                                                              runs_dir: Path) -> None:
    # the server holds the folder's lease and indexes it every 50 ms
    sdk_run(runs_dir, "fresh", steps=30)
    listed = cli_here("runs", "list", "--dir", str(runs_dir), "--db", db_url)
    assert "fresh" in listed.stdout and listed.stderr == "", listed.stderr


def test_a_read_beside_a_long_pass_says_so_and_indexes_nothing(
        db_url: str, runs_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A lease whose holder is on a long pass (a first pass over a big folder): the
    command waits for it (here 0.3 s), then shows what the index holds and says so,
    without indexing the folder itself."""
    engine = open_engine(db_url)
    held = lease.Lease(runs_dir, lease.index_name(engine))
    assert held.take()
    try:
        sdk_run(runs_dir, "unread", steps=30)
        monkeypatch.setattr(lease, "WAIT_S", 0.3)
        listed = cli_here("runs", "list", "--dir", str(runs_dir), "--db", db_url)
        assert "unread" not in listed.stdout, "the command indexed the folder itself"
        assert "is indexing" in listed.stderr and "has not finished its pass" in listed.stderr
    finally:
        held.release()
        engine.dispose()
    # with nobody holding the lease, the command indexes the folder itself, as before
    listed = cli_here("runs", "list", "--dir", str(runs_dir), "--db", db_url)
    assert "unread" in listed.stdout
