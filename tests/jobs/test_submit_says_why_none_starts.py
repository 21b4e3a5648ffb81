"""When no running worker would start a queued job, `runwatch submit`'s next step and the
run detail's `job.waits_for` (`runwatch runs get`) say why in the same words
(runwatch.jobs.control.nobody_starts), with real workers running: the workers of its
profile offer fewer devices than it asks for (the most one offers is named, and how to
fix it), they claim another folder's jobs only, or the only one drains.

Found in a trial (trial35, defects 3 and 6, and a wording finding): a job asking for 4
devices of workers that offer 2 waited for good while submit said "worker X will start
it" and `waits_for` was null; a submit into a folder no running worker claims said "no
worker … is running on this index" while `runs get` named the folder they claim; with
its only worker draining the waits said that no worker was running.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from runwatch.store import jobs as store_jobs
from tests.support.cli import cli_here
from tests.support.jobs import job
from tests.support.wait import wait_for
from tests.support.workers import Workers, workers

__all__ = ["workers"]  # the fixture


def running(engine: Engine, n: int = 1) -> list[dict[str, Any]]:
    """The live workers of the index, once `n` of them have registered."""
    def live() -> list[dict[str, Any]] | None:
        with engine.connect() as conn:
            found = [w for w in store_jobs.list_workers(conn) if w["stopped_at"] is None]
        return found if len(found) >= n else None

    found = wait_for(live, what=f"{n} worker(s) to register")
    assert found is not None
    return found


def submitted(runs: Path, db: str, *args: str) -> tuple[str, str]:
    """Submit `args` into `runs` from the CLI: what its table's next step says of who
    starts the job (the line after the commands), and the run detail's `job.waits_for`."""
    out = cli_here("submit", "--dir", str(runs), "--db", db, "--name", "job", *args).stdout
    lines = out.splitlines()
    said = lines[lines.index("next:") + 3]
    detail = json.loads(cli_here("runs", "get", "job", "--dir", str(runs), "--db", db,
                                 "-o", "json").stdout)
    return said, detail["job"]["waits_for"]


def test_a_job_asking_more_devices_than_any_worker_offers_says_so_and_what_to_do(
        engine: Engine, db_url: str, runs_dir: Path, workers: Workers) -> None:
    (runs_dir / ".runwatch").mkdir(exist_ok=True)
    (runs_dir / ".runwatch" / "profiles.yaml").write_text(
        "profiles:\n  cpu4: {devices: 4, hourly_rate: 1.0}\n")
    workers.start(runs_dir, db_url, devices=2, device_profile="cpu4")
    (worker,) = running(engine)
    said, waits = submitted(runs_dir, db_url, "--device-profile", "cpu4", "--devices", "4",
                            "--", "python", "-c", "pass")
    assert said == waits, (said, waits)
    assert waits.startswith("no running worker of profile cpu4 offers 4 devices (the most "
                            "one offers is 2)"), waits
    assert "--device-profile cpu4 --devices 4" in waits and "--devices 2 or fewer" in waits
    assert worker["id"] not in waits
    # a job that fits is the worker's, as before
    out = cli_here("submit", "--dir", str(runs_dir), "--db", db_url, "--name", "fits",
                   "--device-profile", "cpu4", "--devices", "2", "-o", "json",
                   "--", "python", "-c", "pass").stdout
    assert json.loads(out)["next"] == f"worker {worker['id']} will start it when its " \
                                      "devices are free"


def test_submit_into_a_folder_no_running_worker_claims_says_what_runs_get_says(
        engine: Engine, db_url: str, tmp_path: Path, runs_dir: Path,
        workers: Workers) -> None:
    workers.start(runs_dir, db_url)
    running(engine)
    other = tmp_path / "runs2"
    said, waits = submitted(other, db_url, "--", "python", "-c", "pass")
    assert said == waits, (said, waits)
    assert waits.startswith(f"no worker of profile cpu runs the jobs of {other}: the "
                            f"running ones claim jobs of {runs_dir.resolve()} only"), waits


def test_with_its_only_worker_draining_a_job_says_the_worker_drains(
        engine: Engine, db_url: str, tmp_path: Path, runs_dir: Path,
        workers: Workers) -> None:
    gate = tmp_path / "gate"
    proc = workers.start(runs_dir, db_url)
    (worker,) = running(engine)
    cli_here("submit", "--dir", str(runs_dir), "--db", db_url, "--name", "busy", "--",
             sys.executable, "-c", f"import os, time\nwhile not os.path.exists({str(gate)!r}): "
             "time.sleep(0.05)")
    wait_for(lambda: (job(engine, "busy") or {}).get("pid"), what="the worker to start busy")
    cli_here("resources", str(runs_dir), "--db", db_url, "--drain", worker["id"])
    said, waits = submitted(runs_dir, db_url, "--", "python", "-c", "pass")
    assert said == waits, (said, waits)
    assert waits.startswith("every running worker of profile cpu that claims this folder's "
                            f"jobs is draining ({worker['id']})"), waits
    gate.touch()
    assert proc.wait(timeout=60) == 0  # drained: its job done, it exits
