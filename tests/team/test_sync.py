"""`runwatch sync DIR`: offline runs sent to a real server over HTTP, incrementally (a run
still being written, synced twice, adds only what is new), and bad input (no server, a
refused token, a folder that is no run) said clearly, with nothing lost.

The command runs in this process (the same app; a subprocess per sync cost a second or more
each under load), but for `sync --follow`, which runs as the real command line."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

import runwatch
from runwatch.server.runner import Runner, free_port
from runwatch.server.settings import new_token
from tests.support import cli_here, wait_for, write_run
from tests.team.serving import in_folder, metric_lines, stored

# An offline run: logs 100 steps, waits for FLAGS/more, logs 50 more, waits for FLAGS/end,
# finishes. The test syncs it at each pause.
WRITER = r"""
import sys, time, pathlib, runwatch
runs, flags = sys.argv[1], pathlib.Path(sys.argv[2])
run = runwatch.init("team", name="live", dir=runs, flush_interval=0.05)
def pause(flag):
    while not (flags / flag).exists():
        time.sleep(0.01)
for step in range(100):
    run.log({"loss": 1.0 / (step + 1), "nan": float("nan")}, step=step)
pause("more")
for step in range(100, 150):
    run.log({"loss": 1.0 / (step + 1), "nan": float("nan")}, step=step)
run.log_text("half way")
pause("end")
run.finish()
"""


@pytest.fixture
def team_server(engine: Engine) -> Iterator[Runner]:
    """The real server, with a token, on a free loopback port (nothing indexed: it holds
    only what is sent to it)."""
    with Runner(engine, port=free_port(), token=new_token(), warm=False) as srv:
        yield srv


def _sync(target: Path, srv: Runner, *extra: str, check: bool = True,
          token: str | None = None) -> subprocess.CompletedProcess[str]:
    return cli_here("sync", str(target), "--server", srv.url, "--token", token or str(srv.token),
                   *extra, check=check)


def test_a_run_still_being_written_synced_twice_adds_only_what_is_new(
        tmp_path: Path, team_server: Runner) -> None:
    runs, flags = tmp_path / "runs", tmp_path / "flags"
    flags.mkdir()
    live = runs / "live"
    db = team_server.engine
    child = subprocess.Popen([sys.executable, "-c", WRITER, str(runs), str(flags)],
                             stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: metric_lines(live) == 100, what="the first 100 steps on disk")
        first = _sync(live, team_server)
        assert "sent 1 events, 100 metrics to" in first.stdout
        # the run, as far as it is written, is on the server
        assert stored(db, _run_id(live)) == in_folder(live)

        (flags / "more").touch()
        wait_for(lambda: metric_lines(live) == 150 and (live / "logs.jsonl").exists(),
                 what="50 more steps on disk")
        second = _sync(live, team_server)
        assert "sent 50 metrics, 1 logs to" in second.stdout  # only what is new
        assert stored(db, _run_id(live)) == in_folder(live)

        (flags / "end").touch()
        _, err = child.communicate(timeout=60)
        assert child.returncode == 0, err
    finally:
        if child.poll() is None:
            child.kill()
    third = _sync(runs, team_server)  # the folder of runs: the last event only
    assert "live: sent 1 events to" in third.stdout
    assert "nothing new" in _sync(runs, team_server).stdout
    held = stored(db, _run_id(live))
    assert held == in_folder(live) and held is not None and len(held["events"]) == 2


def _run_id(run_dir: Path) -> str:
    from runwatch.rundir.jsonl import loads_line

    return str(loads_line((run_dir / "manifest.json").read_bytes())["run_id"])


def _offline_run(runs: Path) -> Path:
    import runwatch

    run = runwatch.init("team", name="done", dir=runs)
    for step in range(5):
        run.log({"loss": 1.0}, step=step)
    run.finish()
    return runs / "done"


def test_a_refused_token_is_said_with_what_to_do_and_nothing_is_marked_sent(
        tmp_path: Path, team_server: Runner) -> None:
    run_dir = _offline_run(tmp_path / "runs")
    refused = _sync(run_dir, team_server, check=False, token="wrong-token-of-some-length")
    assert refused.returncode == 2
    assert "refused the request (401" in refused.stderr and "--token" in refused.stderr
    assert "nothing was lost" in refused.stderr
    ok = _sync(run_dir, team_server)  # the right token sends it all
    assert "sent 2 events, 5 metrics" in ok.stdout


def test_an_unreachable_server_is_said_and_the_next_sync_sends_everything(
        tmp_path: Path, team_server: Runner) -> None:
    run_dir = _offline_run(tmp_path / "runs")
    nobody = f"http://127.0.0.1:{free_port()}"
    down = cli_here("sync", str(run_dir), "--server", nobody, "--retry-for", "0", check=False)
    assert down.returncode == 1
    assert f"cannot reach {nobody}" in down.stderr and "run the same command again" in down.stderr
    assert "sent 2 events, 5 metrics" in _sync(run_dir, team_server).stdout


def test_a_folder_that_holds_no_run_and_a_missing_server_are_refused(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    (empty / "not-a-run").mkdir(parents=True)
    no_run = cli_here("sync", str(empty), "--server", "http://127.0.0.1:9", check=False)
    assert no_run.returncode == 2 and "holds no run" in no_run.stderr
    no_server = cli_here("sync", str(empty), check=False,
                        env={"RUNWATCH_SERVER": "", "RUNWATCH_TOKEN": ""})
    assert no_server.returncode == 2 and "--server URL" in no_server.stderr


def test_a_record_the_server_refuses_is_skipped_alone_and_a_torn_line_waits(
        tmp_path: Path, team_server: Runner) -> None:
    good: list[dict[str, Any]] = [{"seq": i, "step": i, "ts": 1.0, "loss": i / 10}
                                  for i in range(7)]
    good[3]["step"] = "seven"  # the server refuses this record (and its batch)
    torn = '{"seq": 7, "step": 7, "ts": 1.0, "loss": 0.7'
    run_dir = write_run(tmp_path / "runs", "edited", [*good, "{not json", torn], end="")
    first = _sync(run_dir, team_server, check=False)
    assert first.returncode == 1, first.stderr
    assert "sent 6 metrics" in first.stdout  # all but the refused one
    assert "line 4: the server refused it" in first.stdout and "step" in first.stdout
    assert "line 8: not JSON" in first.stdout
    assert "1 record(s) were refused" in first.stderr
    held = stored(team_server.engine, "id-edited")
    assert held is not None and [p[0] for p in held["points"]["loss"]] == [0, 1, 2, 4, 5, 6]
    with (run_dir / "metrics.jsonl").open("a") as f:
        f.write("}\n")  # the torn line ends: the next sync sends it, and only it
    assert "sent 1 metrics" in _sync(run_dir, team_server).stdout
    held = stored(team_server.engine, "id-edited")
    assert held is not None and [p[0] for p in held["points"]["loss"]] == [0, 1, 2, 4, 5, 6, 7]


# A run written while `runwatch sync --follow` runs beside it: 150 steps, a wait until the
# sync has sent some of them (its offsets are saved), 150 steps more, then it ends.
STEADY = r"""
import sys, time, pathlib, runwatch
run = runwatch.init("team", name="steady", dir=sys.argv[1], flush_interval=0.05)
sent = pathlib.Path(sys.argv[1]) / "steady" / ".runwatch" / "sent.json"
for step in range(300):
    run.log({"loss": 1.0 / (step + 1)}, step=step)
    while step == 150 and not sent.exists():
        time.sleep(0.01)
run.finish()
"""


def test_sync_follow_sends_a_run_as_it_is_written_and_stops_once_it_ended(
        tmp_path: Path, team_server: Runner) -> None:
    runs = tmp_path / "runs"
    child = subprocess.Popen([sys.executable, "-c", STEADY, str(runs)],
                             stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: (runs / "steady" / "manifest.json").is_file(), what="the run to start")
        follow = subprocess.run(
            [sys.executable, "-m", "runwatch", "sync", str(runs), "--server", team_server.url,
             "--token", str(team_server.token), "--follow", "--interval", "0.1"],
            capture_output=True, text=True, timeout=120)
        assert follow.returncode == 0, follow.stderr
        _, err = child.communicate(timeout=60)
        assert child.returncode == 0, err
    finally:
        if child.poll() is None:
            child.kill()
    # the run could go past step 150 only once the sync had sent some of it; the sync
    # stopped by itself once the run had ended and its end was sent
    assert "steady: sent" in follow.stdout
    held = stored(team_server.engine, _run_id(runs / "steady"))
    assert held == in_folder(runs / "steady")
    assert held is not None and len(held["points"]["loss"]) == 300 and len(held["events"]) == 2


def test_a_project_token_sends_only_runs_of_its_own_project(
        tmp_path: Path, team_server: Runner) -> None:
    tokens = pytest.importorskip("runwatch.store.tokens")  # project tokens (H6)
    import runwatch

    with team_server.engine.begin() as conn:
        for project in ("a", "b"):
            tokens.create_project(conn, project, "test")
        _, write_a = tokens.create(conn, "a", "write", "uploader", "test")
        _, read_a = tokens.create(conn, "a", "read", "reader", "test")
    runs = tmp_path / "runs"
    for project in ("a", "b"):
        with runwatch.init(project, name=f"of-{project}", dir=runs) as run:
            run.log({"loss": 1.0}, step=0)
    other = _sync(runs / "of-b", team_server, check=False, token=write_a)
    assert other.returncode == 1 and "needs write on the run's project" in other.stdout
    assert "1 run(s) were refused and not sent: of-b" in other.stderr
    read = _sync(runs / "of-a", team_server, check=False, token=read_a)
    assert read.returncode == 1 and "needs write on the run's project" in read.stdout
    # the folder of both: the run of the token's project is sent, the other one passed
    # over (it stopped the whole sync before, so of-a, after it, was never sent)
    both = _sync(runs, team_server, check=False, token=write_a)
    assert both.returncode == 1, both.stdout + both.stderr
    assert "of-a: sent 2 events, 1 metrics" in both.stdout
    assert "of-b: not sent:" in both.stdout and "refused and not sent: of-b" in both.stderr
    assert stored(team_server.engine, _run_id(runs / "of-b")) is None


def test_a_record_file_made_anew_is_sent_from_its_start(
        tmp_path: Path, team_server: Runner) -> None:
    from runwatch.jobs.attempts import new_attempt
    from runwatch.rundir.jsonl import dumps_line

    run_dir = _offline_run(tmp_path / "runs")
    assert "sent 2 events, 5 metrics" in _sync(run_dir, team_server).stdout
    new_attempt(run_dir, 2)  # metrics.jsonl moves to attempts/1/; the next one starts empty
    with (run_dir / "metrics.jsonl").open("wb") as f:  # its seqs go on past attempt 1's
        for seq in range(5, 8):
            f.write(dumps_line({"step": seq - 5, "ts": 1.0, "loss": 2.0, "seq": seq}))
    assert "sent 1 events, 3 metrics" in _sync(run_dir, team_server).stdout
    held = stored(team_server.engine, _run_id(run_dir))
    assert held is not None and {5, 6, 7} <= {p[0] for p in held["points"]["loss"]}


def test_a_file_the_writer_has_not_made_yet_is_sent_once_it_is_there(
        tmp_path: Path, team_server: Runner) -> None:
    # a pass that finds no events file reads the others and keeps no position for it;
    # the pass after the writer made it sends it from its start (a pass that read a file
    # made after it looked once had no position to keep, and failed: seen in CI)
    run_dir = _offline_run(tmp_path / "runs")
    events = run_dir / "events.jsonl"
    aside = tmp_path / "events.jsonl"
    events.rename(aside)
    first = _sync(run_dir, team_server)
    assert "5 metrics" in first.stdout and "events" not in first.stdout, first.stdout
    aside.rename(events)
    assert "sent 2 events" in _sync(run_dir, team_server).stdout


def _fail_on_run(engine: Engine, name: str) -> None:
    """Make the server's database refuse the run named `name` (a trigger), so the server
    answers 500 for it and only for it: a server failing on one run, as a bug in it would."""
    with engine.begin() as conn:
        if conn.dialect.name == "sqlite":
            conn.exec_driver_sql(
                # an error of the statement, not a constraint's (a conflict of names)
                f"CREATE TRIGGER fail_one BEFORE INSERT ON runs WHEN NEW.name = '{name}' "
                "BEGIN SELECT abs(-9223372036854775808); END")
        else:
            conn.exec_driver_sql(
                "CREATE FUNCTION fail_one() RETURNS trigger AS $$ BEGIN "
                f"IF NEW.name = '{name}' THEN RAISE EXCEPTION 'failing on purpose'; END IF; "
                "RETURN NEW; END $$ LANGUAGE plpgsql")
            conn.exec_driver_sql("CREATE TRIGGER fail_one BEFORE INSERT ON runs FOR EACH ROW "
                                 "EXECUTE FUNCTION fail_one()")


def test_a_run_the_server_fails_on_is_passed_over(tmp_path: Path, team_server: Runner) -> None:
    # Before, the first 500 stopped the sync: the runs after it were not sent, and the
    # advice was to start the server, which was up.
    runs = tmp_path / "runs"
    ids = {}
    for name in ("aaa-breaks", "zzz-fine"):
        with runwatch.init(project="team", name=name, dir=runs) as run:
            run.log({"loss": 1.0}, step=0)
            ids[name] = run.id
    _fail_on_run(team_server.engine, "aaa-breaks")
    out = _sync(runs, team_server, "--retry-for", "0", check=False)
    assert out.returncode == 1, out.stdout + out.stderr
    said = out.stdout + out.stderr
    assert "aaa-breaks: not sent" in said and "the server failed on this run" in said
    assert "zzz-fine: sent" in said
    assert "start the server" not in said
    assert stored(team_server.engine, str(ids["zzz-fine"])) is not None
    assert stored(team_server.engine, str(ids["aaa-breaks"])) is None
