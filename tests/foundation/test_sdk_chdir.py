"""A loop that changes its working directory after init() (into its output folder, as
scripts do) keeps recording into its run's folder: init() fixes the folder's absolute path,
so the default relative `dir="runs"` does not follow the loop elsewhere."""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

import pytest

import runwatch
from runwatch.rundir import format as fmt
from tests.support import wait_for


def test_a_run_keeps_its_folder_when_the_loop_changes_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    run = runwatch.init(name="cd", dir="runs", flush_interval=0.05)
    assert isinstance(run, runwatch.Run)
    d = tmp_path / "runs" / "cd"
    assert run.dir == d
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for step in range(5):
            run.log({"loss": 1.0}, step=step)
        run._writer.flush_now()
        wait_for(lambda: (d / fmt.METRICS).exists(), what="the first steps on disk")
        (tmp_path / "out").mkdir()
        os.chdir(tmp_path / "out")
        for step in range(5, 10):
            run.log({"loss": 0.5}, step=step)
        run.log_samples(9, [{"prompt": "p", "completion": "c"}])
        run.log_engine_config({"n": 1}, {"n": 1})
        run.finish()
    assert [str(w.message) for w in caught if "runwatch" in str(w.message)] == []
    steps = [json.loads(line)["step"] for line in (d / fmt.METRICS).read_bytes().splitlines()]
    assert steps == list(range(10))
    assert (d / "step_0009_completions.json").exists()
    assert (d / fmt.ENGINE_CONFIG).exists()
    assert not (tmp_path / "out" / "runs").exists()
