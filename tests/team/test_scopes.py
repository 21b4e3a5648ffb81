"""Project scopes on the real server over HTTP: a token of project A gets nothing of project B
on any route the OpenAPI schema lists; read cannot write; a revoked token is refused; the
server's own token still reaches every project."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine

from runwatch.jobs.spec import command_spec
from runwatch.jobs.submit import submit
from runwatch.server.runner import Runner, free_port
from runwatch.store import jobs as store_jobs
from runwatch.store import tokens
from tests.support import MakeRun, http, sdk_run
from tests.support.cli import cli_here, run_cli
from tests.support.wait import DEADLINE_S

BOOT = "bootstrap-token-4-tests"
A, B = "proj-alpha", "proj-bravo"
B_NAME = "bravo-secret-run"


@dataclass
class Team:
    url: str
    a_run: str
    b_run: str
    secrets: dict[str, str]  # "A-read", "A-write", "A-admin", "B-admin" -> secret
    ids: dict[str, str]  # the same keys -> token id

    def client(self, who: str) -> httpx.Client:
        secret = BOOT if who == "boot" else self.secrets[who]
        return http.client(base_url=self.url, timeout=DEADLINE_S,
                           headers={"Authorization": f"Bearer {secret}"})


@pytest.fixture
def team(engine: Engine, runs_dir: Path, make_run: MakeRun) -> Iterator[Team]:
    a_run = make_run("alpha-run", project=A, steps=3)
    b_run = make_run(B_NAME, project=B, steps=3)
    # a worker holding a job of B: the workers view must not show it to A
    submit(engine, runs_dir, command_spec(["true"], cwd=runs_dir), "bravo-job", B)
    made: dict[str, tuple[str, str]] = {}
    with engine.begin() as conn:
        store_jobs.register_worker(conn, store_jobs.WorkerRow("w-1", "host", 1, 1, "cpu",
                                                              time.time()))
        assert store_jobs.claim(conn, "w-1", 1, time.time()) is not None
        tokens.create_project(conn, A, "test")
        tokens.create_project(conn, B, "test")
        tokens.create_project(conn, "proj-charlie", "test")  # made, no run yet
        for key, project, right in (("A-read", A, "read"), ("A-write", A, "write"),
                                    ("A-admin", A, "admin"), ("B-admin", B, "admin")):
            token, secret = tokens.create(conn, project, right, key, "test")
            made[key] = (token.id, secret)
    with Runner(engine, runs_dir=runs_dir, port=free_port(), token=BOOT, interval=0.05,
                prewarm=False, warm=False) as srv:
        yield Team(srv.url, a_run, b_run, {k: v[1] for k, v in made.items()},
                   {k: v[0] for k, v in made.items()})


def _body(path: str, run: str, project: str) -> Any:
    """A well-formed body for the write routes (any other takes an empty object)."""
    bodies = {
        "/api/ingest": {"run_id": run, "file": "metrics.jsonl",
                        "records": [{"seq": 10_000, "ts": 1.0, "step": 10_000, "loss": 0.5}]},
        "/api/jobs": {"kind": "command", "argv": ["true"], "project": project},
        "/api/tokens": {"project": project, "right": "read", "name": "probe"},
    }
    return bodies.get(path, {})


def _request(client: httpx.Client, method: str, path: str, op: dict[str, Any], run: str,
             project: str, token_id: str, extra: dict[str, str] | None = None
             ) -> tuple[int, str]:
    """Make the operation with its parameters filled for `run` of `project`; (status, body).
    A live list is read up to its `ready` event, which follows the runs it starts with."""
    url = (path.replace("{run}", run).replace("{token_id}", token_id)
           .replace("{worker}", "no-such-worker"))
    assert "{" not in url, f"teach this test the path parameters of {path}"
    params: dict[str, str] = {}
    for p in op.get("parameters", []):
        if p["in"] == "query" and p["name"] in ("run", "baseline"):
            params[p["name"]] = run
        elif p["in"] == "query" and p["name"] == "key":
            params["key"] = "loss"
        elif p["in"] == "query" and p.get("required"):
            pytest.fail(f"teach this test the required parameter {p['name']} of {path}")
    params.update(extra or {})
    body = _body(path, run, project) if method != "get" else None
    with client.stream(method.upper(), url, params=params, json=body) as resp:
        if resp.headers.get("content-type", "").startswith("text/event-stream"):
            seen = ""
            for chunk in resp.iter_text():
                seen += chunk
                # a run's stream says nothing until its run changes: its first frame will do
                if "event: ready" in seen or ("{run}" in path and "\n\n" in seen):
                    break
            return resp.status_code, seen
        return resp.status_code, resp.read().decode()


def _operations(client: httpx.Client) -> list[tuple[str, str, dict[str, Any]]]:
    spec = client.get("/openapi.json").raise_for_status().json()
    return [(path, method, op) for path, ops in spec["paths"].items()
            for method, op in ops.items()]


def test_a_token_of_one_project_gets_nothing_of_another_on_any_route(team: Team) -> None:
    admin_a = team.client("A-admin")
    ops = _operations(admin_a)
    assert len(ops) >= 20, "the schema lists the API's routes"
    b_marks = (team.b_run, B_NAME, B, "bravo-job")
    checked = []
    for path, method, op in ops:
        tries = [None] + ([{"project": B}] if any(p["name"] == "project" for p in
                                                  op.get("parameters", [])) else [])
        for extra in tries:
            status, text = _request(admin_a, method, path, op, team.b_run, B,
                                    team.ids["B-admin"], extra)
            where = f"{method.upper()} {path} {extra or ''} -> {status}: {text[:300]}"
            assert B_NAME not in text, where
            if status < 400:
                assert not any(mark in text for mark in b_marks), where
            else:
                assert status in (403, 404), where
            checked.append(where)
        # the same request on project A's own run is answered: the refusals above come from
        # the scope, not from a malformed request
        if method == "get":
            status, text = _request(admin_a, method, path, op, team.a_run, A,
                                    team.ids["A-read"])
            # (a run compared with itself gets the comparison's own refusal: the scope let
            # the request reach it)
            compared = path == "/api/compare" and status == 400 and "its own baseline" in text
            assert status == 200 or compared, f"GET {path} on A's run -> {status}: {text[:300]}"
    assert any("/api/ingest" in c for c in checked) and any("/stream" in c for c in checked)
    # outside the schema: the Prometheus page names every project's runs
    assert admin_a.get("/metrics").status_code == 403
    assert team.client("boot").get("/metrics").status_code == 200


def test_lists_show_the_scopes_projects_and_the_servers_token_sees_all(team: Team) -> None:
    def names(who: str) -> set[str]:
        return {r["name"] for r in team.client(who).get("/api/runs").json()["runs"]}

    assert names("A-read") == {"alpha-run"}
    missing = team.client("A-read").get("/api/runs/no-such-run")
    assert missing.status_code == 404  # its candidates are A's runs, never B's
    assert [c.split()[1] for c in missing.json()["candidates"]] == ["alpha-run"]
    assert names("B-admin") == {B_NAME, "bravo-job"}
    assert names("boot") == {"alpha-run", B_NAME, "bravo-job"}
    held = team.client("boot").get("/api/workers").json()["workers"][0]["jobs"]
    assert [j["name"] for j in held] == ["bravo-job"]  # hidden from A by the scope alone
    projects = team.client("A-read").get("/api/projects").json()["projects"]
    assert projects == [{"name": A, "runs": 1}]
    every = team.client("boot").get("/api/projects").json()["projects"]
    assert every == [{"name": A, "runs": 1}, {"name": B, "runs": 2},
                     {"name": "proj-charlie", "runs": 0}]
    listed = team.client("A-admin").get("/api/tokens").json()["tokens"]
    assert {t["project"] for t in listed} == {A} and len(listed) == 3
    assert all("secret" not in t and not any(s in str(t) for s in team.secrets.values())
               for t in listed)
    # a job of B waiting in the queue: A's workers view counted it in queue_depth
    assert team.client("B-admin").post("/api/jobs", json={
        "kind": "recipe", "recipe": "sft", "project": B}).status_code == 201
    depth = {who: team.client(who).get("/api/workers").json()["queue_depth"]
             for who in ("boot", "B-admin", "A-read")}
    assert depth == {"boot": 1, "B-admin": 1, "A-read": 0}


def test_read_cannot_write_and_write_cannot_administer(team: Team) -> None:
    read, write = team.client("A-read"), team.client("A-write")
    for client, status in ((read, 403), (write, 409)):  # 409: past the scope, a finished run
        assert client.post(f"/api/runs/{team.a_run}/cancel", json={}).status_code == status
    batch = _body("/api/ingest", team.a_run, A)
    refused = read.post("/api/ingest", json=batch)
    assert refused.status_code == 403 and refused.json()["results"][0]["status"] == 403
    assert "write on project 'proj-alpha'" in refused.json()["error"]
    # past the scope, the folder is the run's record: ingest never writes a folder's run
    assert write.post("/api/ingest", json=batch).status_code == 409
    sent_id = "5e" * 16  # a run of the write token's project, sent over HTTP
    sent = {**batch, "run_id": sent_id, "manifest": {
        "schema_version": 1, "run_id": sent_id, "name": "sent-by-write", "project": A,
        "created_at": 1.0}}
    assert write.post("/api/ingest", json=sent).json()["ok"] is True
    # a write token cannot move its run into another project, nor write into one
    moved = {**batch, "manifest": {"schema_version": 1, "run_id": team.a_run, "name": "x",
                                   "project": B, "created_at": 1.0}}
    assert write.post("/api/ingest", json=moved).status_code == 403
    assert write.post("/api/ingest", json=_body("/api/ingest", team.b_run, B)).status_code == 403
    command = _body("/api/jobs", "", A)
    recipe = {"kind": "recipe", "recipe": "sft", "project": A, "name": "queued-by-write"}
    assert read.post("/api/jobs", json=recipe).status_code == 403
    assert write.post("/api/jobs", json=recipe).status_code == 201
    # a command runs as the server's user, outside any project: the server's token only
    refused = write.post("/api/jobs", json=command)
    assert refused.status_code == 403 and "the server's token" in refused.json()["error"]
    assert team.client("boot").post("/api/jobs", json=command).status_code == 201
    for client in (read, write):
        assert client.get("/api/tokens").status_code == 403
        made = client.post("/api/tokens", json=_body("/api/tokens", "", A))
        assert made.status_code == 403 and "admin" in made.json()["error"]
        assert client.post("/api/workers/w/drain", json={}).status_code == 403


def test_a_revoked_token_is_refused_at_once(team: Team) -> None:
    reader = team.client("A-read")
    assert reader.get("/api/runs").status_code == 200
    token_id = team.ids["A-read"]
    # another project's admin does not see the token, let alone revoke it
    assert team.client("B-admin").post(f"/api/tokens/{token_id}/revoke",
                                       json={}).status_code == 404
    done = team.client("A-admin").post(f"/api/tokens/{token_id}/revoke", json={})
    assert done.status_code == 200 and done.json()["token"]["revoked_at"] is not None
    refused = reader.get("/api/runs")
    assert refused.status_code == 401 and "revoked" in refused.json()["error"]
    assert reader.get("/api/runs", params={"token": team.secrets["A-read"]}).status_code == 401


def test_a_token_made_over_http_works_and_its_secret_is_shown_once(team: Team) -> None:
    admin = team.client("A-admin")
    made = admin.post("/api/tokens", json={"project": A, "right": "write", "name": "ci"})
    assert made.status_code == 201
    secret = made.json()["secret"]
    assert secret.startswith("rw_") and made.json()["token"]["created_by"].startswith("token")
    assert secret not in admin.get("/api/tokens").text
    fresh = http.client(base_url=team.url, headers={"Authorization": f"Bearer {secret}"})
    assert {r["name"] for r in fresh.get("/api/runs").json()["runs"]} == {"alpha-run"}
    # an admin of A cannot make a token of B
    assert admin.post("/api/tokens", json={"project": B, "name": "x"}).status_code == 403


def test_runwatch_sync_with_a_write_token_sends_its_projects_runs_only(
        team: Team, tmp_path: Path) -> None:
    laptop = tmp_path / "laptop"
    sdk_run(laptop, "laptop-alpha", steps=3, project=A)
    sdk_run(laptop, "laptop-bravo", steps=3, project=B)
    sdk_run(laptop, "laptop-alpha-2", steps=3, project=A)
    token = ["--server", team.url, "--token", team.secrets["A-write"]]
    run_cli("sync", str(laptop / "laptop-alpha"), *token)  # the real command line
    # the refusals in this process (the same app, without a new interpreter's imports)
    refused = cli_here("sync", str(laptop / "laptop-bravo"), *token, check=False)
    assert refused.returncode != 0 and "write on project 'proj-bravo'" in refused.stderr + \
        refused.stdout
    read_only = cli_here("sync", str(laptop / "laptop-alpha-2"), "--server", team.url,
                         "--token", team.secrets["A-read"], check=False)
    assert read_only.returncode != 0 and "write on project 'proj-alpha'" in \
        read_only.stderr + read_only.stdout
    names = {r["name"] for r in team.client("boot").get("/api/runs").json()["runs"]}
    assert names == {"alpha-run", B_NAME, "bravo-job", "laptop-alpha"}
