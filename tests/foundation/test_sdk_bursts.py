"""A burst of large records on a disk that takes writes loses none of them: the writer
writes as encoded bytes pile up, not only once it has encoded a whole batch, so the memory
it keeps for a disk that refuses writes (64 MiB a file) never fills on a healthy one. A
record dropped while the disk refused writes is counted in the run's end, so the run list
marks the run, however the disk is at the end.
"""

from __future__ import annotations

import errno
import json
import re
import warnings
from pathlib import Path
from typing import Any

import runwatch
from runwatch.rundir import format as fmt
from tests.support import wait_for
from tests.support.cli import run_cli
from tests.support.disk import small_disk


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_bytes().splitlines()]


def said(caught: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in caught if "runwatch" in str(w.message)]


def test_a_burst_of_large_sample_files_is_written_whole(runs_dir: Path) -> None:
    # the writer's first look comes at finish(): about 77 MB wait for it then
    run = runwatch.init(name="samples-burst", dir=runs_dir, flush_interval=60)
    assert isinstance(run, runwatch.Run)
    samples = [{"prompt": "q" * 100_000, "completion": "a" * 500_000, "reward": 0.5}] * 16
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for step in range(8):
            run.log_samples(step, samples)
        run.finish()
    assert said(caught) == []
    assert run.dropped_lines == 0
    d = runs_dir / "samples-burst"
    for step in range(8):
        written = json.loads((d / f"step_{step:04d}_completions.json").read_bytes())
        assert len(written["samples"]) == 16, step
    end = lines(d / fmt.EVENTS)[-1]
    assert end["phase"] == "SUCCEEDED" and "unwritten" not in end


def test_a_burst_of_large_log_lines_is_written_whole(runs_dir: Path) -> None:
    run = runwatch.init(name="lines-burst", dir=runs_dir, flush_interval=60)
    assert isinstance(run, runwatch.Run)
    text = "t" * 8000
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for i in range(9000):  # about 72 MB of lines
            run.log_text(f"generation {i}", data={"text": text})
        run.finish()
    assert said(caught) == []
    assert run.dropped_lines == 0
    logged = lines(runs_dir / "lines-burst" / fmt.LOGS)
    assert [r["seq"] for r in logged] == list(range(9000))
    assert logged[0]["message"] == "generation 0"


def filled(folder: Path) -> Path:
    """Fill the disk `folder` is on until writes fail with ENOSPC; the filler file."""
    filler = folder / "filler"
    with open(filler, "wb", buffering=0) as f:
        while True:
            try:
                f.write(b"\0" * (1 << 20))
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
                return filler


def test_lines_dropped_while_the_disk_refused_them_are_counted_in_the_run_s_end(
        tmp_path: Path) -> None:
    """The disk refuses writes for longer than the SDK keeps lines for it (64 MiB a file),
    then takes the rest before the run ends: the run's end still says how many were lost,
    and the run list marks it."""
    with small_disk(tmp_path / "disk", 96 * 1024) as disk:
        run = runwatch.init(name="dropped", dir=disk / "runs", flush_interval=0.05)
        assert isinstance(run, runwatch.Run)
        d = disk / "runs" / "dropped"
        run.log({"loss": 1.0}, step=0)
        run._writer.flush_now()
        wait_for(lambda: (d / fmt.METRICS).exists(), what="the first record on disk")
        filler = filled(disk)
        text = "t" * 8000
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for i in range(9000):  # about 72 MB while the disk is full
                run.log_text(f"generation {i}", data={"text": text})
            run._writer.flush_now()
            wait_for(lambda: run._writer.dropped_lines > 0, what="lines dropped")
        assert any("the oldest lines are being dropped" in m for m in said(caught))
        filler.unlink()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            run.finish()
        assert said(caught) == [], "the disk took every line still kept"

        lost = run.dropped_lines
        assert 0 < lost < 9000
        logged = lines(d / fmt.LOGS)
        assert len(logged) == 9000 - lost
        assert logged[-1]["message"] == "generation 8999", "the newest lines are kept"
        end = lines(d / fmt.EVENTS)[-1]
        assert (end["phase"], end["unwritten"]) == ("SUCCEEDED", lost)
        assert end["reason"] == f"{lost} records could not be written: the disk refused them"
        db = str(tmp_path / "index.db")
        run_cli("index", str(disk / "runs"), "--db", db)
        listed = run_cli("runs", "list", "--dir", str(disk / "runs"), "--db", db,
                         env={"COLUMNS": "160"})
        assert re.search(r"dropped\W+\w+\W+SUCCEEDED \(records lost\)", listed.stdout), \
            listed.stdout
