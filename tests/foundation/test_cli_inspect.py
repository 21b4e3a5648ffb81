"""`runs rollouts`, `hparams`, `engine-config` and `wait`, as a user runs them: each once as
a real subprocess (`run_cli`, `wait` following a live run); the other calls, which read
what the command answers, in this process (`cli_here`; a `wait` there gets `--timeout`,
so that a hang fails the test as `run_cli`'s deadline would, instead of stalling the suite)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import runwatch
from runwatch.cli.context import open_context
from runwatch.store import queries as q
from tests.killed import live_process
from tests.support import cli_here, first_line, run_cli, wait_for
from tests.support.cli import CLI_DEADLINE_S


def make_rl_run(runs_dir: Path) -> None:
    with runwatch.init(name="rl", dir=runs_dir, method="grpo",
                       config={"learning_rate": 1e-5, "optim": {"beta1": 0.9}}) as run:
        for step in (1, 2):
            run.log({"reward_mean": 0.1 * step}, step=step)
            run.log_samples(step, [
                {"prompt": [{"role": "user", "content": f"q{step}-{i}"}],
                 "completion": f"answer {i} <script>alert(1)</script>", "reward": float(i),
                 "reward_terms": {"correct": float(i), "overlong": 0.0}, "advantage": i - 1.0,
                 "group": 0, "truncated": i == 0}
                for i in range(3)])
        run.log_engine_config({"lr": 1e-5, "rank": 8}, {"lr": 1e-5, "rank": 16, "alpha": 32})


def test_rollouts_latest_step_best_worst_and_errors(runs_dir: Path) -> None:
    make_rl_run(runs_dir)
    latest = json.loads(run_cli("runs", "rollouts", "rl", "--dir", str(runs_dir),
                                "-o", "json").stdout)
    assert latest["step"] == 2 and latest["total"] == 3
    assert latest["samples"][0]["completion"] == "answer 0 <script>alert(1)</script>"
    best = json.loads(cli_here("runs", "rollouts", "rl", "--dir", str(runs_dir), "--step", "1",
                              "--best", "1", "-o", "json").stdout)
    assert [s["reward"] for s in best["samples"]] == [2.0]
    worst = cli_here("runs", "rollouts", "rl", "--dir", str(runs_dir), "--worst", "2").stdout
    assert "q2-0" in worst and "q2-1" in worst and "q2-2" not in worst
    missing = cli_here("runs", "rollouts", "rl", "--dir", str(runs_dir), "--step", "9",
                      check=False)
    assert missing.returncode == 2 and "no rollouts at step 9" in missing.stderr
    assert "steps kept: 1, 2" in missing.stderr


def test_hparams_and_engine_config(runs_dir: Path) -> None:
    make_rl_run(runs_dir)
    with runwatch.init(name="lacking", dir=runs_dir) as run:
        run.log_engine_config({"lr": 1e-5, "warmup": 10}, {"optimizer": {"lr": 1e-5}})
    hp = run_cli("runs", "hparams", "rl", "--dir", str(runs_dir)).stdout
    assert "optim.beta1" in hp and "learning_rate" in hp
    beta = cli_here("runs", "hparams", "rl", "--dir", str(runs_dir), "--jq", ".optim.beta1")
    assert beta.stdout.strip() == "0.9"
    table = run_cli("runs", "engine-config", "rl", "--dir", str(runs_dir)).stdout
    rank_line = next(line for line in table.splitlines() if line.startswith("rank"))
    assert "8" in rank_line and "16" in rank_line
    # blank RESOLVED is "as asked"; a setting the resolved config lacks is said so
    lr_line = next(line for line in table.splitlines() if line.startswith("lr"))
    assert _cells(lr_line) == ["lr", "1e-05", ""]
    lacking = run_cli("runs", "engine-config", "lacking", "--dir", str(runs_dir)).stdout
    warmup = next(line for line in lacking.splitlines() if line.startswith("warmup"))
    assert _cells(warmup) == ["warmup", "10", "(not in resolved)"], warmup
    assert "(not in resolved): the engine's resolved config has no setting" in lacking
    wide = run_cli("runs", "engine-config", "rl", "--dir", str(runs_dir), "-o", "wide").stdout
    assert _cells(next(line for line in wide.splitlines() if line.startswith("alpha"))) == [
        "alpha", "(not asked)", "32"]
    alpha = cli_here("runs", "engine-config", "rl", "--dir", str(runs_dir),
                    "--jq", ".resolved.alpha")
    assert alpha.stdout.strip() == "32"


def _cells(row: str) -> list[str]:
    return [cell.strip() for cell in row.split("│")]


def test_wait_follows_a_run_to_its_end(runs_dir: Path) -> None:
    # it goes on once `runs wait` has seen PREPARING
    child = live_process(runs_dir, "w", "PREPARING",
                     "run.set_phase('RUNNING')\nrun.fail('the training job was stopped')\n")
    assert child.stdin is not None
    try:
        assert first_line(child, what="the training process to start") == "started"
        wait_for(lambda: (runs_dir / "w" / "events.jsonl").exists(),
                 what="the run's events.jsonl")
        waiting = subprocess.Popen(
            [sys.executable, "-m", "runwatch", "runs", "wait", "w", "--dir", str(runs_dir),
             "--exit-status", "--interval", "0.2", "-o", "json"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        first = json.loads(first_line(waiting, what="`runs wait` to print the first phase"))
        assert first["phase"] == "PREPARING"
        child.stdin.write("go\n")
        child.stdin.close()
        rest, err = waiting.communicate(timeout=CLI_DEADLINE_S)
    finally:
        child.kill()
        child.wait(timeout=CLI_DEADLINE_S)
    assert waiting.returncode == 1, err
    lines = [json.loads(line) for line in rest.splitlines()]
    assert [e["phase"] for e in lines[:-1]][-2:] == ["RUNNING", "FAILED"]
    assert lines[-1]["state"]["reason"] == "the training job was stopped"


def test_wait_times_out_and_leaves_the_run_going(runs_dir: Path) -> None:
    run = runwatch.init(name="slow", dir=runs_dir)
    try:
        wait_for(lambda: (runs_dir / "slow" / "events.jsonl").exists(),
                 what="the run's events.jsonl")
        out = cli_here("runs", "wait", "slow", "--dir", str(runs_dir), "--timeout", "0.5",
                      "--interval", "0.2", check=False)
        assert out.returncode == 124 and "the run goes on" in out.stdout
    finally:
        run.finish()


def test_wait_on_an_ended_run_prints_its_end_once(runs_dir: Path) -> None:
    with runwatch.init(name="done", dir=runs_dir, phase="PREPARING") as run:
        for done in range(0, 50, 10):
            run.set_phase("PREPARING", stage="tokenizing", done=done, total=50)
        run.set_phase("RUNNING")
        run.fail("the training job was stopped")
    table = cli_here("runs", "wait", "done", "--dir", str(runs_dir), "--exit-status",
                     "--timeout", str(CLI_DEADLINE_S), check=False)
    assert table.returncode == 1, table.stderr
    assert "tokenizing" not in table.stdout, "no replay of the progress events"
    assert sum("FAILED" in ln for ln in table.stdout.splitlines()) == 1
    assert "the training job was stopped" in table.stdout
    out = cli_here("runs", "wait", "done", "--dir", str(runs_dir), "-o", "json",
                   "--timeout", str(CLI_DEADLINE_S)).stdout
    lines = [json.loads(ln) for ln in out.splitlines()]
    assert len(lines) == 2, "the terminal event, then the run record"
    assert lines[0]["phase"] == "FAILED" and lines[0]["reason"] == "the training job was stopped"
    assert lines[1]["state"]["phase"] == "FAILED" and lines[1]["name"] == "done"


def test_wait_on_a_run_whose_process_died_ends_the_stream_with_a_terminal_event(
        runs_dir: Path) -> None:
    child = subprocess.Popen([sys.executable, "-c", (
        "import sys, time, runwatch\n"
        "run = runwatch.init(name='gone', dir=sys.argv[1], phase='RUNNING')\n"
        "time.sleep(600)\n"), str(runs_dir)])
    try:
        wait_for(lambda: b"RUNNING" in _read(runs_dir / "gone" / "events.jsonl"),
                 what="the run's RUNNING event on disk")
    finally:
        child.kill()
        child.wait(timeout=CLI_DEADLINE_S)
    proc = cli_here("runs", "wait", "gone", "--dir", str(runs_dir), "--exit-status", "-o", "json",
                    "--timeout", str(CLI_DEADLINE_S), check=False)
    assert proc.returncode == 1, proc.stderr
    *events, end, record = (json.loads(ln) for ln in proc.stdout.splitlines())
    assert [e["phase"] for e in events] == ["RUNNING"]
    assert (end["process_gone"], end["code"], end["reason"]) == \
        (True, "stopped_early", "the training job stopped before it finished")
    assert record["state"]["process_gone"] is True and record["name"] == "gone"


def _read(path: Path) -> bytes:
    return path.read_bytes() if path.exists() else b""


def test_a_run_that_ended_just_before_its_process_died_is_not_called_gone(
        runs_dir: Path) -> None:
    """The index read before the process died can lack the end it wrote just before
    (`runs wait` and `runs tensorboard` once concluded "the training process is gone" of a
    run that had SUCCEEDED): Context.current_run reads the folder once more then."""
    child = live_process(runs_dir, "late", "RUNNING", "run.finish()\n")
    assert child.stdin is not None
    try:
        assert first_line(child, what="the training process to start") == "started"
        wait_for(lambda: b"RUNNING" in _read(runs_dir / "late" / "events.jsonl"),
                 what="the run's RUNNING event on disk")
        ctx = open_context(runs_dir, None)
        child.stdin.write("go\n")
        child.stdin.close()
        assert child.wait(timeout=CLI_DEADLINE_S) == 0
    finally:
        child.kill()
    with ctx.engine.connect() as conn:  # what a look made before the death was seen holds
        stale = q.resolve_run(conn, "late")
    assert stale.status == "RUNNING" and q.process_gone(stale)
    row, gone = ctx.current_run("late")
    assert (row.status, gone) == ("SUCCEEDED", False)


def test_a_run_whose_process_died_without_an_end_is_gone_after_a_second_read(
        runs_dir: Path) -> None:
    child = live_process(runs_dir, "cut", "RUNNING", "")
    try:
        assert first_line(child, what="the training process to start") == "started"
        wait_for(lambda: b"RUNNING" in _read(runs_dir / "cut" / "events.jsonl"),
                 what="the run's RUNNING event on disk")
        ctx = open_context(runs_dir, None)
        row, gone = ctx.current_run("cut")
        assert (row.status, gone) == ("RUNNING", False), "its process still runs"
    finally:
        child.kill()
        child.wait(timeout=CLI_DEADLINE_S)
    row, gone = ctx.current_run("cut")
    assert (row.status, gone) == ("RUNNING", True)
    (listed,) = json.loads(cli_here("runs", "list", "--dir", str(runs_dir), "-o", "json").stdout)
    assert (listed["status"], listed["process_gone"]) == ("RUNNING", True)
    shown = json.loads(cli_here("runs", "get", "cut", "--dir", str(runs_dir), "-o", "json").stdout)
    assert shown["state"]["process_gone"] is True and shown["run"]["process_gone"] is True
