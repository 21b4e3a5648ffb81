"""Job routes over real HTTP: submit (recipe and command), the recipe listing, workers and
drain, cancel and retry, and the run detail's job, cost and actions.

The server is the real one (no embedded worker, so a submitted job stays QUEUED until a
test claims it through store.jobs as a worker would).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine

from runwatch.jobs.cost import PROFILES_ENV
from runwatch.sdk.lock import RunLock
from runwatch.server.runner import Runner, free_port
from runwatch.store import jobs as store_jobs
from runwatch.store.db import database_url, open_engine
from tests.support import MakeRun, http, wait_for
from tests.support.jobs import events, job
from tests.support.stores import STORES, PostgresDatabases
from tests.support.wait import DEADLINE_S

from .apiclient import assert_error, manifest


def post(server: Runner, path: str, body: Any = None) -> httpx.Response:
    return http.post(f"{server.url}{path}", json={} if body is None else body, timeout=30)


def get(server: Runner, path: str) -> dict[str, Any]:
    resp = http.get(f"{server.url}{path}", timeout=30)
    assert resp.status_code == 200, resp.text
    body: dict[str, Any] = resp.json()
    return body


def submit_recipe(server: Runner, name: str, **body: Any) -> dict[str, Any]:
    resp = post(server, "/api/jobs", {"kind": "recipe", "recipe": "sft", "name": name,
                                      "settings": {"max_steps": 3}, **body})
    assert resp.status_code == 201, resp.text
    answer: dict[str, Any] = resp.json()
    return answer


def test_a_submitted_recipe_is_queued_at_once_in_every_view(server: Runner, runs_dir: Path
                                                            ) -> None:
    answer = submit_recipe(server, "sft-a", project="demo", priority=3, max_attempts=2,
                           settings={"max_steps": "7", "lora_rank": 4, "export_samples": False,
                                     "wandb_project": None})
    assert answer["status"] == "QUEUED" and answer["run"]["name"] == "sft-a"
    assert answer["run"]["status"] == "QUEUED" and answer["run"]["attempt"] == 1
    # no indexer pass needed: submit indexed the folder itself
    listed = get(server, "/api/runs?q=sft-a")["runs"]
    assert [r["status"] for r in listed] == ["QUEUED"]
    assert [r["name"] for r in get(server, "/api/runs?status=QUEUED")["runs"]] == ["sft-a"]
    assert get(server, "/api/runs?status=RUNNING")["runs"] == []
    assert [r["name"] for r in get(server, "/api/runs?status=queued")["runs"]] == ["sft-a"]
    assert_error(http.get(f"{server.url}/api/runs?status=waiting", timeout=30), 400)
    detail = get(server, "/api/runs/sft-a")
    job = detail["job"]
    assert job["argv"][-6:] == ["recipes", "sft", "max_steps=7", "lora_rank=4",
                                "export_samples=false", "wandb_project=none"]
    assert (job["kind"], job["recipe"], job["priority"], job["max_attempts"], job["devices"],
            job["device_profile"], job["worker_id"]) == ("recipe", "sft", 3, 2, 1, "cpu", None)
    assert detail["actions"] == {"cancel": True, "retry": False}
    assert detail["run"]["project"] == "demo" and detail["state"]["method"] == "sft"
    # queued: waiting costs nothing, and the figures grow until it ends
    assert detail["cost"]["device_seconds"] == 0 and detail["cost"]["spend"] == 0
    assert detail["cost"]["device_seconds_estimate"] is True
    assert set(detail["timing"]["phaseMillis"]) == {"QUEUED"}
    assert [a["attempt"] for a in detail["attempts"]] == [1]
    assert events(runs_dir / "sft-a")[0]["phase"] == "QUEUED"
    assert get(server, "/api/workers")["queue_depth"] == 1


def test_a_command_job_runs_in_the_server_s_folder(server: Runner) -> None:
    resp = post(server, "/api/jobs", {"kind": "command", "argv": [sys.executable, "train.py"],
                                      "name": "cmd-1", "devices": 1})
    assert resp.status_code == 201, resp.text
    job = get(server, "/api/runs/cmd-1")["job"]
    assert job["kind"] == "command" and job["recipe"] is None
    assert job["argv"] == [sys.executable, "train.py"] and job["cwd"] == str(Path.cwd())


def test_a_command_job_runs_in_the_working_folder_it_gives(server: Runner, tmp_path: Path
                                                         ) -> None:
    folder = tmp_path / "my project"
    folder.mkdir()
    for name, given in (("cmd-abs", str(folder)), ("cmd-rel", "."),
                        ("cmd-dots", f"{folder}/sub/..")):
        if given.endswith(".."):
            (folder / "sub").mkdir()
        resp = post(server, "/api/jobs", {"kind": "command", "argv": ["python", "train.py"],
                                          "name": name, "cwd": given})
        assert resp.status_code == 201, resp.text
    # a relative folder is read from the server's own; each is kept as a plain absolute path
    assert get(server, "/api/runs/cmd-abs")["job"]["cwd"] == str(folder)
    assert get(server, "/api/runs/cmd-rel")["job"]["cwd"] == str(Path.cwd())
    assert get(server, "/api/runs/cmd-dots")["job"]["cwd"] == str(folder)


@pytest.fixture(scope="module", params=STORES)
def refusing(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
             ) -> Iterator[tuple[Runner, Path]]:
    """The real server and its runs folder, once per store for the bad jobs below: each is
    refused and leaves no run and no folder (each case checks), so they share one server
    instead of starting 15 (a start and a new index are most of such a case's time)."""
    folder = tmp_path_factory.mktemp("refusing")
    runs_dir = folder / "runs"
    runs_dir.mkdir()
    url = database_url(folder / "index.db")
    databases: PostgresDatabases | None = None
    if request.param == "postgres":
        databases = request.getfixturevalue("postgres")
        url = databases.create()
    engine = open_engine(url)
    try:
        with Runner(engine, runs_dir=runs_dir, port=free_port(), interval=0.05, warm=False) as srv:
            yield srv, runs_dir
    finally:
        engine.dispose()
        if databases is not None:
            databases.drop(url)


@pytest.mark.parametrize(("body", "status", "field", "words"), [
    ({"settings": {"max_steps": "many"}}, 422, "settings.max_steps",
     "max_steps='many' is not a valid int"),
    ({"settings": {"max_stpes": 3}}, 422, "settings.max_stpes", "has no setting 'max_stpes'"),
    ({"settings": {"runs_dir": "/tmp"}}, 422, "settings.runs_dir", "runs_dir is the job's own"),
    ({"settings": {"name": "x"}}, 422, "settings.name", "set it in the job's name field"),
    ({"settings": {"d_model": 130}}, 422, "settings.d_model", "must be divisible by n_head"),
    # each alone is fine, together they are not: no one setting is at fault
    ({"settings": {"d_model": 36, "n_head": 8}}, 422, None, "d_model 36 must be divisible"),
    ({"recipe": "ppo"}, 422, "recipe", "recipe must be one of sft, dpo, grpo"),
    ({"argv": ["python"]}, 422, "argv", "leave argv out"),
    ({"device_profile": "b200"}, 422, "device_profile", "no device profile 'b200'"),
    ({"devices": 2}, 422, "devices", "has 1 device, so a job on it can ask for at most"),
    ({"name": "../up"}, 422, "name", "may only hold letters"),
    ({"project": "a b"}, 422, "project", "project name 'a b' may only hold"),
    ({"kind": "shell"}, 400, None, "kind"),
    # a command's working folder must be a folder on the server's host (trial 35, D1: the
    # New job form's Working folder was refused as a field the API did not know)
    ({"kind": "command", "recipe": None, "argv": ["x"], "cwd": "/no/such/folder"}, 400, "cwd",
     "working folder /no/such/folder does not exist"),
    ({"kind": "command", "recipe": None, "argv": ["x"], "cwd": sys.executable}, 400, "cwd",
     "is not a folder"),
    ({"cwd": "/tmp"}, 422, "cwd", "a recipe job runs in the server's working folder"),
    ({"devices": 0}, 400, None, "devices"),
    ({"extra": 1}, 400, None, "extra"),
])
def test_a_bad_job_is_refused_naming_its_field(refusing: tuple[Runner, Path],
                                               body: dict[str, Any], status: int,
                                               field: str | None, words: str) -> None:
    server, runs_dir = refusing
    sent = {"kind": "recipe", "recipe": "sft", "name": "bad", **body}
    err = assert_error(post(server, "/api/jobs", sent), status)
    assert words in err["error"] and err.get("field") == field
    assert "\n" not in err["error"]
    assert not (runs_dir / "bad").exists() and get(server, "/api/runs")["runs"] == []


def test_a_command_job_needs_argv_and_takes_no_settings(server: Runner) -> None:
    err = assert_error(post(server, "/api/jobs", {"kind": "command"}), 422)
    assert err["field"] == "argv" and "needs argv" in err["error"]
    err = assert_error(post(server, "/api/jobs", {"kind": "command", "argv": ["x"],
                                                  "settings": {"a": 1}}), 422)
    assert err["field"] == "settings"


def test_a_taken_name_is_a_conflict_and_the_first_run_is_untouched(server: Runner,
                                                                   runs_dir: Path) -> None:
    submit_recipe(server, "same")
    before = (runs_dir / "same" / "job.json").read_bytes()
    err = assert_error(post(server, "/api/jobs", {"kind": "recipe", "recipe": "sft",
                                                  "name": "same"}), 409)
    assert err["field"] == "name" and "already exists" in err["error"]
    assert (runs_dir / "same" / "job.json").read_bytes() == before


def test_a_job_write_needs_json_from_this_origin_and_the_token(engine: Engine, runs_dir: Path
                                                               ) -> None:
    token = "Tok3n-for-jobs-only!"
    with Runner(engine, runs_dir=runs_dir, port=free_port(), token=token, warm=False) as srv:
        body = {"kind": "command", "argv": ["true"], "name": "w"}
        assert http.post(f"{srv.url}/api/jobs", json=body, timeout=30).status_code == 401
        auth = {"Authorization": f"Bearer {token}"}
        form = http.post(f"{srv.url}/api/jobs", data={"kind": "command"}, headers=auth,
                         timeout=30)
        assert form.status_code == 415
        foreign = http.post(f"{srv.url}/api/jobs", json=body, timeout=30,
                            headers={**auth, "Origin": "https://evil.example"})
        assert foreign.status_code == 403
        assert not (runs_dir / "w").exists()
        ok = http.post(f"{srv.url}/api/jobs", json=body, headers=auth, timeout=30)
        assert ok.status_code == 201, ok.text


def test_recipes_list_their_settings_and_the_profiles(server: Runner, runs_dir: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(PROFILES_ENV, raising=False)
    (runs_dir / ".runwatch").mkdir(exist_ok=True)
    (runs_dir / ".runwatch" / "profiles.yaml").write_text(
        "profiles:\n  a100x8: {devices: 8, device_memory_gib: 80, hourly_rate: 2.5}\n")
    body = get(server, "/api/recipes")
    assert [r["name"] for r in body["recipes"]] == ["sft", "dpo", "grpo"]
    sft = {s["name"]: s for s in body["recipes"][0]["settings"]}
    assert sft["max_steps"] == {"name": "max_steps", "type": "int", "nullable": False,
                                "default": 400, "help": "Optimizer steps to train."}
    assert sft["base_model"]["type"] == "str" and sft["base_model"]["nullable"] is True
    assert sft["export_samples"]["type"] == "bool"
    assert not {"name", "project", "runs_dir", "resume"} & set(sft)
    grpo = {s["name"] for s in body["recipes"][2]["settings"]}
    assert "group_size" in grpo and "group_size" not in sft  # each recipe its own settings
    profiles = {p["name"]: p for p in body["device_profiles"]}
    assert body["default_profile"] == "cpu" and set(profiles) == {"a100x8", "cpu"}
    assert profiles["a100x8"]["devices"] == 8 and profiles["a100x8"]["hourly_rate"] == 2.5
    # a job may now ask for that profile's devices
    submit_recipe(server, "big", device_profile="a100x8", devices=8)
    cost = get(server, "/api/runs/big")["cost"]
    assert (cost["device_profile"], cost["devices"], cost["hourly_rate"]) == ("a100x8", 8, 2.5)
    # the profile leaves the file: the run's time stays known, its price does not
    (runs_dir / ".runwatch" / "profiles.yaml").write_text("profiles: {}\n")
    cost = get(server, "/api/runs/big")["cost"]
    assert (cost["device_profile"], cost["hourly_rate"], cost["spend"]) == ("a100x8", None, None)
    assert "profile 'a100x8' is not among the profiles (cpu)" in cost["problem"]


def test_a_broken_profiles_file_leaves_spend_unknown_and_says_why(
        server: Runner, runs_dir: Path, make_run: MakeRun, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    broken = tmp_path / "profiles.yaml"
    broken.write_text("profiles: [")
    monkeypatch.setenv(PROFILES_ENV, str(broken))
    make_run("hand", steps=2)
    # the whole run: a pass may index its manifest before its events
    wait_for(lambda: (http.get(f"{server.url}/api/runs/hand").json().get("run") or {})
             .get("status") == "SUCCEEDED", what="the run indexed to its end")
    detail = get(server, "/api/runs/hand")
    cost = detail["cost"]
    assert cost["spend"] is None and cost["hourly_rate"] is None
    assert str(broken) in cost["problem"]
    # the time is still known
    assert cost["device_seconds"] == detail["timing"]["phaseMillis"]["RUNNING"] / 1000
    err = assert_error(post(server, "/api/jobs", {"kind": "command", "argv": ["true"]}), 409)
    assert str(broken) in err["error"]


def _worker(engine: Engine, wid: str, devices: int = 2, started: float | None = None,
            runs_dir: str | None = None) -> None:
    """Register worker `wid` (of `runs_dir`, None: not known) as started an hour ago (or at
    `started`), stamped now."""
    with engine.begin() as conn:
        store_jobs.register_worker(conn, store_jobs.WorkerRow(
            wid, "host-a", 4242, devices, "cpu", started or time.time() - 3600,
            runs_dir=runs_dir))
        store_jobs.heartbeat(conn, wid, time.time())


def test_submit_and_retry_say_which_worker_starts_the_job_or_how_to_start_one(
        server: Runner, engine: Engine, runs_dir: Path) -> None:
    """A queued job with no worker of its profile waits for nobody: the answer says so and
    how to start one; a live worker of the profile is named, a draining one is not."""
    alone = submit_recipe(server, "alone")
    assert alone["next"].startswith("no worker of profile cpu is running on this index")
    assert f"runwatch worker {runs_dir} --device-profile cpu" in alone["next"]
    _worker(engine, "w-1")
    assert submit_recipe(server, "picked")["next"] == (
        "worker w-1 will start it when its devices are free")
    assert post(server, "/api/workers/w-1/drain").status_code == 200
    assert post(server, "/api/runs/alone/cancel").json()["status"] == "CANCELLED"
    retried = post(server, "/api/runs/alone/retry").json()
    assert retried["status"] == "QUEUED"
    # its only worker drains: it says so, not that no worker runs
    assert retried["next"].startswith("attempt 2: every running worker of profile cpu that "
                                      "claims this folder's jobs is draining (w-1)")
    # a worker of another runs folder never claims the job: it was named all the same
    _worker(engine, "w-2", runs_dir="/elsewhere/runs")
    other = submit_recipe(server, "other")["next"]
    assert other.startswith("no worker of profile cpu runs the jobs of "), other
    assert "the running ones claim jobs of /elsewhere/runs only" in other, other
    assert "runwatch worker " in other and "--device-profile cpu" in other, other
    folder = str(Path(get(server, "/api/runs/other")["dir"]).parent)
    _worker(engine, "w-3", runs_dir=folder)
    assert submit_recipe(server, "mine")["next"] == (
        "worker w-3 will start it when its devices are free")
    # two that would: one of them starts it, not both (it read "worker w-3, w-4 will …")
    _worker(engine, "w-4", runs_dir=folder)
    assert submit_recipe(server, "either")["next"] in (
        f"one of the workers {a}, {b} will start it when its devices are free"
        for a, b in (("w-3", "w-4"), ("w-4", "w-3")))


def test_workers_show_devices_jobs_rate_and_spend_and_drain(server: Runner, engine: Engine
                                                            ) -> None:
    submit_recipe(server, "held")
    submit_recipe(server, "waiting")
    _worker(engine, "w-1")
    with engine.begin() as conn:
        claim = store_jobs.claim(conn, "w-1", 2, time.time())
    assert claim is not None and claim.name == "held"
    body = get(server, "/api/workers")
    assert body["queue_depth"] == 1
    (w,) = body["workers"]
    assert (w["id"], w["devices"], w["devices_used"], w["status"], w["draining"]) == (
        "w-1", 2, 1, "active", False)
    assert [j["name"] for j in w["jobs"]] == ["held"] and w["hourly_rate"] == 0.05
    # up an hour with two devices at the cpu rate
    assert w["spend"] == pytest.approx(2 * 0.05, rel=0.01)
    drained = post(server, "/api/workers/w-1/drain")
    assert drained.status_code == 200, drained.text
    assert drained.json()["worker"]["status"] == "draining"
    with engine.connect() as conn:
        assert store_jobs.draining(conn, "w-1")
    assert get(server, "/api/workers")["workers"][0]["status"] == "draining"
    assert_error(post(server, "/api/workers/nope/drain"), 404)
    with engine.begin() as conn:
        store_jobs.stop_worker(conn, "w-1", time.time())
    err = assert_error(post(server, "/api/workers/w-1/drain"), 409)
    assert "already stopped" in err["error"]


def test_a_worker_without_heartbeats_is_lost_and_its_spend_stops(server: Runner,
                                                                  engine: Engine) -> None:
    _worker(engine, "w-old", devices=1, started=time.time() - 7200)
    with engine.begin() as conn:
        store_jobs.heartbeat(conn, "w-old", time.time() - 3600)
    (w,) = get(server, "/api/workers")["workers"]
    assert w["status"] == "lost" and w["heartbeat_age_s"] >= 3600
    assert w["spend"] == pytest.approx(0.05, rel=0.01)  # one hour up, not two


def test_a_lost_worker_that_holds_jobs_costs_until_now_and_says_what_they_wait_for(
        server: Runner, engine: Engine) -> None:
    """Its job may run on (a Ray job on the cluster) until a worker that can ask its
    executor reaps it: the job says it waits for a Ray worker while none is live (a local
    worker cannot reap it). Its spend runs on while it holds the job, which holds its
    devices (session 37, defect 6.3; tests/jobs/test_lost_worker_spend.py follows it to
    the reap)."""
    submit_recipe(server, "orphan")
    with engine.begin() as conn:
        store_jobs.register_worker(conn, store_jobs.WorkerRow(
            "w-ray", "host-a", 4242, 1, "cpu", time.time() - 7200, executor="ray"))
        assert store_jobs.claim(conn, "w-ray", 1, time.time()) is not None
        store_jobs.heartbeat(conn, "w-ray", time.time() - 3600)

    def lost() -> dict[str, Any]:
        return next(w for w in get(server, "/api/workers")["workers"] if w["id"] == "w-ray")

    w = lost()
    assert (w["status"], w["executor"]) == ("lost", "ray")
    assert w["spend"] == pytest.approx(0.1, rel=0.01)  # up two hours, until now
    assert "waits for a Ray worker" in w["jobs"][0]["waits_for"]
    _worker(engine, "w-local")
    assert "waits for a Ray worker" in lost()["jobs"][0]["waits_for"]
    with engine.begin() as conn:
        store_jobs.register_worker(conn, store_jobs.WorkerRow(
            "w-ray-2", "host-b", 4343, 1, "cpu", time.time(), executor="ray"))
    assert lost()["jobs"][0]["waits_for"] is None


def test_cancel_a_queued_job_at_once_then_retry_it_as_attempt_two(server: Runner,
                                                                    runs_dir: Path) -> None:
    submit_recipe(server, "c1")
    resp = post(server, "/api/runs/c1/cancel")
    assert resp.status_code == 200, resp.text
    answer = resp.json()
    assert answer["status"] == "CANCELLED" and answer["run"]["status"] == "CANCELLED"
    detail = get(server, "/api/runs/c1")
    assert detail["actions"] == {"cancel": False, "retry": True}
    assert detail["failure"]["code"] == "cancelled_before_start"
    assert detail["failure"]["what_to_do"]
    assert detail["cost"]["device_seconds_estimate"] is False
    err = assert_error(post(server, "/api/runs/c1/cancel"), 409)
    assert "already ended (CANCELLED)" in err["error"] and "retry" in err["error"]

    retried = post(server, "/api/runs/c1/retry")
    assert retried.status_code == 200, retried.text
    assert retried.json()["status"] == "QUEUED" and retried.json()["run"]["attempt"] == 2
    detail = get(server, "/api/runs/c1")
    assert [(a["attempt"], a["phase"], a["ended"]) for a in detail["attempts"]] == [
        (1, "CANCELLED", True), (2, "QUEUED", False)]
    assert detail["attempts"][0]["reason_code"] == "cancelled_before_start"
    assert detail["actions"] == {"cancel": True, "retry": False}
    assert detail["failure"] is None and detail["job"]["attempt"] == 2
    err = assert_error(post(server, "/api/runs/c1/retry"), 409)
    assert "only an ended run can be retried" in err["error"]
    assert [e["phase"] for e in events(runs_dir / "c1")] == ["QUEUED", "CANCELLED", "QUEUED"]


def test_cancel_of_a_claimed_job_asks_its_worker_to_stop_it(server: Runner,
                                                            engine: Engine) -> None:
    submit_recipe(server, "c2")
    _worker(engine, "w-2")
    with engine.begin() as conn:
        assert store_jobs.claim(conn, "w-2", 1, time.time()) is not None
    resp = post(server, "/api/runs/c2/cancel")
    assert resp.status_code == 200, resp.text
    assert resp.json()["status"] == "CANCEL_REQUESTED"
    assert resp.json()["run"]["status"] == "CANCEL_REQUESTED"
    detail = get(server, "/api/runs/c2")
    assert detail["actions"] == {"cancel": False, "retry": False}
    assert detail["job"]["cancel_requested_at"] is not None
    err = assert_error(post(server, "/api/runs/c2/cancel"), 409)
    assert "already stopping" in err["error"]


def test_a_run_sent_over_http_has_no_folder_here_to_cancel_or_retry(server: Runner) -> None:
    for phase in ("RUNNING", "FAILED"):
        body = {"run_id": f"http-{phase}", "file": "events.jsonl",
                "manifest": manifest(f"http-{phase}", f"sent-{phase}"),
                "records": [{"seq": 0, "ts": time.time(), "phase": phase}]}
        assert post(server, "/api/ingest", body).status_code == 200
        # its job.json too: a run the server has a job of but no folder
        job = {"run_id": f"http-{phase}", "manifest": manifest(f"http-{phase}", f"sent-{phase}"),
               "file": "job.json", "content": {"kind": "command", "argv": ["true"], "cwd": "/"}}
        assert post(server, "/api/ingest", job).status_code == 200
        run = get(server, f"/api/runs/sent-{phase}")
        assert run["actions"] == {"cancel": False, "retry": False}
        action = "cancel" if phase == "RUNNING" else "retry"
        err = assert_error(post(server, f"/api/runs/sent-{phase}/{action}"), 409)
        assert "stop" in err["error"] or "retry it where it ran" in err["error"]


@pytest.fixture
def working(engine: Engine, runs_dir: Path) -> Iterator[Runner]:
    """The real server with one embedded worker of one cpu device."""
    with Runner(engine, runs_dir=runs_dir, port=free_port(), interval=0.05, workers=1,
                worker_settings={"heartbeat_s": 0.2, "grace_s": 2.0}, warm=False) as srv:
        yield srv


def _ended(server: Runner, name: str, attempt: int) -> Callable[[], bool]:
    def check() -> bool:
        run = get(server, f"/api/runs/{name}")["run"]
        return run["attempt"] == attempt and run["status"] in ("SUCCEEDED", "FAILED",
                                                               "CANCELLED")
    return check


def test_a_job_s_cost_counts_every_attempt_a_worker_ran(working: Runner) -> None:
    body = {"kind": "command", "name": "twice",
            "argv": [sys.executable, "-c", "import time; time.sleep(0.5)"]}
    assert post(working, "/api/jobs", body).status_code == 201
    wait_for(_ended(working, "twice", 1), what="attempt 1 ended")
    first = get(working, "/api/runs/twice")
    assert first["cost"]["device_seconds_estimate"] is False
    assert first["cost"]["device_seconds"] >= 0.5  # the process slept that long
    assert first["actions"] == {"cancel": False, "retry": True}
    assert post(working, "/api/runs/twice/retry").status_code == 200
    wait_for(_ended(working, "twice", 2), what="attempt 2 ended")
    second = get(working, "/api/runs/twice")
    held = [a["device_seconds"] for a in second["attempts"]]
    assert len(held) == 2 and held[0] == first["cost"]["device_seconds"]
    assert second["cost"]["device_seconds"] == pytest.approx(sum(held))
    assert second["cost"]["spend"] == pytest.approx(sum(held) / 3600 * 0.05)
    assert second["timing"]["phaseMillis"]["QUEUED"] >= first["timing"]["phaseMillis"]["QUEUED"]


def test_cancel_a_running_job_stops_its_process(working: Runner, runs_dir: Path) -> None:
    body = {"kind": "command", "name": "long",
            "argv": [sys.executable, "-c", "import time; time.sleep(600)"]}
    assert post(working, "/api/jobs", body).status_code == 201
    wait_for(lambda: get(working, "/api/workers")["workers"][0]["jobs"] != [] and
             get(working, "/api/runs/long")["run"]["status"] in ("PREPARING", "RUNNING"),
             what="the job started")
    pid = wait_for(lambda: (job(working.engine, "long") or {}).get("pid"),
                   what="the job's process id")
    assert pid is not None
    resp = post(working, "/api/runs/long/cancel")
    assert resp.status_code == 200, resp.text
    assert resp.json()["status"] == "CANCEL_REQUESTED"
    wait_for(_ended(working, "long", 1), what="the cancelled job ended")
    detail = get(working, "/api/runs/long")
    assert detail["run"]["status"] == "CANCELLED" and detail["failure"]["code"] == "cancelled"
    assert detail["actions"] == {"cancel": False, "retry": True}
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_retry_while_a_process_still_holds_the_folder_is_retried_later(
        engine: Engine, runs_dir: Path) -> None:
    # a server that waits half a second for the folder's lock, not the default 10 s: how
    # long it waits is a setting, what it answers once it gives up is what is tested
    with Runner(engine, runs_dir=runs_dir, port=free_port(), interval=0.05, warm=False,
                lock_wait_s=0.5) as server:
        submit_recipe(server, "busy")
        assert post(server, "/api/runs/busy/cancel").json()["status"] == "CANCELLED"
        lock = RunLock(runs_dir / "busy")  # as a process that has not exited yet holds it
        try:
            resp = post(server, "/api/runs/busy/retry")  # waits for the lock, then gives up
            err = assert_error(resp, 503)
            assert resp.headers["Retry-After"] == "2" and "try again in a moment" in err["error"]
        finally:
            lock.release()
        assert post(server, "/api/runs/busy/retry").json()["status"] == "QUEUED"


HAND_RUN = """
import sys, time
import runwatch
with runwatch.init(name="byhand", dir=sys.argv[1]) as run:
    for step in range(100000):
        run.log({"loss": 1.0}, step=step)
        time.sleep(0.05)
"""


def test_cancel_a_run_started_by_hand_here_sends_its_process_sigterm(
        server: Runner, runs_dir: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", HAND_RUN, str(runs_dir)],
                            start_new_session=True)
    try:
        wait_for(lambda: http.get(f"{server.url}/api/runs/byhand", timeout=30).status_code
                 == 200 and get(server, "/api/runs/byhand")["actions"]["cancel"],
                 what="the run started by hand, running")
        resp = post(server, "/api/runs/byhand/cancel")
        assert resp.status_code == 200, resp.text
        assert resp.json()["status"] == "CANCEL_REQUESTED"
        proc.wait(timeout=DEADLINE_S)  # the SDK unwound its loop and recorded the end
        wait_for(lambda: get(server, "/api/runs/byhand")["run"]["status"] == "CANCELLED",
                 what="the run CANCELLED")
        detail = get(server, "/api/runs/byhand")
        assert detail["actions"] == {"cancel": False, "retry": False}
        assert detail["failure"]["code"] == "cancelled"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
