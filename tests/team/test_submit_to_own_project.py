"""Submitting a job to a team server with a project's token, as the web app's form and a
first `curl` do: a body that names no project queues the run in the token's own project (not
`default`, which the token may not write); a server started with no runs folder says
how a `runwatch server` gets one; and `runwatch submit` queues on the server RUNWATCH_SERVER
names (as the `runs` commands read it), unless --dir or --db names a local runs folder."""

from __future__ import annotations

import json
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


def test_submit_queues_on_the_team_server_runwatch_server_names(
        with_folder: str, secret: str, engine: Engine, runs_dir: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    # it queued into ./runs on this machine, where no worker runs, while the `runs`
    # commands read the server RUNWATCH_SERVER names
    monkeypatch.delenv("RUNWATCH_DIR", raising=False)
    here = tmp_path / "elsewhere"  # not the server's runs folder (tmp_path/runs)
    here.mkdir()
    monkeypatch.chdir(here)
    env = {"RUNWATCH_SERVER": with_folder, "RUNWATCH_TOKEN": secret}
    made = cli_here("submit", "--name", "there-1", "recipes", "sft", "max_steps=5", env=env)
    assert "queued there-1 (run " in made.stdout and f"on {with_folder}: QUEUED" in made.stdout
    assert f"runwatch runs wait vision/there-1 --exit-status --server {with_folder}" \
        in made.stdout, made.stdout
    assert not (here / "runs").exists()  # nothing queued here
    assert (runs_dir / "there-1").is_dir()  # in the server's runs folder
    listed = cli_here("runs", "get", "vision/there-1", "-o", "json", env=env).stdout
    assert '"project": "vision"' in listed and '"status": "QUEUED"' in listed

    # the server checks the job as a local submit does, and its refusal is said as such
    bad = cli_here("submit", "recipes", "sft", "max_stepz=5", env=env, check=False)
    assert bad.returncode == 2, bad.stderr
    assert "the sft recipe has no setting 'max_stepz'" in bad.stderr
    # a command runs as the server's user: a project's token may not queue one
    refused = cli_here("submit", "--", "true", env=env, check=False)
    assert refused.returncode == 2, refused.stderr
    assert "needs write on every project: use the server's token" in refused.stderr
    # --dir (or --db) names a local runs folder: queued here, as before
    local = cli_here("submit", "--name", "here-1", "--dir", "runs", "--", "true", env=env)
    assert "queued here-1" in local.stdout and (here / "runs" / "here-1").is_dir()


def test_submit_cwd_names_the_folder_a_command_starts_in(
        with_folder: str, engine: Engine, runs_dir: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A command queued on a team server started in this folder's path on the server's
    host, whatever folder there it should start in: --cwd names it (the server checks it
    is a folder there), here and on a server alike; a recipe on a server starts in the
    server's own, and --cwd with one is refused before anything is sent."""
    monkeypatch.delenv("RUNWATCH_DIR", raising=False)
    here, work = tmp_path / "laptop", tmp_path / "work"
    here.mkdir()
    work.mkdir()
    monkeypatch.chdir(here)
    env = {"RUNWATCH_SERVER": with_folder, "RUNWATCH_TOKEN": BOOT}
    cli_here("submit", "--name", "in-work", "--cwd", str(work), "--", "true", env=env)
    missing = cli_here("submit", "--cwd", str(tmp_path / "nowhere"), "--", "true", env=env,
                       check=False)
    assert missing.returncode == 2 and "does not exist on the server's host" in missing.stderr
    recipe = cli_here("submit", "--cwd", str(work), "recipes", "sft", "max_steps=5", env=env,
                      check=False)
    assert recipe.returncode == 2 and "leave --cwd out" in recipe.stderr
    # queued here: the folder must be one here
    local = cli_here("submit", "--name", "local-work", "--dir", str(runs_dir), "--cwd",
                     str(work), "--", "true")
    assert "queued local-work" in local.stdout
    nowhere = cli_here("submit", "--dir", str(runs_dir), "--cwd", "nowhere", "--", "true",
                       check=False)
    assert nowhere.returncode == 2 and "--cwd nowhere is no folder here" in nowhere.stderr
    for name in ("in-work", "local-work"):
        spec = json.loads((runs_dir / name / "job.json").read_text())
        assert spec["cwd"] == str(work), (name, spec)
