"""The SDK writes no record its readers would skip: a log line past the longest line a
reader reads keeps its message without its data (said in the message, counted in
`dropped_values`); samples that would make a step's file larger than a reader reads, and
any other record past the line cap, are left out, counted as records lost in
`dropped_lines` and in the run's end, and warned about once."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import runwatch
from runwatch.rundir import format as fmt
from runwatch.rundir.format import MAX_LINE_BYTES
from runwatch.rundir.safeio import SAMPLES_CAP
from tests.support.cli import run_cli

BIG = 17_000_000  # past the 16 MiB line cap


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_bytes().splitlines()]


def said(caught: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in caught if "runwatch" in str(w.message)]


def open_run(runs_dir: Path, name: str) -> runwatch.Run:
    run = runwatch.init(name=name, dir=runs_dir, flush_interval=60)
    assert isinstance(run, runwatch.Run)
    return run


def test_a_log_line_longer_than_readers_read_keeps_its_message(runs_dir: Path) -> None:
    run = open_run(runs_dir, "long-log")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run.log_text("full eval dump", data={"outputs": "o" * BIG})
        run.log_text("after the dump")
        run.log_text("é" * (BIG // 2), level="warning")  # its message alone is too long
        run.finish()
    raw = (runs_dir / "long-log" / fmt.LOGS).read_bytes().splitlines(keepends=True)
    assert max(len(line) for line in raw) <= MAX_LINE_BYTES
    logged = [json.loads(line) for line in raw]
    assert logged[0]["message"].startswith("full eval dump [runwatch left out its data: this "
                                           "line would have been 17,000,")
    assert "data" not in logged[0]
    assert logged[1]["message"] == "after the dump"
    assert logged[2]["message"].startswith("éé")
    assert logged[2]["message"].endswith("more than the 16 MiB a reader of logs.jsonl reads]")
    assert "runwatch cut this message" in logged[2]["message"]
    assert [r["seq"] for r in logged] == [0, 1, 2]
    assert run.dropped_values == 2 and run.dropped_lines == 0
    told = said(caught)
    assert len(told) == 1 and "log_text('full eval dump')" in told[0] and "16 MiB" in told[0]
    shown = json.loads(run_cli("runs", "logs", "long-log", "--dir", str(runs_dir),
                               "-o", "json").stdout)
    assert [r["message"][:14] for r in shown] == ["full eval dump", "after the dump",
                                                  "é" * 14]


def test_samples_past_what_readers_read_are_left_out_and_counted(runs_dir: Path) -> None:
    run = open_run(runs_dir, "long-samples")
    sample = {"prompt": "p" * 1000, "completion": "c" * 700_000, "reward": 1.0}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(10):  # one step in ten parts of 7 MB: 70 MB
            run.log_samples(0, [sample] * 10)
        run.log_samples(1, [sample])
        run.finish()
    d = runs_dir / "long-samples"
    step0 = d / "step_0000_completions.json"
    assert step0.stat().st_size <= SAMPLES_CAP
    kept = len(json.loads(step0.read_bytes())["samples"])
    lost = run.dropped_lines
    assert kept + lost == 100 and lost > 0
    assert len(json.loads((d / "step_0001_completions.json").read_bytes())["samples"]) == 1
    told = said(caught)
    assert len(told) == 1 and "log_samples()" in told[0] and "64 MiB" in told[0]
    end = lines(d / fmt.EVENTS)[-1]
    assert (end["phase"], end["unwritten"]) == ("SUCCEEDED", lost)
    assert end["reason"] == f"{lost} records could not be written: they were larger than a " \
                            "reader reads"
    shown = json.loads(run_cli("runs", "rollouts", "long-samples", "--step", "0", "--dir",
                               str(runs_dir), "-o", "json").stdout)
    assert shown["total"] == kept


def test_a_checkpoint_record_longer_than_readers_read_is_left_out(runs_dir: Path) -> None:
    run = open_run(runs_dir, "long-checkpoint")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run.log_checkpoint(0, "training", "ckpt-0", notes="n" * BIG)
        run.log_checkpoint(1, "training", "ckpt-1")
        run.finish()
    d = runs_dir / "long-checkpoint"
    assert [(r["id"], r["seq"]) for r in lines(d / fmt.CHECKPOINTS)] == [("ckpt-1", 0)]
    assert run.dropped_lines == 1
    assert len(said(caught)) == 1
    end = lines(d / fmt.EVENTS)[-1]
    assert end["unwritten"] == 1
    assert end["reason"] == "1 record could not be written: it was larger than a reader reads"
    # the run list marks it as it marks records the disk refused (it read SUCCEEDED)
    listed = run_cli("runs", "list", "--dir", str(runs_dir), env={"COLUMNS": "160"}).stdout
    assert "SUCCEEDED (records lost)" in listed, listed


def test_an_engine_config_larger_than_readers_read_is_not_written(runs_dir: Path) -> None:
    run = open_run(runs_dir, "long-config")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run.log_engine_config({"n": 1}, {"n": 1})
        run.log_engine_config({"prompt": "p" * 5_000_000}, {"n": 2})  # past 4 MiB
        run.finish()
    d = runs_dir / "long-config"
    assert json.loads((d / fmt.ENGINE_CONFIG).read_bytes())["resolved"] == {"n": 1}
    told = said(caught)
    assert len(told) == 1 and "engine_config.json" in told[0] and "4 MiB" in told[0]
    assert run.dropped_lines == 1
    assert lines(d / fmt.EVENTS)[-1]["unwritten"] == 1
