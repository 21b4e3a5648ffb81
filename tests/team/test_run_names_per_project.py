"""A run's name is its own within its project on a team server: a token of project A neither
learns that project B has a run of a name (its ingest is not refused) nor takes a name from
B's SDK; each token finds its own project's run by name; the server's token, naming a run two
projects hold, gets a 409 that lists them and says how to name one (`?project=`,
`PROJECT/RUN`), over HTTP and through `runwatch runs get --server`.

The real server (runwatch.server.runner.Runner) over HTTP, on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine, func, select

from runwatch.server.runner import Runner, free_port
from runwatch.store import schema as s
from runwatch.store import tokens
from tests.server.apiclient import manifest
from tests.support import cli_here, http
from tests.support.wait import DEADLINE_S

BOOT = "bootstrap-token-run-names"
A, B = "proj-alpha", "proj-bravo"
NAME = "shared-name"
A_ID, B_ID, A2_ID = "a" * 32, "b" * 32, "c" * 32


@dataclass
class Team:
    url: str
    secrets: dict[str, str]  # "A", "B" (write on each) -> secret

    def client(self, who: str) -> httpx.Client:
        secret = BOOT if who == "boot" else self.secrets[who]
        return http.client(base_url=self.url, timeout=DEADLINE_S,
                           headers={"Authorization": f"Bearer {secret}"})


@pytest.fixture
def team(engine: Engine, runs_dir: Path) -> Iterator[Team]:
    secrets = {}
    with engine.begin() as conn:
        for who, project in (("A", A), ("B", B)):
            tokens.create_project(conn, project, "test")
            secrets[who] = tokens.create(conn, project, "write", f"{who}-sdk", "test")[1]
    with Runner(engine, runs_dir=runs_dir, port=free_port(), token=BOOT, interval=0.05,
                prewarm=False, warm=False) as srv:
        yield Team(srv.url, secrets)


def send(client: httpx.Client, run_id: str, project: str, name: str = NAME,
         loss: float = 1.0) -> httpx.Response:
    return client.post("/api/ingest", json={
        "run_id": run_id, "file": "metrics.jsonl", "manifest": manifest(run_id, name,
                                                                        project=project),
        "records": [{"seq": 0, "ts": 1.0, "step": 0, "loss": loss}]})


def body(resp: httpx.Response, status: int = 200) -> dict[str, Any]:
    assert resp.status_code == status, resp.text
    answer: dict[str, Any] = resp.json()
    return answer


def test_two_projects_each_send_a_run_of_one_name_and_each_token_finds_its_own(
        team: Team, engine: Engine) -> None:
    with team.client("B") as b, team.client("A") as a:
        body(send(b, B_ID, B, loss=2.0))
        # A's token is not told that B holds the name, and B's later runs keep theirs
        body(send(a, A_ID, A, loss=1.0))
        # within a project the name is still one run's
        refused = body(send(a, A2_ID, A), 409)
        assert f"{NAME!r} is already taken in project {A!r}" in refused["error"]
        assert B not in refused["error"]
        assert body(a.get(f"/api/runs/{NAME}"))["run_id"] == A_ID
        assert body(b.get(f"/api/runs/{NAME}"))["run_id"] == B_ID
        series = body(a.get("/api/series", params={"run": NAME, "key": "loss"}))["series"]
        assert series[0]["value"] == [1.0]
        # another project named outright is refused as for lists, saying nothing of its runs
        assert "needs read on project" in body(
            a.get(f"/api/runs/{NAME}", params={"project": B}), 403)["error"]
        assert body(a.get("/api/series", params={"run": f"{B}/{NAME}", "key": "loss"}),
                    403)["status"] == 403
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(s.runs)
                            .where(s.runs.c.name == NAME)).scalar() == 2


def test_the_servers_token_is_told_which_projects_hold_a_name_and_how_to_say_which(
        team: Team) -> None:
    with team.client("A") as a, team.client("B") as b:
        body(send(a, A_ID, A))
        body(send(b, B_ID, B))
    with team.client("boot") as boot:
        err = body(boot.get(f"/api/runs/{NAME}"), 409)
        assert err["ok"] is False and err["status"] == 409
        assert err["projects"] == [A, B]
        assert f"{A}/{NAME}" in err["error"] and f"?project={A}" in err["error"]
        assert sorted(err["candidates"]) == [f"{A_ID}  {A}/{NAME}", f"{B_ID}  {B}/{NAME}"]
        assert body(boot.get(f"/api/runs/{NAME}", params={"project": B}))["run_id"] == B_ID
        assert body(boot.get(f"/api/runs/{NAME}/events", params={"project": A}))["ok"]
        answer = body(boot.get("/api/overlay", params=[("run", f"{A}/{NAME}"),
                                                      ("run", f"{B}/{NAME}")]))
        assert [r["run"]["run_id"] for r in answer["runs"]] == [A_ID, B_ID]
        assert body(boot.get(f"/api/runs/{A_ID}"))["name"] == NAME  # an id names one run
        assert "in project 'proj-charlie'" in body(
            boot.get(f"/api/runs/{NAME}", params={"project": "proj-charlie"}), 404)["error"]

    env = {"RUNWATCH_SERVER": team.url, "RUNWATCH_TOKEN": BOOT}
    res = cli_here("runs", "get", NAME, "-o", "json", env=env, check=False)
    assert res.returncode == 2
    said = res.stdout + res.stderr
    assert f"{A}/{NAME}" in said and B_ID in said and "?project=" not in said
    res = cli_here("runs", "get", f"{B}/{NAME}", "-o", "json", env=env)
    assert '"run_id": "' + B_ID in res.stdout
