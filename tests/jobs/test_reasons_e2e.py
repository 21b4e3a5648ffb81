"""Each failure reason of the catalogue, produced by a real cause and classified by a real
worker: jobs submitted through the queue, run by a `runwatch worker` process, ended by
what ends training jobs (a device OOM exception, host memory running out, a refused
data file or setting, SIGKILL from outside, an exit without finishing, a PREPARING hang past the
startup timeout, a bug). The run shows the catalogue's sentence and code; the exception's
message and module never reach the reason, and the run's logs hold them.

The scripts are in tests/jobs/scripts/. One worker runs every case of the module at once
(one job per case); host memory running out in a memory-limited cgroup has a worker of
its own inside that cgroup.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

from runwatch.jobs.failures import CATALOGUE
from runwatch.jobs.spec import recipe_spec
from runwatch.jobs.submit import submit
from runwatch.rundir import format as fmt
from runwatch.store import open_engine
from tests.support import TINY_MODEL, wait_for
from tests.support.jobs import events, job, run_row, submit_command
from tests.support.workers import Workers

SCRIPTS = Path(__file__).resolve().parent / "scripts"
PY = sys.executable
# The address space a job may use under `ulimit -v` (KiB): the interpreter and the SDK fit
# in it with room to spare, the allocating script's blocks soon do not.
ULIMIT_KB = 600_000
# Long enough for a loaded machine to start the interpreter; a hang goes on far past it.
STARTUP_TIMEOUT_S = 3.0
# A job's whole life on a loaded two-core machine (several jobs at once, some import torch).
END_DEADLINE_S = 180.0
# The text of the exceptions the scripts raise (tests/jobs/scripts/*.py).
SECRET = "runwatch_e2e_secret"


def script(name: str, *args: str) -> list[str]:
    return [PY, str(SCRIPTS / f"{name}.py"), *args]


@dataclass(frozen=True)
class Case:
    """One job: how it is started, the reason code it must end with, and the words of its
    cause that the reason must not show while its logs do."""

    argv: list[str]
    code: str
    hidden: tuple[str, ...] = ()
    spec: dict[str, Any] = field(default_factory=dict)


CASES = {
    "device-oom": Case(script("device_oom"), "device_oom",
                       ("OutOfMemoryError", "CUDA out of memory", SECRET)),
    "host-oom-ulimit": Case(["bash", "-c", f"ulimit -v {ULIMIT_KB}; exec {PY} "
                             f"{SCRIPTS / 'allocate.py'}"], "host_oom", ("MemoryError",)),
    "bug": Case(script("crash"), "failed", ("ValueError", SECRET, "mylib.layers")),
    "exit-early": Case(script("exit_early"), "stopped_early"),
    "prepare-hang": Case(script("prepare_hang"), "startup_timeout",
                         spec={"startup_timeout_s": STARTUP_TIMEOUT_S}),
    "sigkill": Case(script("train"), "stopped"),
}
# A data file whose third row the SFT recipe refuses, naming the row.
GOOD_ROW = {"messages": [{"role": "user", "content": "1+1"},
                         {"role": "assistant", "content": "2"}]}
BAD_ROW = {"messages": [{"role": "user", "content": "1+1"},
                        {"role": "assistant", "content": "2"},
                        {"role": "user", "content": "and 2+2?"}]}
# SFT jobs the runtime refuses: {name: (its max_steps setting, what the refusal says)}.
# The data file's third row is BAD_ROW; a setting that does not parse is refused before
# the data is read (the Python API, unlike `runwatch submit`, queues it unchecked).
REFUSED = {
    "refused-row": ("max_steps=2", "row 3 ends with a user message"),
    "refused-setting": ("max_steps=-1", "max_steps must be positive, got -1"),
}


@dataclass
class Ended:
    """The module's runs folder and index, once every case's job has ended."""

    runs: Path
    engine: Engine


def wait_ended(engine: Engine, name: str) -> Any:
    return wait_for(lambda: (row := run_row(engine, name)).status in fmt.TERMINAL_PHASES
                    and row, what=f"run {name} to end", deadline=END_DEADLINE_S, interval=0.1)


@pytest.fixture(scope="module")
def ended(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ended]:
    root = tmp_path_factory.mktemp("reasons")
    runs = root / "runs"
    runs.mkdir()
    db = runs / ".runwatch" / "index.db"
    data = root / "rows.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in (GOOD_ROW, GOOD_ROW, BAD_ROW)))
    settings = [*TINY_MODEL, "batch_size=8", f"data_path={data}",
                f"cache_dir={root / 'cache'}", "wandb_project=None"]
    engine = open_engine(db)
    workers = Workers()
    try:
        for name, case in CASES.items():
            submit_command(engine, runs, name, case.argv, max_attempts=1, **case.spec)
        for name, (setting, _) in REFUSED.items():
            spec = recipe_spec("sft", [*settings, setting], cwd=root, max_attempts=1)
            submit(engine, runs, spec, name)
        workers.start(runs, db, devices=len(CASES) + len(REFUSED))
        # SIGKILL from outside, once the job trains (its metrics are on disk).
        wait_for(lambda: (runs / "sigkill" / fmt.METRICS).exists(),
                 what="the sigkill job to train", deadline=END_DEADLINE_S)
        pid = wait_for(lambda: (job(engine, "sigkill") or {}).get("pid"),
                       what="the sigkill job's pid")
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        names = [*CASES, *REFUSED]
        wait_for(lambda: all(run_row(engine, n).status in fmt.TERMINAL_PHASES for n in names),
                 what=f"runs {', '.join(names)} to end", deadline=END_DEADLINE_S,
                 interval=0.2)
        yield Ended(runs, engine)
    finally:
        workers.close()
        engine.dispose()


def logs_text(run_dir: Path) -> str:
    """Everything the run's logs and its first attempt's output hold."""
    return "".join(p.read_text(errors="replace") for p in (
        run_dir / fmt.LOGS, fmt.attempt_dir(run_dir, 1) / fmt.OUTPUT_LOG) if p.exists())


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_real_cause_ends_the_run_with_its_catalogue_reason(ended: Ended, name: str) -> None:
    case = CASES[name]
    reason = CATALOGUE[case.code]
    row = run_row(ended.engine, name)
    assert (row.status, row.reason_code, row.reason) == ("FAILED", case.code, reason.sentence)
    last = events(ended.runs / name)[-1]
    assert (last["phase"], last.get("code"), last.get("reason")) == (
        "FAILED", case.code, reason.sentence)
    held = logs_text(ended.runs / name)
    for words in case.hidden:
        assert words not in row.reason
        assert words in held, f"the logs of {name} do not say {words!r}"


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_a_refusal_keeps_the_runtimes_own_words(ended: Ended, name: str) -> None:
    row = run_row(ended.engine, name)
    assert (row.status, row.reason_code) == ("FAILED", "refused")
    assert row.reason.startswith(REFUSED[name][1]), row.reason
    for words in ("RecipeError", "ConfigError", "Traceback", "runwatch.recipes"):
        assert words not in row.reason
    assert "RUNNING" not in [e["phase"] for e in events(ended.runs / name)]


MEMORY_CGROUPS = Path("/sys/fs/cgroup/memory")
# The cgroup's limit: the worker's new allocations and a job's interpreter fit in it; the
# allocating script's blocks soon do not, and it is by far the biggest process there.
CGROUP_LIMIT = 320 * 1024 * 1024


@pytest.fixture
def memory_cgroup() -> Iterator[Path]:
    """A memory cgroup (v1) of its own with CGROUP_LIMIT, removed afterwards."""
    group = MEMORY_CGROUPS / f"runwatch-test-{os.getpid()}"
    try:
        group.mkdir()
        (group / "memory.limit_in_bytes").write_text(str(CGROUP_LIMIT))
    except OSError as exc:
        if group.is_dir():
            group.rmdir()
        pytest.skip(f"cannot make a memory-limited cgroup under {MEMORY_CGROUPS}: {exc}")
    try:
        yield group
    finally:
        wait_for(lambda: not (group / "cgroup.procs").read_text().strip(),
                 what="the cgroup's processes to end")
        group.rmdir()


def test_the_oom_killer_in_a_memory_limited_cgroup_is_host_oom(
        tmp_path: Path, memory_cgroup: Path) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    db = runs / ".runwatch" / "index.db"
    engine = open_engine(db)
    workers = Workers()
    try:
        worker = workers.start(runs, db)
        # The worker's jobs start inside the cgroup: every job it starts from now on.
        (memory_cgroup / "cgroup.procs").write_text(str(worker.pid))
        submit_command(engine, runs, "oom-killed", script("allocate"), max_attempts=1)
        row = wait_ended(engine, "oom-killed")
        assert (row.status, row.reason_code, row.reason) == (
            "FAILED", "host_oom", CATALOGUE["host_oom"].sentence)
        counters = dict(line.split() for line in
                        (memory_cgroup / "memory.oom_control").read_text().splitlines())
        assert int(counters["oom_kill"]) >= 1, "the kernel's OOM killer ended it"
        assert worker.poll() is None, "the OOM killer chose the job, not its worker"
    finally:
        workers.close()
        engine.dispose()
