"""What a project token learns through paths: a run detail's `model.parent` names only runs
of the reader's project (trial 35, D3), and a recipe job a project token submits reads and
writes only inside its own project's run folders.

The real app in-process over HTTP (httpx ASGITransport) with a bootstrap token, on real run
folders and the suite's `engine`, SQLite and PostgreSQL alike."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, func, select

from runwatch.ingest import Indexer
from runwatch.server.app import create_app
from runwatch.store import schema as s
from runwatch.store import tokens
from tests.server.apiclient import Api, assert_error
from tests.support import MakeRun, manifest

BOOT = "bootstrap-token-4-scoped-paths"
A, B = "proj-alpha", "proj-bravo"
SECRET_MODEL = "bravo-confidential-model-v3"


@dataclass
class Team:
    runs_dir: Path
    apis: dict[str, Api]  # "boot", "A-read", "A-write" -> a client with that token

    def ingest(self, who: str, name: str, base_model: str) -> None:
        run_id = f"id-{name}"
        body = {"run_id": run_id, "file": "metrics.jsonl",
                "manifest": manifest(name, project=A, method="sft", base_model=base_model),
                "records": [{"seq": 0, "step": 0, "ts": 1.0, "loss": 1.0}]}
        resp = self.apis[who].post("/api/ingest", json=body)
        assert resp.status_code == 200, resp.text


@pytest.fixture
def team(engine: Engine, runs_dir: Path, make_run: MakeRun) -> Iterator[Team]:
    make_run("b-model", project=B, base_model=SECRET_MODEL, steps=2)
    make_run("a-model", project=A, base_model="alpha-base", steps=2)
    # an alpha run started from bravo's: the chain up from it leaves alpha there
    make_run("a-mid", project=A, base_model=f"init_from:{runs_dir / 'b-model'}", steps=2)
    Indexer(engine, runs_dir).index_once()
    secrets: dict[str, str] = {}
    with engine.begin() as conn:
        tokens.create_project(conn, A, "test")
        tokens.create_project(conn, B, "test")
        for right in ("read", "write"):
            _, secrets[f"A-{right}"] = tokens.create(conn, A, right, right, "test")
    app = create_app(engine, runs_dir=runs_dir, token=BOOT)
    apis = {who: Api(app, {"Authorization": f"Bearer {secret}"})
            for who, secret in {"boot": BOOT, **secrets}.items()}
    yield Team(runs_dir, apis)


def _model(team: Team, who: str, run: str) -> tuple[dict[str, Any], str]:
    resp = team.apis[who].get(f"/api/runs/{run}")
    assert resp.status_code == 200, resp.text
    return resp.json()["model"], resp.text


def test_a_parent_in_another_project_is_not_named(team: Team) -> None:
    target = str(team.runs_dir / "b-model")
    team.ingest("A-write", "probe", f"init_from:{target}")
    model, text = _model(team, "A-read", "probe")
    assert model == {"base_model": None, "init_from": target, "parent": None}
    assert "b-model" not in text.replace(target, "") and SECRET_MODEL not in text
    # the server's token reads every project: the same run names its parent, as before
    model, _ = _model(team, "boot", "probe")
    assert model["parent"]["name"] == "b-model" and model["base_model"] == SECRET_MODEL


def test_a_chain_ends_where_it_leaves_the_project(team: Team) -> None:
    team.ingest("A-write", "probe-mid", f"init_from:{team.runs_dir / 'a-mid'}")
    model, text = _model(team, "A-read", "probe-mid")
    assert model["parent"]["name"] == "a-mid" and model["base_model"] is None
    assert SECRET_MODEL not in text
    model, text = _model(team, "A-read", "a-mid")
    assert model["parent"] is None and SECRET_MODEL not in text


def test_a_parent_in_the_project_is_named(team: Team) -> None:
    team.ingest("A-write", "probe-own", f"init_from:{team.runs_dir / 'a-model'}")
    model, text = _model(team, "A-read", "probe-own")
    assert model["parent"]["name"] == "a-model" and model["base_model"] == "alpha-base"
    assert "(from run a-model)" in text


def _runs(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(s.runs)).scalar_one())


def _submit(team: Team, who: str, **settings: Any) -> Any:
    return team.apis[who].post("/api/jobs", json={
        "kind": "recipe", "recipe": "sft", "project": A,
        "settings": {"max_steps": 2, **settings}})


def test_a_project_tokens_recipe_paths_stay_in_its_projects_runs(
        team: Team, engine: Engine) -> None:
    bravo = team.runs_dir / "b-model"
    # a link inside an alpha run that leads into bravo's folder leads out of alpha
    (team.runs_dir / "a-model" / "to-bravo").symlink_to(bravo)
    before = _runs(engine)
    said = set()
    for key, value in (("init_from", bravo), ("data_path", bravo / "metrics.jsonl"),
                       ("val_data_path", team.runs_dir / "a-model" / "to-bravo" / "x.jsonl"),
                       ("cache_dir", bravo / "planted"), ("base_model", "/etc"),
                       ("init_from", team.runs_dir / "no-such-run")):
        err = assert_error(_submit(team, "A-write", **{key: str(value)}), 403)
        assert err["field"] == f"settings.{key}", err
        assert SECRET_MODEL not in err["error"]
        # the same sentence whether the path is another project's run or nothing at all
        said.add(err["error"].replace(repr(str(value)), "PATH").replace(key, "KEY"))
    assert len(said) == 1, said
    assert _runs(engine) == before, "a refused job makes no run"
    assert not (bravo / "planted").exists()


def test_a_project_token_gives_its_own_runs_and_the_server_any_path(team: Team) -> None:
    own = team.runs_dir / "a-model"
    resp = _submit(team, "A-write", init_from=str(own), cache_dir=str(own / "cache"),
                   data_path=None)
    assert resp.status_code == 201, resp.text
    resp = _submit(team, "boot", init_from=str(team.runs_dir / "b-model"))
    assert resp.status_code == 201, resp.text


def test_a_path_setting_given_by_an_alias_is_checked_too(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A recipe setting may be accepted under an older name (TrainConfig.ALIASES); the
    # check read the names as given, so `init=/etc` would have passed as no path setting.
    from runwatch.recipes.config import SFTConfig
    from runwatch.server.jobpaths import foreign_path
    from runwatch.store import open_engine

    monkeypatch.setattr(SFTConfig, "ALIASES", {"init": "init_from"})
    engine = open_engine(tmp_path / "index.db")
    try:
        with engine.connect() as conn:
            assert foreign_path(conn, "sft", ["init=/etc"], tmp_path,
                                frozenset({"alpha"})) == ("init_from", "/etc")
    finally:
        engine.dispose()
