"""A server names a copied run folder it does not index (s40 G3).

docs/run-format.md ("Copied"): a copy of a run folder holds the same run, so it is not
indexed, and the pass says so once. `runwatch index` did; a server (`runwatch ui`,
`runwatch server`) logged nothing and its /api/server notes stayed empty, so the copy
silently never showed. Now its log says it once and the notes the web app shows name it
while the copy is there.

The real server on a free loopback port, indexing the test's runs folder every 50 ms, over
HTTP, on the suite's `engine` (SQLite and PostgreSQL)."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest

from runwatch.server.runner import Runner
from tests.support import http, sdk_run, wait_for

COPY_SAID = "a copy of a run folder is not indexed (move the copy out of the runs folder)"


def test_the_server_names_a_copied_run_folder_once_in_its_log_and_in_its_notes(
        server: Runner, runs_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    run_id = sdk_run(runs_dir, "a", steps=3)
    with http.client(base_url=server.url) as client:
        def listed() -> list[str]:
            return sorted(r["name"] for r in client.get("/api/runs").json()["runs"])

        def notes() -> list[str]:
            got: list[str] = client.get("/api/server").json()["notes"]
            return got

        wait_for(lambda: listed() == ["a"], what="the run listed")
        assert notes() == []
        with caplog.at_level(logging.WARNING, logger="runwatch.ingest.indexer"):
            shutil.copytree(runs_dir / "a", runs_dir / "a-copy")
            said = wait_for(notes, what="the server's notes to name the copy")
            assert said == [f"{runs_dir / 'a-copy'} holds run {run_id}, which is indexed from "
                            f"{(runs_dir / 'a').resolve()}: {COPY_SAID}"]
            # passes go on (a new run is indexed by a later one): the copy is still named,
            # and not logged again
            sdk_run(runs_dir, "b", steps=3)
            wait_for(lambda: listed() == ["a", "b"], what="a later run listed")
            assert notes() == said
            shutil.rmtree(runs_dir / "a-copy")
            wait_for(lambda: notes() == [], what="the note to go with the copy")
        assert listed() == ["a", "b"]
    logged = [r.getMessage() for r in caplog.records if r.name == "runwatch.ingest.indexer"]
    assert logged == said
