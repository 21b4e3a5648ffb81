"""The `runwatch tokens|projects` commands that runwatch prints as next steps run as printed:
those of `projects create`, `tokens create` and their refusals name the index they were
given (--db), and those of a server's 403 and the CLI's 401 are whole (`--name WHO`), their
placeholders the only words left to fill."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

from runwatch.server.runner import Runner, free_port
from runwatch.store import tokens
from runwatch.store.db import open_engine
from tests.support import http
from tests.support.cli import CLI_DEADLINE_S, run_cli

BOOT = "bootstrap-token-4-tests"


def printed(text: str) -> str:
    """The one command a message names between backticks."""
    found = re.findall(r"`([^`]+)`", text)
    assert len(found) == 1, text
    return found[0]


def run_printed(command: str, cwd: Path, **fill: str) -> subprocess.CompletedProcess[str]:
    """Run `command` as a user would paste it in `cwd`, its placeholders (WHO, DB, P) put
    as `fill` says."""
    words = [fill.get(w, w) for w in shlex.split(command)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("RUNWATCH_")}
    # the admin's shell finds `runwatch`, as a server's message (which cannot know where
    # it is installed) assumes
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return subprocess.run(words, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=CLI_DEADLINE_S)


def test_the_commands_projects_and_tokens_print_run_against_their_db(tmp_path: Path) -> None:
    here = tmp_path / "here"  # the folder the admin types in: no runs folder in it
    here.mkdir()
    db = str(tmp_path / "team.db")
    made = run_cli("projects", "create", "vision", "--db", db, cwd=here).stdout
    create = printed(made)
    assert shlex.split(create)[-2:] == ["--db", db], create
    token = run_printed(create, here, WHO="ci-uploader")
    assert token.returncode == 0, token.stderr
    assert token.stdout.strip().startswith("rw_") and len(token.stdout.split()) == 1, \
        token.stdout  # the secret alone: TOKEN=$(runwatch tokens create …) holds it
    assert "write on project vision" in token.stderr
    revoke = run_printed(printed(token.stderr), here)
    assert revoke.returncode == 0 and "is revoked" in revoke.stdout, revoke.stderr

    refused = run_cli("tokens", "create", "-p", "nope", "--name", "x", "--db", db, cwd=here,
                      check=False)
    assert refused.returncode == 2
    make, listing = re.findall(r"`([^`]+)`", refused.stderr)
    assert run_printed(make, here).returncode == 0
    assert "nope" in run_printed(listing, here).stdout
    # nothing was made where the admin typed: no stray index of ./runs
    assert not (here / "runs").exists()


def test_a_token_command_run_without_its_db_makes_no_index(tmp_path: Path) -> None:
    refused = run_cli("tokens", "create", "-p", "vision", "--name", "x", cwd=tmp_path,
                      check=False)
    assert refused.returncode == 2 and "does not exist" in refused.stderr
    assert not (tmp_path / "runs").exists()


def test_a_refused_token_is_told_the_whole_command_that_makes_one(tmp_path: Path) -> None:
    db = tmp_path / "team.db"
    engine = open_engine(str(db))
    with engine.begin() as conn:
        for project in ("alpha", "bravo"):
            tokens.create_project(conn, project, "test")
        _, alpha_read = tokens.create(conn, "alpha", "read", "reader", "test")
    with Runner(engine, port=free_port(), token=BOOT, interval=0.05, prewarm=False,
                warm=False) as srv:
        headers = {"Authorization": f"Bearer {alpha_read}"}
        answer = http.get(f"{srv.url}/api/runs", params={"project": "bravo"}, headers=headers)
        assert answer.status_code == 403
        made = run_printed(printed(answer.json()["error"]), tmp_path, WHO="dash", DB=str(db))
        assert made.returncode == 0, made.stderr
        secret = made.stdout.splitlines()[0]
        answer = http.get(f"{srv.url}/api/runs", params={"project": "bravo"},
                          headers={"Authorization": f"Bearer {secret}"})
        assert answer.status_code == 200

        unknown = run_cli("runs", "list", "--server", srv.url, "--token", "rw_" + "x" * 43,
                          check=False)
        assert unknown.returncode == 2
        made = run_printed(printed(unknown.stderr), tmp_path, P="bravo", WHO="ci",
                           DB=str(db))
        assert made.returncode == 0 and "read on project bravo" in made.stderr, made.stderr
    engine.dispose()
