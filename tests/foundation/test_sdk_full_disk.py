"""A full disk loses no record silently: the SDK resumes at the last complete line,
retries sample files and whole files, leaves no temporary file behind, and a run that
ends while the disk is still full counts and reports every record it could not write.

The disk is a real one: a 256 KiB tmpfs mounted for the test (this needs root, as CI
has), filled with a plain file until the kernel answers ENOSPC.
"""

from __future__ import annotations

import json
import os
import re
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import runwatch
from runwatch.rundir import format as fmt
from tests.support import wait_for
from tests.support.cli import run_cli
from tests.support.disk import BLOCK, fill, small_disk


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    """A folder on a fresh 256 KiB filesystem of its own."""
    with small_disk(tmp_path / "disk") as mount:
        yield mount


def parsed(path: Path) -> list[dict[str, Any]]:
    """Every line of a JSONL file, each required to be whole JSON (no fragments)."""
    return [json.loads(line) for line in path.read_bytes().splitlines()]


def open_run(disk: Path, name: str) -> runwatch.Run:
    run = runwatch.init(name=name, dir=disk / "runs", flush_interval=0.05)
    assert isinstance(run, runwatch.Run)
    return run


def test_records_logged_while_the_disk_is_full_are_written_once_it_has_room(
        disk: Path) -> None:
    run = open_run(disk, "full")
    d = disk / "runs" / "full"
    for step in range(10):
        run.log({"loss": 1.0, "pad": float(step)}, step=step)
    run.log_samples(0, [{"prompt": "before", "completion": "c"}])
    run._writer.flush_now()
    wait_for(lambda: (d / fmt.METRICS).exists() and len(parsed(d / fmt.METRICS)) == 10,
             what="the first records on disk")
    filler = fill(disk)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for step in range(10, 400):
            run.log({"loss": 0.5, "pad": float(step)}, step=step)
        run.log_samples(1, [{"prompt": "while full", "completion": "x" * 2000}])
        run.log_samples(0, [{"prompt": "more of step 0", "completion": "y" * 2000}])
        run.set_manifest_fields(wandb_url="https://example.invalid/full")
        run._writer.flush_now()
        wait_for(lambda: run._writer.io_warnings >= 1, what="the writer to meet the full disk")
    assert any("could not write" in str(w.message) for w in caught)
    filler.unlink()
    run.finish()

    metrics = parsed(d / fmt.METRICS)
    assert [r["seq"] for r in metrics] == list(range(400)), "each record once, none torn"
    assert [r["pad"] for r in metrics] == [float(s) for s in range(400)]
    step0 = json.loads((d / "step_0000_completions.json").read_bytes())
    assert [s["prompt"] for s in step0["samples"]] == ["before", "more of step 0"]
    step1 = json.loads((d / "step_0001_completions.json").read_bytes())
    assert step1["samples"][0]["prompt"] == "while full"
    assert json.loads((d / fmt.MANIFEST).read_bytes())["wandb_url"].endswith("/full")
    assert not [p.name for p in d.iterdir() if p.name.endswith(".tmp")]
    assert run.dropped_lines == 0
    assert [e["phase"] for e in parsed(d / fmt.EVENTS)] == ["RUNNING", "SUCCEEDED"]


def _full_after_first_record(disk: Path, name: str) -> tuple[runwatch.Run, Path]:
    """A run on `disk` whose first record is written, then the disk filled."""
    run = open_run(disk, name)
    d = disk / "runs" / name
    run.log({"loss": 1.0}, step=0)
    run._writer.flush_now()
    wait_for(lambda: (d / fmt.METRICS).exists(), what="the first record on disk")
    fill(disk)
    return run, d


def test_a_run_that_ends_on_a_full_disk_counts_what_it_could_not_write(disk: Path,
                                                                       tmp_path: Path) -> None:
    run, d = _full_after_first_record(disk, "ends-full")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for step in range(1, 1000):
            run.log({"loss": 0.5, "pad": float(step)}, step=step)
        run.log_samples(1, [{"prompt": "p", "completion": "x" * 5000}])
        run.finish()

    metrics = parsed(d / fmt.METRICS)
    events = parsed(d / fmt.EVENTS)
    samples = list(d.glob("step_*.json"))
    written = len(metrics) + len(events) + len(samples)
    # 1000 metric records, RUNNING and SUCCEEDED, and one sample.
    assert run.dropped_lines == 1000 + 2 + 1 - written > 0
    assert [r["seq"] for r in metrics] == list(range(len(metrics)))
    assert any(f"{run.dropped_lines} records" in str(w.message) for w in caught)
    # the final event is written after every other record; events.jsonl's page has room
    # for it, so it is on disk and counts what the disk refused
    assert [e["phase"] for e in events] == ["RUNNING", "SUCCEEDED"]
    assert events[-1]["unwritten"] == run.dropped_lines
    assert events[-1]["reason"] == \
        f"{run.dropped_lines} records could not be written: the disk refused them"
    assert not [p.name for p in d.iterdir() if p.name.endswith(".tmp")]
    assert os.statvfs(disk).f_bavail == 0, "the disk stayed full throughout"
    # the run list marks the run: a plain SUCCEEDED would hide that its records are lost
    db = str(tmp_path / "index.db")  # the runs folder's own disk is full
    run_cli("index", str(disk / "runs"), "--db", db)
    listed = run_cli("runs", "list", "--dir", str(disk / "runs"), "--db", db,
                     env={"COLUMNS": "160"})
    assert re.search(r"ends-full\W+\w+\W+SUCCEEDED \(records lost\)", listed.stdout), \
        listed.stdout


def test_a_final_event_the_full_disk_refuses_is_counted_and_warned_of(disk: Path) -> None:
    run = runwatch.init(name="no-end", dir=disk / "runs", phase="PREPARING",
                        flush_interval=0.05)
    assert isinstance(run, runwatch.Run)
    d = disk / "runs" / "no-end"
    run._writer.flush_now()
    wait_for(lambda: (d / fmt.EVENTS).exists(), what="the first event on disk")
    fill(disk)
    total = 3 * BLOCK // 50  # progress events (each over 50 bytes) that overflow the page
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for i in range(total):
            run.set_phase("PREPARING", stage="tokenizing", done=i, total=total)
        run.finish()

    events = parsed(d / fmt.EVENTS)  # whole lines only: no event is torn
    assert events[-1]["phase"] == "PREPARING", "the final event is not on disk"
    assert [e["seq"] for e in events] == list(range(len(events)))
    # the first PREPARING, the progress events and the final one: those not on disk are lost
    assert run.dropped_lines == 1 + total + 1 - len(events) > 1
    assert any(f"runwatch: {run.dropped_lines} records could not be written" in str(w.message)
               for w in caught)
    assert os.statvfs(disk).f_bavail == 0, "the disk stayed full throughout"


def test_one_record_the_full_disk_refused_is_said_in_the_singular(disk: Path,
                                                                  tmp_path: Path) -> None:
    """Found in a trial (trial35, a wording finding): "1 records could not be written: the
    disk refused them". The run list marks it all the same."""
    run, d = _full_after_first_record(disk, "one-lost")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        # a sample file of its own, which needs a page the full disk does not give
        run.log_samples(1, [{"prompt": "p", "completion": "x" * 5000}])
        run.finish()

    assert run.dropped_lines == 1
    assert any(f"runwatch: 1 record could not be written to {d} and is lost" in
               str(w.message) for w in caught), [str(w.message) for w in caught]
    end = parsed(d / fmt.EVENTS)[-1]
    assert (end["phase"], end["unwritten"]) == ("SUCCEEDED", 1)
    assert end["reason"] == "1 record could not be written: the disk refused it"
    db = str(tmp_path / "index.db")
    run_cli("index", str(disk / "runs"), "--db", db)
    listed = run_cli("runs", "list", "--dir", str(disk / "runs"), "--db", db,
                     env={"COLUMNS": "160"})
    assert re.search(r"one-lost\W+\w+\W+SUCCEEDED \(records lost\)", listed.stdout), \
        listed.stdout
