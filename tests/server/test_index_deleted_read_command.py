"""A read command run between the deletion of a server's index file and that server's next
pass (which makes the index again): the file it opens at the path shares the old file's
WAL, which the server still holds, and SQLite answers "disk I/O error". The command says so
in one line and exits 2, with no traceback."""

from __future__ import annotations

from pathlib import Path

from runwatch.cli.context import default_db
from runwatch.ingest.lease import holder, index_name
from runwatch.server.runner import Runner
from runwatch.store.db import open_engine
from tests.support.cli import run_cli
from tests.support.rundirs import sdk_run
from tests.support.wait import wait_for


def test_a_read_command_in_the_window_says_to_run_it_again(runs_dir: Path) -> None:
    sdk_run(runs_dir, "kept", steps=5)
    db = default_db(runs_dir)
    engine = open_engine(db)
    # a pass an hour: the deletion stays unseen while the command runs
    srv = Runner(engine, runs_dir=runs_dir, port=0, interval=3600, warm=False).start()
    try:
        wait_for(lambda: (h := holder(runs_dir, index_name(engine))) is not None
                 and h.passes >= 1, what="the server's lease of the folder")
        db.unlink()  # its WAL and shared memory stay, held by the server's connections
        got = run_cli("runs", "list", "--dir", str(runs_dir), check=False)
        assert got.returncode == 2, got.stderr
        assert "Traceback" not in got.stderr
        said = " ".join(got.stderr.split())  # as one line, however the console wrapped it
        assert said.startswith(f"error: the index {db} was deleted or replaced while "
                               "runwatch ui or server (process ")
        assert said.endswith("run this command again in a moment")
    finally:
        srv.stop()
        engine.dispose()
