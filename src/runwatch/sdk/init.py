"""`runwatch.init()`: create (or resume) a run directory, or attach to the one job control
made for this process, and return the Run that writes it."""

from __future__ import annotations

import contextlib
import os
import socket
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from runwatch.rundir import append  # (a module: append imports sdk.lock, so no names)
from runwatch.rundir import format as fmt
from runwatch.rundir.atomic import write_atomic
from runwatch.rundir.jsonl import dumps_line, loads_line
from runwatch.rundir.manifest import build_manifest
from runwatch.sdk.config import config_to_yaml
from runwatch.sdk.environment import environment
from runwatch.sdk.live import recording, register
from runwatch.sdk.lock import RunLock
from runwatch.sdk.null import NullRun
from runwatch.sdk.run import Run

Mode = Literal["offline", "disabled"]
# How long attaching waits for job control to let the run's folder go.
ATTACH_LOCK_WAIT_S = 10.0


def init(
    project: str | None = None,
    name: str | None = None,
    config: Any = None,
    method: str | None = None,
    base_model: str | None = None,
    dataset: str | None = None,
    trainer: str | None = None,
    backend: str | None = None,
    group: str | None = None,
    tags: Sequence[str] = (),
    dir: str | os.PathLike[str] = "runs",
    mode: Mode = "offline",
    resume: bool = False,
    phase: str = "RUNNING",
    flush_interval: float = 0.5,
    server: str | None = None,
    token: str | None = None,
) -> Run | NullRun:
    """Start recording a run into `dir`/<name> and return its Run (a context manager).

    `mode="disabled"`, or a non-zero RANK / LOCAL_RANK, returns a NullRun that records
    nothing. `resume=True` continues the run already in `dir`/<name>. Under a job
    (RUNWATCH_RUN_DIR set by a runwatch worker) it attaches to that job's run instead,
    ignoring `dir`, `name` and `resume`, and keeping the job's project and name; once
    this process records the job's run, or that run has ended, a further init() records
    a run of its own.

    `server` (default: RUNWATCH_SERVER) also streams the run to that runwatch server, with
    `token` (default: RUNWATCH_TOKEN) as its bearer token; the project defaults to
    RUNWATCH_PROJECT, else "default" (docs/team.md).
    """
    if mode == "disabled" or _is_secondary_rank():
        return NullRun()
    if mode != "offline":
        raise ValueError(f"mode {mode!r} is not 'offline' or 'disabled'")
    if phase not in fmt.START_PHASES:
        raise ValueError(f"a run starts in one of {', '.join(fmt.START_PHASES)}, not {phase!r}")
    project = project or os.environ.get("RUNWATCH_PROJECT") or "default"
    fmt.validate_name(project, "project name")
    send_to = _send_to(server, token)
    described = {"method": method, "base_model": base_model, "dataset": dataset,
                 "trainer": trainer, "backend": backend, "group": group,
                 "tags": list(tags) or None}
    job_dir = os.environ.get(fmt.ENV_RUN_DIR)
    if job_dir and not recording(Path(job_dir)):
        attached = _attach(Path(job_dir).absolute(), described, config)
        if attached is not None:
            return _start(*attached, phase, flush_interval, send_to,
                          job_attempt=_attempt_number(os.environ.get(fmt.ENV_ATTEMPT)),
                          jobs_run=True)
    if name is None:
        name = fmt.default_run_name(method or "run")
    fmt.validate_name(name)
    # Absolute: the run keeps its folder when the loop changes its working directory.
    run_dir = Path(dir).absolute() / name
    if recording(run_dir):
        # its lock would name this very process as the one to wait for or stop
        raise fmt.RunDirError(
            f"this process records {run_dir} already (an init() before, such as a "
            "notebook cell run again): go on with the Run that init() returned, or call its "
            "finish() and then init() another run name, or this one with resume=True")
    made = not run_dir.exists()
    run_dir.mkdir(parents=True, exist_ok=True)
    # Only the holder of the folder's lock looks at what is there, so of two processes
    # starting or resuming one run at the same instant exactly one goes on.
    lock = RunLock(run_dir)
    new = False
    try:
        manifest_path = run_dir / fmt.MANIFEST
        if manifest_path.exists():
            if not resume:
                raise fmt.RunDirError(
                    f"{run_dir} already holds a run: pass resume=True to continue it, "
                    "or choose another name"
                )
            manifest = loads_line(manifest_path.read_bytes())
            env = environment()
            resumed_at = time.time()
            # each record file read once: its next seq and its latest record's time
            scanned = {name: append.scan(run_dir / name) for name in fmt.FILES}
            # a process that died without recording its end held no devices from its last
            # record until this one started: the span is kept for the run's cost
            dead = _dead_span(run_dir, resumed_at, scanned)
            if dead is not None:
                manifest[fmt.DEAD_SPANS] = [*_spans(manifest.get(fmt.DEAD_SPANS)), dead]
            # The resumed process is the one to watch now; keep the first start's git state.
            manifest.update(host=env["host"], pid=env["pid"], resumed_at=resumed_at)
            next_seq = _scan_existing(run_dir, scanned)
        else:
            new = True
            manifest = build_manifest(name, project, group=group, tags=tags, method=method,
                                      base_model=base_model, dataset=dataset, trainer=trainer,
                                      backend=backend, **environment())
            next_seq = {}
        _write(run_dir, manifest, config)
        return _start(run_dir, manifest, next_seq, lock, phase, flush_interval, send_to)
    except BaseException:
        # Stopped before its run went live (Ctrl-C, an error in config.to_yaml()): a new
        # run leaves nothing behind, not a manifest that would hold its name as a run that
        # never ends. A run that went live is the exit hook's to end.
        if not recording(run_dir):
            if new:
                _forget(run_dir, made)
            lock.release()
        raise


def _attach(
    run_dir: Path, described: dict[str, Any], config: Any
) -> tuple[Path, dict[str, Any], dict[str, int], RunLock] | None:
    """Take over the run job control made for this process (its folder is in the
    environment): check it is the run the job names, add what this process knows.
    None when that run has ended (this process recorded it and goes on to another)."""
    run_id = os.environ.get(fmt.ENV_RUN_ID, "")
    manifest_path = run_dir / fmt.MANIFEST
    if not manifest_path.is_file():
        raise fmt.RunDirError(
            f"{fmt.ENV_RUN_DIR} names {run_dir}, which holds no run: start the script "
            f"with `runwatch submit`, or unset {fmt.ENV_RUN_DIR} to record a run of its own")
    # The worker lets the folder go just before it starts this process.
    lock = RunLock(run_dir, wait_s=ATTACH_LOCK_WAIT_S)
    try:
        manifest = loads_line(manifest_path.read_bytes())
        if not run_id or manifest.get("run_id") != run_id:
            raise fmt.RunDirError(
                f"{run_dir} holds run {manifest.get('run_id')!r}, not the run "
                f"{run_id!r} that {fmt.ENV_RUN_ID} names, so this process was not "
                f"started for it: unset {fmt.ENV_RUN_DIR} and {fmt.ENV_RUN_ID} to record "
                "a run of its own, or start it with `runwatch submit`")
        moved_on = _moved_on(run_dir, os.environ.get(fmt.ENV_ATTEMPT))
        if moved_on is not None and not _attached_here(manifest):
            raise fmt.RunDirError(moved_on)
        if moved_on is not None or _last_phase(run_dir) in fmt.TERMINAL_PHASES:
            lock.release()
            return None
        # The job's project and name stay; this process says what it trains and where.
        manifest.update({k: v for k, v in described.items() if v is not None})
        attempt = _attempt_number(os.environ.get(fmt.ENV_ATTEMPT))
        manifest.update(environment(), attached_at=time.time(),
                        **({"attempt": attempt} if attempt is not None else {}))
        next_seq = _scan_existing(run_dir)
        _write(run_dir, manifest, config)
    except BaseException:
        lock.release()
        raise
    return run_dir, manifest, next_seq, lock


def _forget(run_dir: Path, made: bool) -> None:
    """Remove what init() wrote of a new run that never went live, and its folder if
    init() made it."""
    for name in (fmt.MANIFEST, fmt.CONFIG):
        for path in (run_dir / name, run_dir / f"{name}.tmp"):
            with contextlib.suppress(OSError):
                path.unlink()
    if made:
        with contextlib.suppress(OSError):
            run_dir.rmdir()  # only when empty: nothing of anyone else's goes


def _write(run_dir: Path, manifest: dict[str, Any], config: Any) -> None:
    # The config's own code (to_yaml()) runs before anything is written: a stop that comes
    # while it runs (SIGTERM, which ends the process at once before the run is live) then
    # leaves no manifest of a run that never started.
    config_text = None if config is None else config_to_yaml(config).encode()
    write_atomic(run_dir / fmt.MANIFEST, dumps_line(manifest))
    if config_text is not None:
        write_atomic(run_dir / fmt.CONFIG, config_text)


def _send_to(server: str | None,
             token: str | None) -> tuple[str, str | None, float] | None:
    """(server URL, token, finish() wait for the last send) when the run is also sent to a
    server (runwatch.sdk.sender)."""
    if server is None and not os.environ.get("RUNWATCH_SERVER"):
        return None
    from runwatch.sdk.sender import ENV_TOKEN, finish_wait_s, server_url
    from runwatch.sdk.sendhttp import bearer_token

    url = server_url(server)
    if url is None:
        return None
    # a bad token or RUNWATCH_FINISH_WAIT_S is refused here, before the run's folder is made
    sent = bearer_token(token or os.environ.get(ENV_TOKEN),
                        "token=" if token else f"the token in {ENV_TOKEN}")
    return url, sent, finish_wait_s()


def _start(run_dir: Path, manifest: dict[str, Any], next_seq: dict[str, int], lock: RunLock,
           phase: str, flush_interval: float,
           send_to: tuple[str, str | None, float] | None,
           job_attempt: int | None = None, jobs_run: bool = False) -> Run:
    sender = None
    if send_to is not None:
        from runwatch.sdk.sender import Sender

        sender = Sender(run_dir, *send_to, interval=flush_interval)
    run = Run(run_dir, manifest, next_seq, lock, interval=flush_interval, sender=sender,
              job_attempt=job_attempt, jobs_run=jobs_run)
    register(run)
    run.set_phase(phase)
    return run


def _is_secondary_rank() -> bool:
    """Whether RANK or LOCAL_RANK names a process other than the first; -1 is the
    frameworks' "not distributed" (the HF Trainer's local_rank default), so it records."""
    for var in ("RANK", "LOCAL_RANK"):
        value = os.environ.get(var)
        if value and value.strip() not in ("0", "-1", ""):
            return True
    return False


def _scan_existing(run_dir: Path, scanned: dict[str, tuple[int, float | None]] | None = None
                   ) -> dict[str, int]:
    """The next seq of each record file of a run being resumed or attached to: past
    every seq the file had, in earlier attempts too (attempts/<n>/), so a reader's seq
    cursor never sees a new attempt's records as ones it has read. `scanned`: the
    folder's own files as `append.scan` read them already."""
    earlier = run_dir / fmt.ATTEMPTS_DIR
    return {name: max([scanned[name][0] if scanned else append.next_seq(run_dir / name),
                       *(append.next_seq(p) for p in earlier.glob(f"*/{name}"))])
            for name in fmt.FILES}


def _moved_on(run_dir: Path, given: str | None) -> str | None:
    """Why this process's attempt (RUNWATCH_ATTEMPT) is no longer the run's, or None
    while it is (or when no attempt is named). Job control moves a run on to its next
    attempt when it ends one: a process whose attempt was given up before it attached
    (a slow start whose worker died) must not record into the attempt that replaced it."""
    if not given:
        return None
    current = max((int(ev["attempt"]) for ev in append.records(run_dir / fmt.EVENTS)
                   if isinstance(ev.get("attempt"), int)), default=None)
    if current is None or str(current) == given.strip():
        return None
    return (f"{run_dir} is at attempt {current} of its run, not attempt {given} that "
            f"{fmt.ENV_ATTEMPT} names: this process was given up (its worker stopped "
            "heartbeating) and the run was started again, so it records nothing; stop it")


def _attempt_number(given: str | None) -> int | None:
    """The attempt RUNWATCH_ATTEMPT names, or None when it names none."""
    text = (given or "").strip()
    return int(text) if text.isdigit() else None


def _attached_here(manifest: dict[str, Any]) -> bool:
    """Whether this process attached to the run before (its manifest names it): its
    attempt ended, and a further init() records a run of its own."""
    return manifest.get("pid") == os.getpid() and manifest.get("host") == socket.gethostname()


def _dead_span(run_dir: Path, resumed_at: float, scanned: dict[str, tuple[int, float | None]]
               ) -> list[float] | None:
    """[from, to]: when no process of a run being resumed lived, from its last record (the
    latest time of `scanned`, its record files as `append.scan` read them) to
    `resumed_at`, where its latest event is no end (its process died without recording
    one: killed, or its machine stopped); None where it ended, or recorded nothing."""
    if _last_phase(run_dir) in (None, *fmt.TERMINAL_PHASES):
        return None
    last = max((ts for _, ts in scanned.values() if ts is not None), default=None)
    return None if last is None or not last < resumed_at else [float(last), resumed_at]


def _spans(kept: Any) -> list[list[float]]:
    """The dead spans a manifest already holds, those that are [from, to] pairs."""
    return [list(s) for s in kept if isinstance(s, list) and len(s) == 2] \
        if isinstance(kept, list) else []


def _last_phase(run_dir: Path) -> str | None:
    """The phase of a run's latest event (the one with the highest seq), if any."""
    last = max(append.records(run_dir / fmt.EVENTS), key=lambda rec: rec["seq"], default=None)
    return None if last is None else last["phase"]
