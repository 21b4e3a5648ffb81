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


def _skipped(runs_dir: Path, kind: str) -> tuple[Path, str]:
    """A folder of the runs folder the indexer does not index, made as `kind`, and the
    words that say why."""
    if kind == "link":
        target = runs_dir.parent / "elsewhere"
        target.mkdir()
        (runs_dir / "linked").symlink_to(target, target_is_directory=True)
        return runs_dir / "linked", "is a symbolic link to a folder"
    if kind == "bad name":
        (runs_dir / "my run").mkdir()
        (runs_dir / "my run" / "notes.txt").write_text("x")
        return runs_dir / "my run", "the folder is not indexed"
    if kind == "no manifest":
        (runs_dir / "plain").mkdir()
        (runs_dir / "plain" / "notes.txt").write_text("x")
        return runs_dir / "plain", "has no manifest.json, so it is not indexed"
    (runs_dir / "junk").mkdir()
    (runs_dir / "junk" / "manifest.json").write_text("{not json")
    return runs_dir / "junk", "is not readable JSON"


@pytest.mark.parametrize("kind", ["link", "bad name", "no manifest", "junk manifest"])
def test_the_server_names_every_folder_it_does_not_index(
        server: Runner, runs_dir: Path, kind: str) -> None:
    """As a copy is: a folder the server skips is in its notes while it is there, or it
    would never show, with no word why."""
    sdk_run(runs_dir, "a", steps=3)
    with http.client(base_url=server.url) as client:
        def notes() -> list[str]:
            got: list[str] = client.get("/api/server").json()["notes"]
            return got

        wait_for(lambda: client.get("/api/runs").json()["runs"], what="the run listed")
        folder, why = _skipped(runs_dir, kind)
        said = wait_for(notes, what=f"the server's notes to name the {kind} folder")
        assert len(said) == 1 and str(folder) in said[0] and why in said[0], said
        sdk_run(runs_dir, "b", steps=3)  # later passes: still said
        wait_for(lambda: len(client.get("/api/runs").json()["runs"]) == 2,
                 what="a later run listed")
        assert notes() == said
        if folder.is_symlink():
            folder.unlink()
        else:
            shutil.rmtree(folder)
        wait_for(lambda: notes() == [], what="the note to go with the folder")
