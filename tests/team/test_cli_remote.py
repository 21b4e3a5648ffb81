"""The `runs` commands against a team server (`--server URL`, RUNWATCH_SERVER): the real
server over HTTP with project tokens, on SQLite and PostgreSQL. A read command prints what it
prints from a local index of the same runs; a token of another project, a refused token and
a server that does not answer each end with what to do; cancel goes through the server's job
control.

The commands run in process through typer's runner, the server in its own threads."""

from __future__ import annotations

import json
import math
import time
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy import Engine
from typer.core import TyperOption
from typer.testing import CliRunner, Result

from runwatch.cli.main import app
from runwatch.cli.options import ServerOpt
from runwatch.cli.remote import SAMPLES_PAGE, SERIES_POINTS
from runwatch.jobs.spec import command_spec
from runwatch.jobs.submit import submit
from runwatch.sdk import init
from runwatch.server.runner import Runner, free_port
from runwatch.store import jobs as store_jobs
from runwatch.store import tokens
from tests.foundation.test_cli_startup import groups, imported_by
from tests.support import sdk_run
from tests.support.wait import wait_for

BOOT = "bootstrap-token-cli-remote"
A, B = "proj-alpha", "proj-bravo"


@dataclass
class Team:
    url: str
    runs_dir: Path
    secrets: dict[str, str]  # "A-read", "A-write", "B-read" -> secret


def _alpha_run(runs_dir: Path) -> None:
    """A run of project A with a config, an engine config, a NaN loss, logs and rollouts."""
    run = init(name="alpha-run", dir=runs_dir, project=A, method="grpo",
               config={"lr": 1e-4, "optim": {"beta1": 0.9}})
    run.log_engine_config({"lr": 1e-4}, {"lr": 1e-4, "adam_beta1": 0.9})
    for step in range(12):
        loss = math.nan if step == 7 else 2.0 / (step + 1)
        run.log({"loss": loss, "reward": step / 10, "learning_rate": 1e-4}, step=step)
        run.log_text(f"step {step} done", level="warning" if step % 5 == 0 else "info")
    run.log_samples(10, [{"prompt": f"q{i}", "completion": f"a{i}", "reward": float(i)}
                         for i in range(3)])
    run.finish("SUCCEEDED")


@pytest.fixture
def team(engine: Engine, runs_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Team]:
    for var in ("RUNWATCH_SERVER", "RUNWATCH_TOKEN", "RUNWATCH_PROJECT"):
        monkeypatch.delenv(var, raising=False)
    _alpha_run(runs_dir)
    bravo = init(name="bravo-secret-run", dir=runs_dir, project=B)
    bravo.log({"loss": 1.0}, step=0)
    bravo.finish("SUCCEEDED")
    secrets = {}
    with engine.begin() as conn:
        tokens.create_project(conn, A, "test")
        tokens.create_project(conn, B, "test")
        for key, project, right in (("A-read", A, "read"), ("A-write", A, "write"),
                                    ("B-read", B, "read")):
            secrets[key] = tokens.create(conn, project, right, key, "test")[1]
    with Runner(engine, runs_dir=runs_dir, port=free_port(), token=BOOT, interval=0.05,
                prewarm=False, warm=False) as srv:
        yield Team(srv.url, runs_dir, secrets)


def cli(*args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "120", **(env or {})})


def ok(res: Result) -> str:
    assert res.exit_code == 0, res.output
    return res.stdout


def refused(res: Result) -> str:
    assert res.exit_code == 2, res.output
    return " ".join(res.stderr.split())


READS = [
    ["runs", "get", "alpha-run"],
    ["runs", "metrics", "alpha-run"],
    ["runs", "metrics", "alpha-run", "--key", "loss", "--steps", "3:9"],
    ["runs", "logs", "alpha-run", "--level", "warning"],
    ["runs", "health", "alpha-run", "--open"],
    ["runs", "hparams", "alpha-run"],
    ["runs", "engine-config", "alpha-run"],
    ["runs", "rollouts", "alpha-run", "--best", "2"],
]


@pytest.mark.parametrize("output", ["json", "table"])
def test_read_commands_print_from_the_server_what_they_print_from_the_index(
        team: Team, output: str) -> None:
    local = ["--dir", str(team.runs_dir)]
    remote = ["--server", team.url, "--token", team.secrets["A-read"]]
    here: object  # each command's output: its text, or the health report read as JSON
    there: object
    for args in [*READS, ["runs", "list", "--project", A]]:
        here = ok(cli(*args, *local, "-o", output))
        there = ok(cli(*args, *remote, "-o", output))
        assert there == here, args
    # resolved findings come too (the NaN at step 7 resolved); the server and this index
    # each evaluated the run, at their own times
    health = ["runs", "health", "alpha-run", "-o", output]
    here, there = ok(cli(*health, *local)), ok(cli(*health, *remote))
    if output == "json":
        here, there = ({**body, "findings": [{k: v for k, v in f.items() if not k.endswith("_ts")}
                                             for f in body["findings"]]}
                       for body in (json.loads(here), json.loads(there)))
    assert there == here and "resolved" in str(there)
    metrics = json.loads(ok(cli("runs", "metrics", "alpha-run", *remote, "-o", "json"))
                         .replace("NaN", "null"))
    assert [s["step"] for s in metrics["steps"]] == list(range(12))
    assert metrics["steps"][7]["measured"]["loss"] is None, "NaN came through as NaN"
    csv_here = ok(cli("runs", "metrics", "alpha-run", *local, "-o", "csv"))
    assert ok(cli("runs", "metrics", "alpha-run", *remote, "-o", "csv")) == csv_here
    for args in (["runs", "rollouts", "alpha-run", "--step", "3"],
                 ["runs", "metrics", "alpha-run", "--key", "nope"]):
        assert refused(cli(*args, *remote)) == refused(cli(*args, *local)), args
    # wait: the events' times come as ISO 8601 text, to the microsecond
    wait = ["runs", "wait", "alpha-run", "--exit-status", "-o", output]
    here, there = ok(cli(*wait, *local)), ok(cli(*wait, *remote))
    if output == "table":
        assert there == here
    else:
        (event, record), (event_here, record_here) = (map(json.loads, x.splitlines())
                                                      for x in (there, here))
        assert record == record_here and event["phase"] == "SUCCEEDED"
        assert event == {**event_here, "ts": pytest.approx(event_here["ts"], abs=1e-6)}
    # a token of project A lists A's runs only
    listed = json.loads(ok(cli("runs", "list", *remote, "-o", "json")))
    assert [r["name"] for r in listed] == ["alpha-run"]


def test_the_environment_names_the_server_unless_dir_or_db_is_given(team: Team) -> None:
    env = {"RUNWATCH_SERVER": team.url, "RUNWATCH_TOKEN": team.secrets["B-read"]}
    names = ok(cli("runs", "list", "--jq", ".[].name", "-r", env=env)).split()
    assert names == ["bravo-secret-run"]
    local = ok(cli("runs", "list", "--dir", str(team.runs_dir), "--jq", ".[].name", "-r",
                   env=env)).split()
    assert sorted(local) == ["alpha-run", "bravo-secret-run"]
    said = refused(cli("runs", "list", "--server", team.url, "--dir", str(team.runs_dir)))
    assert "give one of them" in said
    said = refused(cli("runs", "list", "--dir", str(team.runs_dir), "--token", "rw_x", env=env))
    assert "--token is the token for a team server" in said, said


def test_a_token_of_another_project_does_not_find_the_run(team: Team) -> None:
    remote = ["--server", team.url, "--token", team.secrets["A-read"]]
    for args in (["runs", "get", "bravo-secret-run"], ["runs", "metrics", "bravo"],
                 ["runs", "health", "bravo-secret-run"]):
        said = refused(cli(*args, *remote))
        assert f"(on {team.url})" in said and "no run" in said.lower(), said
        assert "a token of the run's project" in said and "/api/runs" not in said, said
        assert "bravo-secret-run" not in said.split("(on")[1], "no candidate of project B"
    said = refused(cli("runs", "list", "--project", B, *remote))
    assert f"{team.url} refused the token given with --token" in said, said
    assert "needs read on project 'proj-bravo'" in said, said
    assert "runwatch tokens create --project proj-bravo --right read" in said, said


def test_a_token_the_server_does_not_know_is_refused_saying_how_to_get_one(team: Team) -> None:
    env = {"RUNWATCH_TOKEN": "rw_" + "x" * 43}
    said = refused(cli("runs", "list", "--server", team.url, env=env))
    assert f"{team.url} refused the token in RUNWATCH_TOKEN" in said, said
    assert "runwatch tokens create --project P --right read" in said, said
    said = refused(cli("runs", "get", "alpha-run", "--server", team.url))
    assert "no token (neither --token nor RUNWATCH_TOKEN is set)" in said, said
    said = refused(cli("runs", "get", "alpha-run", "--server", team.url, "--token", ""))
    assert "--token is empty" in said, said


def test_a_server_that_does_not_answer_is_named_with_what_to_check() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    said = refused(cli("runs", "logs", "some-run", "--server", url))
    assert f"cannot reach the runwatch server at {url}" in said, said
    assert "check the URL (--server, or RUNWATCH_SERVER)" in said, said
    said = refused(cli("runs", "list", "--server", "runwatch.lan:8765"))
    assert "is not an http:// or https:// URL" in said, said


def test_metrics_and_logs_longer_than_one_answer_come_whole(
        team: Team, engine: Engine) -> None:
    steps = SERIES_POINTS + 300
    run = init(name="long-run", dir=team.runs_dir, project=A)
    for step in range(steps):
        run.log({"loss": 1.0 / (step + 1)}, step=step)
        if step < 2500:  # more than one page of log entries
            run.log_text(f"line {step}")
    run.finish("SUCCEEDED")
    remote = ["--server", team.url, "--token", team.secrets["A-read"]]
    # the server indexes the file in order every 50 ms: wait until it holds the last step
    last = ["--steps", f"{steps - 1}:", "--jq", ".steps | length"]
    wait_for(lambda: cli("runs", "metrics", "long-run", *remote, *last).stdout.strip() == "1",
             what="the server to index long-run")
    there = ok(cli("runs", "metrics", "long-run", *remote, "-o", "csv"))
    assert there == ok(cli("runs", "metrics", "long-run", "--dir", str(team.runs_dir),
                           "-o", "csv"))
    assert len(there.splitlines()) == steps + 1
    logs = ["runs", "logs", "long-run", "--tail", "2400", "-o", "json"]
    here = ok(cli(*logs, "--dir", str(team.runs_dir)))
    assert len(json.loads(here)) == 2400
    # (the server may index the log file a pass after the metrics)
    wait_for(lambda: cli(*logs, *remote).stdout == here, what="the server's logs to match")


def test_a_step_logged_again_after_a_resume_has_the_time_of_the_values_shown(
        team: Team) -> None:
    """The local index paired a re-logged step's new values with its first record's time,
    where the server gives the new record's (found in a trial): a CSV of the same run
    differed between --dir and --server, and imported back put the resume's gap in the
    wrong place."""
    first = init(name="resumed-run", dir=team.runs_dir, project=A)
    for step in range(4):
        first.log({"loss": 2.0, "lr": 1e-4}, step=step)
    first.finish("FAILED")
    time.sleep(0.05)  # the resume's records are later than the first ones
    again = init(name="resumed-run", dir=team.runs_dir, project=A, resume=True)
    for step in range(2, 6):
        again.log({"loss": 1.0, "lr": 1e-4}, step=step)
    again.finish("SUCCEEDED")
    records = [json.loads(line) for line in
               (team.runs_dir / "resumed-run" / "metrics.jsonl").read_text().splitlines()]
    newest = {r["step"]: r["ts"] for r in records}  # the later record of a step wins
    remote = ["--server", team.url, "--token", team.secrets["A-read"]]
    wait_for(lambda: cli("runs", "metrics", "resumed-run", *remote, "--steps", "5:", "--jq",
                         ".steps | length").stdout.strip() == "1",
             what="the server to index resumed-run")
    here = json.loads(ok(cli("runs", "metrics", "resumed-run", "--dir", str(team.runs_dir),
                             "-o", "json")))
    assert [(s["step"], s["ts"], s["measured"]["loss"]) for s in here["steps"]] == \
        [(step, newest[step], 2.0 if step < 2 else 1.0) for step in range(6)]
    assert ok(cli("runs", "metrics", "resumed-run", *remote, "-o", "csv")) == \
        ok(cli("runs", "metrics", "resumed-run", "--dir", str(team.runs_dir), "-o", "csv"))


def test_more_rollouts_than_one_answer_come_whole_in_their_order(team: Team) -> None:
    many = SAMPLES_PAGE * 2 + 100
    run = init(name="many-rollouts", dir=team.runs_dir, project=A, method="grpo")
    run.log({"reward": 0.5}, step=4)
    run.log_samples(4, [{"prompt": f"q{i}", "completion": f"a{i}", "reward": float(i % 37)}
                        for i in range(many)])
    run.finish("SUCCEEDED")
    remote = ["--server", team.url, "--token", team.secrets["A-read"]]
    local = ["--dir", str(team.runs_dir)]
    count = ["--limit", str(many), "--jq", ".samples | length"]
    wait_for(lambda: cli("runs", "rollouts", "many-rollouts", *remote, *count).stdout.strip()
             == str(many), what="the server to index many-rollouts' samples")
    for args in (["--limit", str(many + 50)], ["--best", str(SAMPLES_PAGE + 1)],
                 ["--worst", str(many)]):
        cmd = ["runs", "rollouts", "many-rollouts", *args, "-o", "json"]
        here = ok(cli(*cmd, *local))
        assert ok(cli(*cmd, *remote)) == here, args
        assert len(json.loads(here)["samples"]) == min(many, int(args[1]))


def test_cancel_over_the_server_needs_write_and_uses_its_job_control(team: Team,
                                                                    engine: Engine) -> None:
    queued = submit(engine, team.runs_dir, command_spec(["true"], cwd=team.runs_dir),
                    "queued-job", A)
    read = ["--server", team.url, "--token", team.secrets["A-read"]]
    still = cli("runs", "wait", "queued-job", "--timeout", "0.2", "--interval", "0.1", *read)
    assert still.exit_code == 124 and "QUEUED" in still.stdout, still.output
    said = refused(cli("runs", "cancel", "queued-job", *read))
    assert "needs write on project 'proj-alpha'" in said, said
    done = json.loads(ok(cli("runs", "cancel", "queued-job", "--server", team.url, "--token",
                             team.secrets["A-write"], "-o", "json")))
    assert done["status"] == "CANCELLED" and done["run"]["run_id"] == queued.run_id
    said = refused(cli("runs", "cancel", "queued-job", "--server", team.url, "--token",
                       team.secrets["A-write"]))
    assert "queued-job" in said and "cancel" in said, said
    ended = cli("runs", "wait", "queued-job", "--exit-status", *read)
    assert ended.exit_code == 3 and "CANCELLED" in ended.stdout, ended.output
    # what happens next, as the server said it (the CLI dropped it; a local retry says it)
    write = ["--server", team.url, "--token", team.secrets["A-write"]]
    again = json.loads(ok(cli("runs", "retry", "queued-job", *write, "-o", "json")))
    assert again["status"] == "QUEUED" and again["next"].startswith("attempt 2: "), again
    shown = " ".join(ok(cli("runs", "cancel", "queued-job", *write)).split())
    assert "queued-job: CANCELLED" in shown, shown


def test_a_local_read_command_does_not_load_the_http_client(runs_dir: Path) -> None:
    run = init(name="r", dir=runs_dir)
    run.log({"loss": 1.0}, step=0)
    run.finish("SUCCEEDED")
    assert "httpx" not in imported_by("runs", "list", "--dir", str(runs_dir), "-o", "json")


def test_compare_over_the_server_reports_and_refuses_as_it_does_here(team: Team) -> None:
    for name, dataset in (("sft-base", "arith"), ("sft-cand", "arith"), ("sft-other", "chat")):

        def metrics(i: int, n: str = name) -> dict[str, float]:
            return {"loss": 2.0 / (i + 1) + (0.1 if n == "sft-cand" else 0.0)}

        sdk_run(team.runs_dir, name, steps=30, project=A, dataset=dataset, metrics=metrics)
    local = ["--dir", str(team.runs_dir)]
    remote = ["--server", team.url, "--token", team.secrets["A-read"]]
    for name in ("sft-base", "sft-cand", "sft-other"):

        def indexed(n: str = name) -> bool:
            return cli("runs", "metrics", n, *remote, "--steps", "29:", "--jq",
                       ".steps | length").stdout.strip() == "1"

        wait_for(indexed, what=f"the server to index {name}")
    for output in ("json", "table"):
        args = ["runs", "compare", "sft-cand", "sft-base", "-o", output]
        assert ok(cli(*args, *remote)) == ok(cli(*args, *local))
    args = ["runs", "compare", "sft-cand", "sft-other"]
    said = refused(cli(*args, *remote))
    assert said == refused(cli(*args, *local))
    assert "dataset: arith (run) vs chat (baseline)" in said, said


def _option(p: object) -> TyperOption:
    assert isinstance(p, TyperOption), f"{p!r} is named like an option but is not one"
    return p


def test_every_command_that_reads_runs_takes_the_shared_server_option() -> None:
    shared = typing.get_args(ServerOpt)[1]
    runs = next(g for g in groups() if "wait" in g.entries)
    reading = {name for name in runs.entries
               if any("--server" in p.opts and _option(p).help == shared.help
                      for p in runs.load(name).params)}
    assert reading == {"list", "get", "metrics", "logs", "health", "compare", "rollouts",
                       "hparams", "engine-config", "wait", "cancel", "retry"}


def test_resources_shows_the_server_s_workers_and_drains_with_its_token(
        team: Team, engine: Engine) -> None:
    submit(engine, team.runs_dir, command_spec(["true"], cwd=team.runs_dir), "bravo-job", B)
    with engine.begin() as conn:
        store_jobs.register_worker(conn, store_jobs.WorkerRow("w-remote", "host", 1, 1, "cpu",
                                                              time.time()))
        assert store_jobs.claim(conn, "w-remote", 1, time.time()) is not None
    index = engine.url.render_as_string(hide_password=False)  # the server's
    local = json.loads(ok(cli("resources", "--db", index, "-o", "json")))
    assert [j["name"] for j in local["workers"][0]["jobs"]] == ["bravo-job"]
    read = ["--server", team.url, "--token", team.secrets["A-read"]]
    seen = json.loads(ok(cli("resources", *read, "-o", "json")))
    assert [w["id"] for w in seen["workers"]] == ["w-remote"]
    assert seen["workers"][0]["jobs"] == [], "a token of A sees no job of B"
    said = refused(cli("resources", "--drain", "w-r", *read))
    assert "needs admin on every project" in said, said
    drained = json.loads(ok(cli("resources", "--drain", "w-r", "--server", team.url,
                                "--token", BOOT, "-o", "json")))
    assert drained["worker"]["id"] == "w-remote" and drained["worker"]["draining"] is True
    said = refused(cli("resources", "--drain", "x", "--server", team.url, "--token", BOOT))
    assert "no worker has the id 'x'" in said and "w-remote" in said, said
