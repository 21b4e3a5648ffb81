"""Token auth on every route, and the refusal to serve a network address without it."""

from __future__ import annotations

import re
import socket
from collections.abc import Callable
from pathlib import Path

import pytest
import typer
from sqlalchemy import Engine
from typer.testing import CliRunner

from runwatch.cli.serve import server, ui
from runwatch.server.app import create_app
from runwatch.server.runner import free_port
from runwatch.store.db import open_engine

from .apiclient import Api, MakeRun, assert_error

TOKEN = "s3cret-token-4-tests"


def test_every_route_needs_the_token(engine: Engine, runs_dir: Path, make_run: MakeRun,
                                     index: Callable[[], None]) -> None:
    make_run("r", steps=2)
    index()
    app = create_app(engine, runs_dir=runs_dir, token=TOKEN)
    anonymous = Api(app)
    spec_paths = Api(app, {"Authorization": f"Bearer {TOKEN}"}).ok("/openapi.json")["paths"]
    for path, ops in spec_paths.items():
        for method in ops:
            assert_error(anonymous.request(method.upper(), path.replace("{run}", "r")), 401)
    for path in ("/runs", "/openapi.json", "/api/docs", "/assets/x.js"):
        assert_error(anonymous.get(path), 401)
    assert_error(Api(app, {"Authorization": "Bearer wrong"}).get("/api/runs"), 401)
    assert Api(app, {"Authorization": f"Bearer {TOKEN}"}).ok("/api/runs")["runs"]


def test_token_in_the_url_sets_a_cookie_for_the_web_app(engine: Engine) -> None:
    api = Api(create_app(engine, token=TOKEN))
    resp = api.get("/api/server", params={"token": TOKEN})
    assert resp.status_code == 200 and resp.json()["auth"] is True
    cookie = resp.headers["set-cookie"]
    assert cookie.startswith(f"runwatch_token={TOKEN}") and "HttpOnly" in cookie
    assert Api(create_app(engine, token=TOKEN),
               {"Cookie": f"runwatch_token={TOKEN}"}).ok("/api/runs")["ok"]


def test_non_loopback_bind_without_token_is_refused(runs_dir: Path, tmp_path: Path) -> None:
    app = typer.Typer()
    app.command("ui")(ui)
    app.command("server")(server)
    runner = CliRunner()
    result = runner.invoke(app, ["ui", str(runs_dir), "--host", "0.0.0.0"], env={})
    assert result.exit_code == 2 and "--token" in result.output
    result = runner.invoke(app, ["server", "--db", str(tmp_path / "x.db"), "--host", "10.1.2.3"],
                           env={})
    assert result.exit_code == 2 and "without auth" in result.output


def test_weak_tokens_are_refused_and_the_refusal_offers_a_strong_one(
        runs_dir: Path, tmp_path: Path, make_run: MakeRun) -> None:
    app = typer.Typer()
    app.command("ui")(ui)
    app.command("server")(server)
    runner = CliRunner()
    make_run("done", steps=1)
    # were a weak token taken, ui would exit once its run is indexed and server would fail
    # on the taken port: either way without the message checked here
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        for weak in (" ", "        \t       ", "x", "short-token", "abababababababababab",
                     "has a space in it ok"):
            result = runner.invoke(app, ["ui", str(runs_dir), "--token", weak, "--port",
                                         str(free_port()), "--exit-when-done"], env={})
            assert result.exit_code == 2 and "16 characters" in result.output, weak
            result = runner.invoke(app, ["server", "--db", str(tmp_path / "x.db"), "--port",
                                         port], env={"RUNWATCH_TOKEN": weak})
            assert result.exit_code == 2 and "16 characters" in result.output, weak
            with pytest.raises(ValueError, match="16 characters"):
                create_app(open_engine(tmp_path / "x.db"), token=weak)
    # the refusal of a network bind without a token offers a generated token that is accepted
    result = runner.invoke(app, ["ui", str(runs_dir), "--host", "0.0.0.0"], env={})
    offered = re.search(r"--token (\S+)", result.output)
    assert offered, result.output
    result = runner.invoke(app, ["ui", str(runs_dir), "--token", offered.group(1), "--port",
                                 str(free_port()), "--exit-when-done"], env={})
    assert result.exit_code == 0, result.output
