"""`runwatch runs wait --server` rides out a server that stops answering for a while (a
restart), saying so on stderr, and ends with the run; past --retry-for it gives up (exit
2), and one-shot reads still fail at once. The real command line against the real server
over HTTP, stopped and started again on the same port, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

from sqlalchemy import Engine

from runwatch.rundir import format as fmt
from runwatch.server.runner import Runner, free_port
from runwatch.server.settings import new_token
from tests.support import cli_here, run_cli, wait_for
from tests.support.rundirs import write_manifest

# Only stops a hung command from hanging the suite.
DEADLINE_S = 120


def _serve(engine: Engine, runs_dir: Path, port: int, token: str) -> Runner:
    return Runner(engine, runs_dir=runs_dir, port=port, token=token, interval=0.05,
                  prewarm=False, save_series=False, warm=False)


def _running(runs_dir: Path) -> Path:
    """A run whose process (this one, on this host) is running."""
    run = write_manifest(runs_dir / "long-run", pid=os.getpid(), host=socket.gethostname())
    (run / fmt.EVENTS).write_text(json.dumps({"ts": 1e9, "seq": 0, "phase": "RUNNING"}) + "\n")
    (run / fmt.METRICS).write_text(json.dumps({"ts": 1e9, "seq": 0, "step": 0, "loss": 1})
                                   + "\n")
    return run


def test_wait_keeps_waiting_while_the_server_restarts(tmp_path: Path, engine: Engine,
                                                      runs_dir: Path) -> None:
    run, port, token = _running(runs_dir), free_port(), new_token()
    out, err = tmp_path / "out.txt", tmp_path / "err.txt"
    env = {**os.environ, "RUNWATCH_TOKEN": token}
    server = _serve(engine, runs_dir, port, token).start()
    try:
        with out.open("w") as stdout, err.open("w") as stderr:
            waiting = subprocess.Popen(
                [sys.executable, "-m", "runwatch", "runs", "wait", "long-run", "--server",
                 f"http://127.0.0.1:{port}", "--exit-status", "--interval", "0.1"],
                stdout=stdout, stderr=stderr, env=env, text=True)
        try:
            wait_for(lambda: "RUNNING" in out.read_text() or waiting.poll() is not None,
                     what="the wait to show the run RUNNING")
            server.stop()
            wait_for(lambda: "does not answer" in err.read_text() or waiting.poll() is not None,
                     what="the wait to say the server does not answer")
            assert waiting.poll() is None, err.read_text()  # it waits on
            with (run / fmt.EVENTS).open("a") as events:
                events.write(json.dumps({"ts": 1e9 + 5, "seq": 1, "phase": "SUCCEEDED"}) + "\n")
            server = _serve(engine, runs_dir, port, token).start()
            assert waiting.wait(DEADLINE_S) == 0, err.read_text()
        finally:
            if waiting.poll() is None:
                waiting.kill()
                waiting.wait()
    finally:
        server.stop()
    said = err.read_text()
    assert said.count("does not answer") == 1 and said.count("answers again") == 1, said
    assert "trying again for up to 30s (--retry-for)" in said, said
    assert "SUCCEEDED" in out.read_text()


def test_wait_gives_up_after_retry_for_and_one_shot_reads_do_not_wait(
        engine: Engine, runs_dir: Path) -> None:
    _running(runs_dir)
    port, token = free_port(), new_token()
    url = f"http://127.0.0.1:{port}"
    env = {"RUNWATCH_TOKEN": token}
    with _serve(engine, runs_dir, port, token):
        # in this process: the poll only reads whether the server has the run yet
        wait_for(lambda: cli_here("runs", "get", "long-run", "--server", url, env=env,
                                  check=False).returncode == 0,
                 what="the server to index the run")
    # nothing listens on the port now
    gone = run_cli("runs", "wait", "long-run", "--server", url, "--retry-for", "1", env=env,
                   check=False)
    assert gone.returncode == 2, gone.stderr
    assert "trying again for up to 1s (--retry-for)" in gone.stderr
    assert "cannot reach the runwatch server" in gone.stderr
    assert "--retry-for SECONDS waits longer" in gone.stderr
    one_shot = run_cli("runs", "get", "long-run", "--server", url, env=env, check=False)
    assert one_shot.returncode == 2
    assert "cannot reach the runwatch server" in one_shot.stderr
    assert "trying again" not in one_shot.stderr
