"""`runwatch runs rollouts|hparams|engine-config|wait`: look inside one run."""

from __future__ import annotations

import json
import socket
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Protocol
from urllib.parse import urlsplit

import orjson
import typer
import yaml

from runwatch.analysis.timing import local_clock
from runwatch.analysis.views import run_summary
from runwatch.cli.context import Context, open_context
from runwatch.cli.options import (
    DbOpt,
    DirOpt,
    JqOpt,
    OutOpt,
    RawOpt,
    RunArg,
    ServerOpt,
    TokenOpt,
    resolve_or_exit,
)
from runwatch.cli.output import (
    Output,
    console,
    dumps,
    emit,
    fail,
    fmt_cell,
    line,
    print_table,
    runwatch_command,
    text,
)
from runwatch.cli.remote import UNREACHABLE_HINTS, Patience, Unanswered, remote_for
from runwatch.cli.runs import detail_of
from runwatch.cli.sample_values import with_non_finite
from runwatch.jobs.failures import CATALOGUE
from runwatch.rundir.configtext import ConfigError, load_config
from runwatch.rundir.format import SPLITS, TERMINAL_PHASES
from runwatch.store import queries as q
from runwatch.store.jobs import job_row
from runwatch.store.rollouts import NoRollouts, rollouts
from runwatch.store.runrows import json_or_text

if TYPE_CHECKING:
    from runwatch.cli.remote import Remote

# The widest a prompt or completion is shown in a table; -o json shows it whole.
CELL = 120


def rollouts_cmd(
    run: RunArg, directory: DirOpt = None, db: DbOpt = None, output: OutOpt = Output.table,
    jq: JqOpt = None, raw: RawOpt = False,
    step: Annotated[int | None, typer.Option(help="The step (default: the latest kept).")
                    ] = None,
    split: Annotated[str | None, typer.Option(help="train or val.")] = None,
    best: Annotated[int | None, typer.Option(min=1, help="The N highest scored.")] = None,
    worst: Annotated[int | None, typer.Option(min=1, help="The N lowest scored.")] = None,
    limit: Annotated[int, typer.Option(min=1, help="The first N in scoring order.")] = 20,
    server: ServerOpt = None, token: TokenOpt = None,
) -> None:
    """A step's rollouts: prompt, completion, score and the share of each reward term."""
    if best is not None and worst is not None:
        raise fail("give --best or --worst, not both")
    if split is not None and split not in SPLITS:
        raise fail(f"--split {split!r} is not train or val")
    remote = remote_for(server, token, directory, db)
    if remote is not None:
        found = remote.detail(run)
        name = found["name"]
        data = remote.rollouts(found["run_id"], step, split, best, worst, limit)
    else:
        ctx = open_context(directory, db, read_only=True)
        with ctx.engine.connect() as conn:
            row = resolve_or_exit(conn, run)
            name = row.name
            try:
                data = with_non_finite(rollouts(conn, row.pk, step, split, best, worst, limit),
                                       row.dir)
            except NoRollouts as exc:
                data = {"error": f"{exc} (run {name})",
                        "available": rollouts(conn, row.pk)["available"]}
    if "error" in data:  # no rollouts at the step asked for
        kept = sorted({a["step"] for a in data["available"]})
        raise fail(data["error"],
                   [f"steps kept: {_ranges(kept)}" if kept else "it kept none"])

    def table(wide: bool) -> None:
        c = console()
        if data["step"] is None:
            line("run ", name, " kept no rollouts (export_samples=True keeps them)")
            return
        c.print(f"step {data['step']} ({data['split']}): {len(data['samples'])} of "
                f"{data['total']} rollouts", markup=False)
        rows = []
        for smp in data["samples"]:
            terms = ", ".join(f"{k}={fmt_cell(v)}" for k, v in smp["reward_terms"].items())
            rows.append([smp["index"], _clip(_last_message(smp["prompt"]), wide),
                         _clip(smp["completion"], wide), smp["reward"], terms,
                         smp["advantage"], smp["truncated"]])
        print_table(["#", "PROMPT (last message)", "COMPLETION", "REWARD", "TERMS",
                     "ADVANTAGE", "TRUNCATED"], rows, wide=wide,
                    drop=("TRUNCATED", "ADVANTAGE", "TERMS"),
                    prose=("PROMPT (last message)", "COMPLETION", "TERMS"))

    emit(data, output, jq, table, raw)


def _ranges(steps: list[int]) -> str:
    if len(steps) <= 12:
        return ", ".join(map(str, steps))
    return ", ".join(map(str, steps[:5])) + ", …, " + ", ".join(map(str, steps[-5:]))


def _last_message(prompt: Any) -> str:
    """The last message of a chat prompt (a list of {role, content}), or the prompt text."""
    if isinstance(prompt, list) and prompt and isinstance(prompt[-1], dict):
        return str(prompt[-1].get("content", prompt[-1]))
    return "" if prompt is None else str(prompt)


def _clip(text: Any, wide: bool) -> str:
    s = "" if text is None else str(text)
    s = " ".join(s.split())
    return s if wide or len(s) <= CELL else s[: CELL - 1] + "…"


def _settings(run: str, directory: Path | None, db: str | None, server: str | None,
              token: str | None) -> tuple[str, str | None, Any]:
    """The run's name, its config.yaml's text and its engine_config.json read (None where
    it has none), from a team server (--server, RUNWATCH_SERVER) or the local index."""
    remote = remote_for(server, token, directory, db)
    if remote is not None:
        found = remote.detail(run)
        return (found["name"], found["settings"]["config_text"],
                found["settings"]["engine_config"])
    ctx = open_context(directory, db, read_only=True)
    with ctx.engine.connect() as conn:
        row = resolve_or_exit(conn, run)
    return row.name, row.config, orjson.loads(row.engine_config) if row.engine_config else None


def hparams_cmd(run: RunArg, directory: DirOpt = None, db: DbOpt = None,
                output: OutOpt = Output.table, jq: JqOpt = None, raw: RawOpt = False,
                server: ServerOpt = None, token: TokenOpt = None) -> None:
    """The resolved hyperparameters the run trained with (its config.yaml, defaults applied)."""
    name, config, _ = _settings(run, directory, db, server, token)
    if not config:
        raise fail(f"run {name} has no config.yaml yet",
                   ["it is written when the loop passes config= to runwatch.init"])
    try:
        data = load_config(config)
    except ConfigError as exc:
        raise fail(f"run {name}'s {exc}") from exc
    except yaml.YAMLError as exc:
        raise fail(f"run {name}'s config.yaml is not YAML: {exc}") from exc

    def table(wide: bool) -> None:
        flat = flatten(data) if isinstance(data, dict) else {"config": data}
        print_table(["SETTING", "VALUE"], sorted(flat.items()), wide=wide, prose=("VALUE",))

    emit(data, output, jq, table, raw)


# The engine-config table's words for a setting one side lacks: blank RESOLVED is "as
# asked", so a missing one is said, not left as a dash that reads as "no difference".
NOT_ASKED = "(not asked)"
NOT_RESOLVED = "(not in resolved)"


def engine_config_cmd(run: RunArg, directory: DirOpt = None, db: DbOpt = None,
                      output: OutOpt = Output.table, jq: JqOpt = None, raw: RawOpt = False,
                      server: ServerOpt = None, token: TokenOpt = None) -> None:
    """What the loop asked of its training engine, and what the engine resolved."""
    name, _, data = _settings(run, directory, db, server, token)
    if data is None:
        raise fail(f"run {name} has no engine_config.json yet",
                   ["a loop writes it with run.log_engine_config(requested, resolved)"])

    def table(wide: bool) -> None:
        req = flatten(data.get("requested") or {})
        res = flatten(data.get("resolved") or {})
        keys = sorted(set(req) | (set(res) if wide else set()))
        rows = []
        for k in keys:
            r, v = req.get(k), res.get(k)
            rows.append([k, json.dumps(r) if k in req else NOT_ASKED,
                         "" if k in req and v == r else json.dumps(v) if k in res
                         else NOT_RESOLVED])
        print_table(["SETTING", "REQUESTED", "RESOLVED (if different)"], rows, wide=wide,
                    prose=("REQUESTED", "RESOLVED (if different)"))
        if any(row[2] == NOT_RESOLVED for row in rows):
            line(f"{NOT_RESOLVED}: the engine's resolved config has no setting of that name "
                 "(it may hold it under another: --jq .resolved shows it whole)")
        if not wide:
            line("-o wide adds the settings the engine filled in itself")

    emit(data, output, jq, table, raw)


def flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested mappings as dotted keys ({"optim": {"beta1": 0.9}} is optim.beta1)."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and v:
            out.update(flatten(v, key + "."))
        else:
            out[key] = v
    return out


EXIT_CODES = {"SUCCEEDED": 0, "FAILED": 1, "CANCELLED": 3}
GONE = CATALOGUE["stopped_early"]


def wait_cmd(
    run: RunArg, directory: DirOpt = None, db: DbOpt = None, output: OutOpt = Output.table,
    timeout: Annotated[float | None, typer.Option(help="Stop waiting after this many seconds "
                                                  "(the run goes on).")] = None,
    exit_status: Annotated[bool, typer.Option("--exit-status", help="Exit 0 if the run "
                                              "succeeded, 1 if it failed, 3 if cancelled.")
                           ] = False,
    interval: Annotated[float, typer.Option(min=0.1, help="Seconds between checks.")] = 1.0,
    server: ServerOpt = None, token: TokenOpt = None,
    retry_for: Annotated[float, typer.Option(
        "--retry-for", min=0,
        help="With --server: seconds to keep trying while the server cannot be reached "
             "(each outage, such as a restart).")] = 30.0,
) -> None:
    """Follow a run until it reaches a terminal phase: its current phase, then each change.

    The terminal event carries the failure reason; with -o json the events are one JSON
    object a line, each with the attempt it belongs to, and the whole run record follows
    the terminal one. A job's attempt that
    failed while attempts remain is not the end: the wait says so and follows the attempt
    its worker queues next. A run whose process nothing here can see stop (one that sends
    its records over HTTP from another host) ends only with an end it records: the wait
    says so, and --timeout bounds it. A team server that does not answer (a restart) is
    asked again for up to --retry-for seconds, said on stderr."""
    remote = remote_for(server, token, directory, db)
    start = time.monotonic()
    if remote is None:
        _follow(LocalWatch(open_context(directory, db, read_only=True), run, db), output,
                timeout, exit_status, interval, start)
        return
    remote.patience = Patience(remote.url, retry_for,
                               None if timeout is None else start + timeout)
    try:
        _follow(RemoteWatch(remote, run), output, timeout, exit_status, interval, start)
    except Unanswered as exc:
        if timeout is not None and time.monotonic() - start >= timeout:
            console(stderr=output is Output.json).print(text(
                f"the server at {remote.url} has not answered for {exc.for_s:.0f}s and "
                f"--timeout ({timeout:g}s) has passed; the run goes on"))
            raise typer.Exit(124) from None
        raise fail(f"cannot reach the runwatch server at {remote.url} for "
                   f"{exc.for_s:.0f}s ({exc.why}); the run goes on",
                   [*UNREACHABLE_HINTS, "--retry-for SECONDS waits longer for it"]) from None


def _follow(watch: Watch, output: Output, timeout: float | None, exit_status: bool,
            interval: float, start: float) -> None:
    """wait_cmd's loop: print the run's phase, then each change, until it ends (exit with
    its status), its process is found gone, or `timeout` seconds from `start` pass."""
    seen: int | None = None  # the seq of the last event printed; None before the first look
    # a phase the index holds before any event says so (job control's CANCEL_REQUESTED),
    # shown once: the event that records it later is not shown again
    told: str | None = None
    said: tuple[Any, ...] = ()  # what the last event said
    noted = False  # whether what the wait depends on was said (once, after the first look)
    retold: int | None = None  # the failed attempt said to be maybe queued again
    concluding_said = False
    rechecked = False  # looked again once after the worker let the job go
    while True:
        now, events = watch.look()
        events = _with_attempts(events)
        status = now["status"]
        for ev in _to_show(events, seen, status in TERMINAL_PHASES):
            if ev["phase"] == told:
                told = None  # recorded now, shown before
            elif output is Output.json or _said(ev) != said:
                _print_event(ev, output)  # the table skips a repeat of the line before
            said = _said(ev)
        if events:
            seen = events[-1]["seq"]
        elif seen is None:
            seen = -1
        last = events[-1]["phase"] if events else None
        if status not in TERMINAL_PHASES and status not in (last, told):
            told = status
            _print_event({"ts": time.time(), "phase": told, "attempt": now["attempt"]},
                         output)
        # its worker queues a failed attempt again once its process has gone, and one
        # whose process died before it could record an end (a reaper concludes it
        # stopped_early, then queues it again)
        stopped = now["process_gone"] and status not in TERMINAL_PHASES
        requeue = (status == "FAILED" or stopped) and _may_requeue(events, watch.job(), now)
        if requeue and retold != now["attempt"]:
            retold = now["attempt"]
            gone = watch.holder_gone()
            how = "stopped (its process is gone)" if stopped else "failed"
            console(stderr=output is Output.json).print(text(
                f"attempt {retold} {how} and attempts remain: waiting for its worker to "
                "queue it again" + (f" ({gone})" if gone else "")))
        # a job's worker concludes the attempt once its process has exited: an exit code
        # of its own after the SDK recorded SUCCEEDED fails it then (jobs/failures.py)
        concluding = status == "SUCCEEDED" and _held(watch.job(), now)
        if status == "SUCCEEDED" and concluding_said and not concluding and not rechecked:
            # a look reads the run before its job: one that read the SDK's SUCCEEDED just
            # before the worker indexed the job's end, and the job just after it let the
            # job go, sees neither; the next look has the end (the worker indexes it
            # before it lets go: jobs.reaper.conclude)
            rechecked = concluding = True
        if concluding and not concluding_said:
            concluding_said = True
            console(stderr=output is Output.json).print(text(
                f"{now['name']} recorded SUCCEEDED: waiting for its process to exit and its "
                "worker to conclude the job"))
        if not requeue and not concluding and (status in TERMINAL_PHASES
                                               or now["process_gone"]):
            _end(now, watch, output)
            code = EXIT_CODES.get(status, 1)
            raise typer.Exit(code if exit_status else 0)
        if not noted:
            noted = True
            if status == "QUEUED" and (nobody := watch.no_starter()) is not None:
                console(stderr=output is Output.json).print(text(
                    f"{now['name']} waits in the queue, and {nobody}"))
            if (unseen := watch.unseen_end()) is not None:
                until = (f"until --timeout ({timeout:g}s)" if timeout is not None else
                         "until interrupted; pass --timeout SECONDS to bound the wait")
                console(stderr=output is Output.json).print(text(
                    f"waiting for {now['name']} to record its end (SUCCEEDED, FAILED or "
                    f"CANCELLED): {unseen}, so if it stops without one this waits {until}"))
        if timeout is not None and time.monotonic() - start >= timeout:
            # on stderr with -o json, which keeps stdout to JSON lines
            console(stderr=output is Output.json).print(
                text(f"still {status} after {timeout:g}s; the run goes on"))
            raise typer.Exit(124)
        time.sleep(interval)
        watch.refresh()


def _held(job: dict[str, Any] | None, now: dict[str, Any]) -> bool:
    """Whether a worker still holds the run's job at the attempt the index shows: it has
    not concluded that attempt yet."""
    return (job is not None and job.get("worker_id") is not None
            and job.get("attempt") == now["attempt"])


def _may_requeue(events: list[dict[str, Any]], job: dict[str, Any] | None,
                 now: dict[str, Any]) -> bool:
    """Whether a FAILED run's attempt (or one whose process is gone before it recorded an
    end) may yet be queued again, or just was: a worker still
    holds that attempt of its job (it concludes it once the process has gone, and queues a
    failure that is not a refusal again while attempts remain; docs/jobs.md) and attempts
    remain, or the job has moved on to a later attempt than the index shows (the worker
    requeues it before it indexes the folder). The SDK records the end before its process
    exits, so the index shows FAILED first."""
    if job is None:
        return False
    if int(job.get("attempt") or 1) > int(now["attempt"] or 1):
        return True  # queued again already; the index shows it at its next read
    if not _held(job, now):
        return False
    if int(job.get("attempt") or 1) >= int(job.get("max_attempts") or 1):
        return False
    last = next((ev for ev in reversed(events) if ev["phase"] in TERMINAL_PHASES), None)
    reason = CATALOGUE.get(str(last.get("code"))) if last is not None else None
    return not (reason is not None and reason.refusal)


class Watch(Protocol):
    """Where `runs wait` looks: a local index, or a team server."""

    def job(self) -> dict[str, Any] | None:
        """The run's job (its attempt, max_attempts and holder), None for a hand run."""
        ...

    def look(self) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """The run's list fields, then its lifecycle events oldest first (read after the
        run, so that they hold the event of the phase it is in)."""
        ...

    def detail(self) -> dict[str, Any]:
        """The whole run record."""
        ...

    def refresh(self) -> None:
        """Take in what is new before the next look."""
        ...

    def no_starter(self) -> str | None:
        """When no worker would start the run's queued job: that, and how to start one
        (jobs.control.who_starts); None when one would, or when this cannot tell."""
        ...

    def holder_gone(self) -> str | None:
        """When the worker that holds the run's job is lost or stopped: that, and who ends
        the attempt then; None while it lives, or when this cannot tell."""
        ...

    def unseen_end(self) -> str | None:
        """Why nothing may see the run's process stop without recording an end, or None
        (see `_unseen_end`)."""
        ...


class LocalWatch:
    def __init__(self, ctx: Context, ref: str, db: str | None = None) -> None:
        self.ctx = ctx
        self.db = db  # the --db given, which the commands it prints name
        with ctx.engine.connect() as conn:
            row = resolve_or_exit(conn, ref)
        self.pk, self.run_id = row.pk, row.run_id

    def look(self) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        row, gone = self.ctx.current_run(self.run_id)
        with self.ctx.engine.connect() as conn:
            return run_summary(row, gone=gone), q.events(conn, self.pk)

    def detail(self) -> dict[str, Any]:
        row, gone = self.ctx.current_run(self.run_id)
        with self.ctx.engine.connect() as conn:
            return detail_of(conn, row, self.ctx.directory, gone, self.db)

    def job(self) -> dict[str, Any] | None:
        with self.ctx.engine.connect() as conn:
            return job_row(conn, self.pk)

    def refresh(self) -> None:
        self.ctx.refresh()

    def no_starter(self) -> str | None:
        from runwatch.jobs.control import queued_waits

        row, _ = self.ctx.current_run(self.run_id)
        with self.ctx.engine.connect() as conn:
            return queued_waits(conn, job_row(conn, self.pk), row.status, row.dir,
                                time.time(), lambda *w: runwatch_command(*w, db=self.db))

    def holder_gone(self) -> str | None:
        from runwatch.analysis.workers import worker_status
        from runwatch.store.jobs import list_workers

        with self.ctx.engine.connect() as conn:
            job = job_row(conn, self.pk)
            holder = None if job is None else job["worker_id"]
            worker = next((w for w in list_workers(conn) if w["id"] == holder), None)
        return _holder_gone(holder, None if worker is None
                            else worker_status(worker, time.time()))

    def unseen_end(self) -> str | None:
        row, _ = self.ctx.current_run(self.run_id)
        with self.ctx.engine.connect() as conn:
            job = job_row(conn, self.pk) is not None
        return _unseen_end(json_or_text(row.manifest), job, here=True)


class RemoteWatch:
    def __init__(self, remote: Remote, ref: str) -> None:
        self.remote = remote
        self.first = remote.detail(ref)
        self.run_id = self.first["run_id"]

    def look(self) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        return self.remote.summary(self.run_id), self.remote.events(self.run_id)

    def detail(self) -> dict[str, Any]:
        return self.remote.detail(self.run_id)

    def job(self) -> dict[str, Any] | None:
        job: dict[str, Any] | None = self.remote.detail(self.run_id)["job"]
        return job

    def refresh(self) -> None:
        pass  # the server indexes by itself

    def no_starter(self) -> str | None:
        job = self.job()
        return None if job is None else job.get("waits_for")  # the server's judgement

    def holder_gone(self) -> str | None:
        job = self.job()
        holder = None if job is None else job.get("worker_id")
        if holder is None:
            return None
        worker = next((w for w in self.remote.workers().get("workers", [])
                       if w.get("id") == holder), None)  # the server judges its status
        return _holder_gone(holder, None if worker is None else worker.get("status"))

    def unseen_end(self) -> str | None:
        # a server on this host (a loopback URL) judges as a local index does
        here = urlsplit(self.remote.url).hostname in ("127.0.0.1", "localhost", "::1")
        return _unseen_end(self.first["manifest"], self.first["job"] is not None, here)


def _holder_gone(holder: str | None, status: str | None) -> str | None:
    """What the wait says of the holder of a failed attempt whose worker is stopped or
    lost (analysis.workers.worker_status); None while it runs, or when unknown."""
    if holder is None or status not in ("stopped", "lost"):
        return None
    return (f"its worker {holder} is no longer running: a live worker's reaper queues it "
            "again; with none running, this waits until --timeout")


def _unseen_end(manifest: Any, job: bool, here: bool) -> str | None:
    """Why nothing may see the run's process stop without recording an end, when it may:
    then only the end it records (or --timeout) ends the wait. None for a job (its worker
    sees the attempt end) and for a process on the host that judges it (`here`: the judge
    runs on this host; else the server's host, which a client cannot name)."""
    if job:
        return None
    pid = manifest.get("pid") if isinstance(manifest, dict) else None
    host = manifest.get("host") if isinstance(manifest, dict) else None
    if type(pid) is not int or not isinstance(host, str) or not host:
        return "its manifest names no process to watch (no pid and host)"
    if not here:
        return f"only a server on {host}, where its process runs, sees that process stop"
    return None if host == socket.gethostname() else f"its process runs on {host}, not here"


def _with_attempts(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A run's events (all of them, oldest first), each with the attempt it belongs to: job
    control's events name theirs, and one its process recorded (the SDK's, which names
    none) belongs to the attempt the last event before it named (1 before any, as a run
    started by hand is at attempt 1)."""
    attempt = 1
    out = []
    for ev in events:
        if ev.get("attempt") is None:
            ev = {**ev, "attempt": attempt}
        attempt = ev["attempt"]
        out.append(ev)
    return out


def _said(ev: dict[str, Any]) -> tuple[Any, ...]:
    """What an event says, apart from when (the worker's and the SDK's PREPARING say the
    same)."""
    return tuple(ev.get(k) for k in ("phase", "stage", "done", "total", "reason", "code"))


def _to_show(events: list[dict[str, Any]], seen: int | None, ended: bool
             ) -> list[dict[str, Any]]:
    """The events to print: on the first look only the current phase (on an ended run its
    terminal event), never the history again; after that each new event."""
    if seen is not None:
        return [ev for ev in events if ev["seq"] > seen]
    if ended:
        last = next((ev for ev in reversed(events) if ev["phase"] in TERMINAL_PHASES), None)
        return [last] if last else events[-1:]
    return events[-1:]


def _end(now: dict[str, Any], watch: Watch, output: Output) -> None:
    """After the terminal event: the run record (json), or what to do about a failure.

    A run whose process is gone without recording an end ends with the run detail's
    verdict on it (analysis.detail.unrecorded_end: a run started by hand stopped before
    it finished); a job whose worker has yet to record how its attempt ended, with the
    same sentence. With -o json that is the stream's terminal event, in the phase the
    verdict ends a run in and marked `"recorded": false`: the run's own record still
    holds the phase it was in."""
    gone = now["status"] not in TERMINAL_PHASES
    detail = watch.detail() if output is Output.json or now["status"] != "SUCCEEDED" else {}
    failure: dict[str, Any] | None = detail.get("failure")
    if gone:
        verdict = failure if failure and failure.get("code") in CATALOGUE else {
            "code": GONE.id, "reason": GONE.sentence, "what_to_do": GONE.what_to_do}
        failure = verdict
    if output is Output.json:
        if gone:  # no process will record an end: say so as the terminal event
            _print_event({"ts": time.time(), "phase": CATALOGUE[verdict["code"]].phase,
                          "recorded": False, "process_gone": True, "attempt": now["attempt"],
                          "reason": verdict["reason"], "code": verdict["code"]}, output)
        sys.stdout.write(dumps(detail) + "\n")
        return
    if gone:
        line("the training process is gone: ", verdict["reason"])
    code = failure["code"] if failure else now["reason_code"]
    if code in CATALOGUE and now["status"] != "SUCCEEDED":
        # the run detail's advice: a run started by hand is not told to retry
        line("what to do: ", failure["what_to_do"] if failure and failure.get("what_to_do")
             else CATALOGUE[code].what_to_do)


def _print_event(ev: dict[str, Any], output: Output) -> None:
    if output is Output.json:
        sys.stdout.write(dumps(ev) + "\n")
        sys.stdout.flush()
        return
    stamp = local_clock(ev["ts"])
    parts = [stamp, "  ", ev["phase"]]
    if ev.get("attempt") and ev["attempt"] > 1:
        parts.append(f" (attempt {ev['attempt']})")
    if ev.get("stage"):
        parts += ["  ", ev["stage"]]
        if ev.get("total") is not None:
            parts.append(f" {ev.get('done') or 0}/{ev['total']}")
    if ev.get("reason"):
        parts += ["  ", ev["reason"]]
    if ev.get("code"):
        parts.append(f" [{ev['code']}]")
    line(*parts)
