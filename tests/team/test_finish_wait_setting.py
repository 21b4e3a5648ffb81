"""RUNWATCH_FINISH_WAIT_S: how long a team run's finish() waits for its last send, 0 to the
sender's FINISH_WAIT_S (job control's retry wait outlasts no longer one). A value that is
no such number is refused by runwatch.init, saying what to set, before any run folder is
made; a good one is the run's wait (tests/jobs/test_retry_while_sending.py holds a job's
folder for it)."""

from __future__ import annotations

from pathlib import Path

import pytest

import runwatch
from runwatch.sdk.sender import FINISH_WAIT_S
from runwatch.server.runner import free_port

ENV_FINISH_WAIT = "RUNWATCH_FINISH_WAIT_S"  # as docs/team.md names it


@pytest.mark.parametrize("value", ["soon", "-1", "nan", str(FINISH_WAIT_S + 1)])
def test_a_bad_finish_wait_is_refused_before_the_run_is_made(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(ENV_FINISH_WAIT, value)
    runs = tmp_path / "runs"
    with pytest.raises(ValueError, match=rf"{ENV_FINISH_WAIT}=.* is not a number of seconds "
                       rf"from 0 to {FINISH_WAIT_S:g}.*set one, or unset it"):
        runwatch.init("team", name="r", dir=runs, server=f"http://127.0.0.1:{free_port()}")
    assert not runs.exists() or not any(runs.iterdir())


def test_a_finish_wait_is_the_runs_and_offline_runs_never_read_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_FINISH_WAIT, " 0 ")
    # nothing listens there: finish() gives up at once and says what sends the rest
    with pytest.warns(RuntimeWarning) as warned:
        run = runwatch.init("team", name="sent", dir=tmp_path / "runs",
                            server=f"http://127.0.0.1:{free_port()}")
        run.log({"loss": 1.0})
        run.finish()
    assert any("sends the rest" in str(w.message) for w in warned), [
        str(w.message) for w in warned]
    monkeypatch.setenv(ENV_FINISH_WAIT, "soon")
    with runwatch.init("team", name="offline", dir=tmp_path / "runs") as offline:
        offline.log({"loss": 1.0})
