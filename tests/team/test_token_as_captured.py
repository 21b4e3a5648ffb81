"""A team's first token as a new user takes it: the line `runwatch tokens create` prints
first works for the SDK and the CLI against the real server; a value that is no token (all
that `TOKEN=$(runwatch tokens create …)` caught, notes and all: a line break) is refused by the
SDK, `runwatch sync` and the `runs` commands alike, saying what to set, never a traceback."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

from runwatch.sdk import init
from runwatch.server.runner import Runner, free_port
from runwatch.store import tokens
from tests.support.cli import cli_here, run_cli
from tests.support.wait import wait_for

BOOT = "bootstrap-token-captured"
# what `TOKEN=$(runwatch tokens create …)` held when the command printed its notes on stdout
CAUGHT = ("rw_cDqf8WPHtEWXelSR8Wc4adieD0ZYxp_RJVzi7CMAaZE\ntoken 91ed7af4d212 (alice): write on "
          "project vision. Copy it now: it is not shown again.\nuse it as RUNWATCH_TOKEN=…")


@pytest.fixture
def server(engine: Engine, runs_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    for var in ("RUNWATCH_SERVER", "RUNWATCH_TOKEN", "RUNWATCH_PROJECT"):
        monkeypatch.delenv(var, raising=False)
    with engine.begin() as conn:
        tokens.create_project(conn, "vision", "test")
    with Runner(engine, port=free_port(), token=BOOT, interval=0.05, prewarm=False,
                warm=False) as srv:
        yield srv.url


def test_the_captured_secret_sends_and_reads_a_run(server: str, db_url: str,
                                                  tmp_path: Path) -> None:
    made = run_cli("tokens", "create", "--project", "vision", "--right", "write", "--name",
                   "alice", "--db", db_url)
    secret = made.stdout.strip()  # as TOKEN=$(runwatch tokens create …) holds it
    assert re.fullmatch(r"rw_[A-Za-z0-9_-]{43}", secret), made.stdout

    run = init(name="sft-1", project="vision", dir=tmp_path / "runs", server=server,
               token=secret)
    run.log({"loss": 1.0}, step=0)
    run.finish("SUCCEEDED")
    env = {"RUNWATCH_SERVER": server, "RUNWATCH_TOKEN": secret}
    wait_for(lambda: "SUCCEEDED" in cli_here("runs", "list", env=env).stdout,
             what="the run sent with the captured token to be listed")


def test_a_value_that_is_no_token_is_refused_saying_what_to_set(
        server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    said = "is not one token: it holds a line break; set it to the token alone"
    monkeypatch.setenv("RUNWATCH_TOKEN", CAUGHT)
    with pytest.raises(ValueError, match=said):
        init(name="sft-1", project="vision", dir=tmp_path / "runs", server=server)
    assert not (tmp_path / "runs" / "sft-1").exists()  # refused before its folder is made
    with pytest.raises(ValueError, match="token= is not one token: it holds a space"):
        init(name="sft-2", project="vision", dir=tmp_path / "runs", server=server,
             token="rw_abc def")

    offline = init(name="offline-1", project="vision", dir=tmp_path / "runs")
    offline.finish("SUCCEEDED")
    env = {"RUNWATCH_SERVER": server, "RUNWATCH_TOKEN": os.environ["RUNWATCH_TOKEN"]}
    for args in (("runs", "list"), ("sync", str(tmp_path / "runs"))):
        refused = cli_here(*args, env=env, check=False)
        assert refused.returncode == 2 and said in refused.stderr, refused.stderr
    listed = cli_here("runs", "list", "--token", "rw_ab\tc", env={"RUNWATCH_SERVER": server},
                      check=False)
    assert listed.returncode == 2
    assert "the token given with --token is not one token: it holds a tab" in listed.stderr
