"""Submitting a job to a team server with a project's token, as the web app's form and a
first `curl` do: a body that names no project queues the run in the token's own project (not
`default`, which the token may not write); a server started with no runs folder says
how a `runwatch server` gets one; and `runwatch submit`, which queues into a local runs
folder, says so where RUNWATCH_SERVER (which points the `runs` commands at the server) is
set."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

from runwatch.server.runner import Runner, free_port
from runwatch.store import tokens
from tests.support import http
from tests.support.cli import cli_here
from tests.support.wait import DEADLINE_S

BOOT = "bootstrap-token-own-project"
RECIPE = {"kind": "recipe", "recipe": "sft", "settings": {"max_steps": 5}}


@pytest.fixture
def secret(engine: Engine) -> str:
    with engine.begin() as conn:
        tokens.create_project(conn, "vision", "test")
        return tokens.create(conn, "vision", "write", "alice", "test")[1]


def _server(engine: Engine, runs_dir: Path | None) -> Runner:
    return Runner(engine, runs_dir=runs_dir, port=free_port(), token=BOOT, interval=0.05,
                  prewarm=False, warm=False)


@pytest.fixture
def with_folder(engine: Engine, runs_dir: Path) -> Iterator[str]:
    with _server(engine, runs_dir) as srv:
        yield srv.url


def test_a_project_token_submits_into_its_own_project(with_folder: str, secret: str) -> None:
    with http.client(base_url=with_folder, timeout=DEADLINE_S,
                     headers={"Authorization": f"Bearer {secret}"}) as client:
        made = client.post("/api/jobs", json={**RECIPE, "name": "job-1"})
        assert made.status_code == 201, made.text
        assert made.json()["run"]["project"] == "vision"
        # naming another project is still refused, and says which right it needs
        other = client.post("/api/jobs", json={**RECIPE, "name": "job-2", "project": "nlp"})
        assert other.status_code == 403 and "project 'nlp'" in other.json()["error"]
    # the server's own token, which holds every project, still queues into `default`
    with http.client(base_url=with_folder, timeout=DEADLINE_S,
                     headers={"Authorization": f"Bearer {BOOT}"}) as boot:
        made = boot.post("/api/jobs", json={**RECIPE, "name": "job-3"})
        assert made.status_code == 201 and made.json()["run"]["project"] == "default"


def test_a_server_without_a_runs_folder_says_how_to_give_it_one(engine: Engine,
                                                                secret: str) -> None:
    with _server(engine, None) as srv, http.client(
            base_url=srv.url, timeout=DEADLINE_S,
            headers={"Authorization": f"Bearer {secret}"}) as client:
        refused = client.post("/api/jobs", json=RECIPE)
    assert refused.status_code == 409, refused.text
    assert "runwatch server --runs-dir DIR" in refused.json()["error"]


def test_submit_says_it_queues_here_when_runwatch_server_is_set(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RUNWATCH_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    env = {"RUNWATCH_SERVER": "http://runwatch.lan:8765", "RUNWATCH_TOKEN": None}
    made = cli_here("submit", "--name", "here-1", "--", "true", env=env)
    assert "RUNWATCH_SERVER is set, but submit queues the job in" in made.stderr, made.stderr
    assert "POST it to /api/jobs" in made.stderr
    assert (tmp_path / "runs" / "here-1").is_dir()
    quiet = cli_here("submit", "--name", "here-2", "--dir", "runs", "--", "true", env=env)
    assert "RUNWATCH_SERVER" not in quiet.stderr
