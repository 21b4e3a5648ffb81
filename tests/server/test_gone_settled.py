"""A server says a run's process is gone only once its indexer has read the run's folder
after the death was seen: a process writes its end just before it dies, and the index of
the pass before holds the run as it was (CI saw `runs tensorboard` call a SUCCEEDED run
gone from such a read; runwatch/server/settle.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from runwatch.ingest import Indexer
from runwatch.rundir.format import MANIFEST
from runwatch.server.runner import Runner, free_port
from runwatch.server.settle import Settle
from tests.killed import killed_run, live_process
from tests.support import first_line, http, wait_for
from tests.support.cli import CLI_DEADLINE_S


def _run(client: Any, name: str) -> dict[str, Any]:
    (found,) = [r for r in client.get("/api/runs").json()["runs"] if r["name"] == name]
    return dict(found)


def test_a_run_that_ended_as_its_process_died_is_not_gone_before_the_server_reads_it(
        engine: Engine, runs_dir: Path) -> None:
    child = live_process(runs_dir, "late", then="run.finish()\n")
    assert child.stdin is not None
    try:
        assert first_line(child, what="the training process to start") == "started"
        wait_for(lambda: b"RUNNING" in (runs_dir / "late" / "events.jsonl").read_bytes()
                 if (runs_dir / "late" / "events.jsonl").exists() else False,
                 what="the run's RUNNING event on disk")
        # no pass over the folder after its first two (the start's, the loop's first)
        with Runner(engine, runs_dir=runs_dir, port=free_port(), interval=3600,
                    prewarm=False, warm=False) as srv, \
                http.client(base_url=srv.url, timeout=10) as client:
            wait_for(lambda: srv.settle.passes == 2, what="the loop's first pass")
            child.stdin.write("go\n")
            child.stdin.close()
            assert child.wait(timeout=CLI_DEADLINE_S) == 0
            # the index has not read the end, and the process is dead: not gone yet
            listed = _run(client, "late")
            assert (listed["status"], listed["process_gone"]) == ("RUNNING", False)
            detail = client.get("/api/runs/late").json()
            assert detail["state"]["process_gone"] is False
            assert detail["run"]["process_gone"] is False
    finally:
        child.kill()
        child.wait(timeout=CLI_DEADLINE_S)
    # the next server's first pass reads the end
    with Runner(engine, runs_dir=runs_dir, port=free_port(), prewarm=False,
                warm=False) as srv, http.client(base_url=srv.url, timeout=10) as client:
        listed = _run(client, "late")
        assert (listed["status"], listed["process_gone"]) == ("SUCCEEDED", False)


def test_a_run_whose_process_died_without_an_end_is_gone_after_the_next_pass(
        engine: Engine, runs_dir: Path) -> None:
    killed_run(runs_dir, "killed")
    with Runner(engine, runs_dir=runs_dir, port=free_port(), interval=0.05, prewarm=False,
                warm=False) as srv, http.client(base_url=srv.url, timeout=10) as client:
        # dead as a pass began, and no end read by that pass
        wait_for(lambda: _run(client, "killed")["process_gone"],
                 what="the server to call the run's process gone")
        listed = _run(client, "killed")
        assert listed["status"] == "RUNNING"
        assert client.get("/api/runs/killed").json()["state"]["process_gone"] is True


def test_a_server_that_indexes_no_folder_judges_by_the_row(engine: Engine,
                                                           runs_dir: Path) -> None:
    """A server of runs another indexer (or a sender over HTTP) stored has no pass to wait
    for: the row and the process alone say it."""
    killed_run(runs_dir, "killed")
    Indexer(engine, runs_dir).index_once()
    with Runner(engine, port=free_port(), prewarm=False, warm=False) as srv, \
            http.client(base_url=srv.url, timeout=10) as client:
        assert srv.settle.passes == 0
        listed = _run(client, "killed")
        assert (listed["status"], listed["process_gone"]) == ("RUNNING", True)


def test_a_run_whose_folder_a_pass_cannot_read_is_left_unjudged(engine: Engine,
                                                               runs_dir: Path) -> None:
    """A pass that could not read a run's folder has not read its end either: the run is
    not called gone until a pass reads the folder (IndexReport.unread)."""
    killed_run(runs_dir, "killed")
    Indexer(engine, runs_dir).index_once()  # its row: RUNNING, its process dead
    manifest = runs_dir / "killed" / MANIFEST
    good = manifest.read_bytes()
    manifest.write_bytes(b"{not a manifest")
    patient = Settle()
    patient.UNREAD_PASSES = 10**9  # never judged on its row while unread (the next test)
    with Runner(engine, runs_dir=runs_dir, port=free_port(), interval=0.05, prewarm=False,
                warm=False, settle=patient) as srv, \
            http.client(base_url=srv.url, timeout=10) as client:
        wait_for(lambda: srv.settle.passes >= 3, what="three passes")
        assert _run(client, "killed")["process_gone"] is False
        manifest.write_bytes(good)
        wait_for(lambda: _run(client, "killed")["process_gone"],
                 what="the server to call the run's process gone once it reads the folder")


def test_a_dead_run_whose_folder_no_pass_can_read_is_judged_on_its_row(
        engine: Engine, runs_dir: Path) -> None:
    """A folder that stays unreadable (a damaged manifest) would leave its dead run
    unjudged for ever, and `runs wait --server` waiting to its timeout: after
    Settle.UNREAD_PASSES passes in a row that could not read it, its row judges it."""
    killed_run(runs_dir, "killed")
    Indexer(engine, runs_dir).index_once()  # its row: RUNNING, its process dead
    (runs_dir / "killed" / MANIFEST).write_bytes(b"{not a manifest")
    with Runner(engine, runs_dir=runs_dir, port=free_port(), interval=0.05, prewarm=False,
                warm=False) as srv, http.client(base_url=srv.url, timeout=10) as client:
        wait_for(lambda: _run(client, "killed")["process_gone"],
                 what="the server to judge the unreadable run's process gone on its row")
        assert srv.settle.passes >= Settle.UNREAD_PASSES
