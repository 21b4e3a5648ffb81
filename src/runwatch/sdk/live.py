"""The runs of this process that have not finished, and the process-wide hooks that end
them: an uncaught exception or an exit without finish() (atexit, sys.excepthook and
threading.excepthook), and SIGTERM; and what a forked child makes of them.

An uncaught exception in another thread ends a run that thread started as one in the
main thread does (its loop is gone); every other live run logs it as an error line, with
its traceback, and takes it as its reason should the process leave it unfinished.

A process forked from one that records runs (a DataLoader or Pool worker, `os.fork()`)
records none of them: in the child each becomes an `InheritedRun`, which records and ends
nothing, the exit hooks know no run, and SIGTERM does what it did before runwatch. The
run, its writer and its lock stay the parent's (sdk/lock.py closes the child's copy of
the lock).

The SIGTERM handler is installed in the main thread while a run is live, and the
handler it replaced comes back when the last run finishes. On SIGTERM every live run
records CANCEL_REQUESTED at once; then, when the replaced handler was Python code (a
framework's own graceful stop), that code runs and decides how the loop stops;
otherwise `StopRequested` (a KeyboardInterrupt) is raised in the main thread, so the
loop unwinds as on Ctrl-C and the run ends CANCELLED; left uncaught, it ends the process
by SIGTERM once the interpreter has exited. A process that ignores SIGTERM
keeps ignoring it. This module is the SDK's one piece of process-wide state (with the
locks sdk/lock.py holds), because atexit, the exception hooks, signal handlers and fork
are process-wide too.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import sys
import threading
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import FrameType, TracebackType
from typing import TYPE_CHECKING, Any

from runwatch.sdk.null import NullRun

if TYPE_CHECKING:
    from runwatch.sdk.run import Run

# What signal.signal() accepts and signal.getsignal() returns (None: set outside Python).
Handler = Callable[[int, FrameType | None], Any] | int | signal.Handlers | None


class StopRequested(KeyboardInterrupt):
    """SIGTERM asked this process to stop: raised in the main thread so the training loop
    unwinds as on Ctrl-C (an `except Exception` does not catch it) and the run ends
    CANCELLED."""


@dataclass
class _Live:
    """What the hooks know of a live run."""

    thread: threading.Thread  # the thread that started it: its loop's, as a rule
    pid: int  # the process that records it
    thread_exc: BaseException | None = None  # the last exception another thread died of


_LIVE_RUNS: dict[Run, _Live] = {}
_LAST_EXCEPTION: list[BaseException] = []
_EXIT_HOOKS = threading.Event()
_sigterm: dict[str, Handler] = {}  # "previous": the handler ours replaced, while ours is in
_forking = threading.local()  # .held: this thread's os.fork() blocked SIGTERM (_hold_sigterm)


def register(run: Run) -> None:
    """Track `run` until it finishes: an uncaught exception, an exit without finish() or
    SIGTERM ends it."""
    _LIVE_RUNS[run] = _Live(threading.current_thread(), os.getpid())
    if not _EXIT_HOOKS.is_set():
        _EXIT_HOOKS.set()
        previous = sys.excepthook

        def hook(t: type[BaseException], e: BaseException, tb: TracebackType | None) -> None:
            if not hasattr(sys, "ps1"):
                # at an interactive prompt (`python -i`) the error of a line typed there
                # is shown and the session goes on: it ends no run
                _LAST_EXCEPTION.append(e)
            if isinstance(e, StopRequested):
                _end_by_sigterm()  # the loop did not catch the stop: the process is stopped
                if previous is sys.__excepthook__:
                    # asked to stop, not a crash: one line, where a traceback of the signal
                    # handler's frames would read as an error (a hook of the process's own
                    # still gets it whole)
                    sys.stderr.write(_stopped_here(tb))
                    return
            previous(t, e, tb)

        sys.excepthook = hook
        previous_in_thread = threading.excepthook

        def thread_hook(args: threading.ExceptHookArgs) -> None:
            try:
                previous_in_thread(args)  # the traceback on stderr, as without runwatch
            finally:
                _thread_died(args.exc_value, args.thread)

        threading.excepthook = thread_hook
        atexit.register(_finish_live_runs)
        os.register_at_fork(before=_hold_sigterm, after_in_parent=_let_sigterm_in,
                            after_in_child=_forget_in_child)
    _install_sigterm()


def _thread_died(exc: BaseException | None, thread: threading.Thread | None) -> None:
    """A thread ended by an uncaught exception `exc`: a run that thread started ends as
    the main thread's exception would end it; every other live run logs it (an error
    line with its traceback) and keeps it as the reason to end with, should the process
    leave the run unfinished."""
    if exc is None or isinstance(exc, SystemExit):
        return  # a thread's sys.exit() ends that thread only, and quietly
    for run, live in list(_LIVE_RUNS.items()):
        try:
            if live.thread is thread:
                run.fail_from(exc)
            else:
                live.thread_exc = exc
                _log_thread_exception(run, exc, thread)
        except Exception:
            continue  # a run that finished meanwhile, or a hook that must not fail


def _log_thread_exception(run: Run, exc: BaseException, thread: threading.Thread | None) -> None:
    from runwatch.sdk.run import exception_data  # (run.py imports this module)

    data = exception_data(exc)
    said = " ".join(data["message"].split())[:300]
    name = f"thread {thread.name!r}" if thread is not None else "a thread"
    run.log_text(f"{name} raised {data['exception']}{': ' + said if said else ''}, which "
                 "ended that thread; the run goes on", level="error", data=data)


def _stopped_here(tb: TracebackType | None) -> str:
    """What an uncaught StopRequested prints: that the process was asked to stop and its
    run records the stop, and the line of the program (not runwatch's) it stopped at."""
    own = Path(__file__).resolve().parents[1]
    frames = [f for f in traceback.extract_tb(tb)
              if not Path(f.filename).resolve().is_relative_to(own)]
    at = f" at {frames[-1].filename}:{frames[-1].lineno} ({frames[-1].name})" if frames else ""
    return (f"runwatch: SIGTERM asked this process to stop (a cancel, or a stop from "
            f"outside); it stopped{at}, and its run records the stop\n")


# The audit event of the interpreter's last clean-up (a documented CPython event): after
# the atexit functions (the runs' ends among them), the modules' teardown and the last
# flush of stdout and stderr, once Python has put back the default action of SIGTERM.
LAST_EVENT = "cpython.PyInterpreterState_Clear"


def _end_by_sigterm() -> None:
    """Have this process end, once the interpreter has done all it does at exit, killed
    by SIGTERM (exit status 143 in a shell, -15 to subprocess), as Python ends by SIGINT
    after Ctrl-C's uncaught KeyboardInterrupt: a job runner, a scheduler or `timeout`
    reads a stop, where exit status 1 (an uncaught StopRequested) reads as a failure. An
    interactive interpreter goes on, as after Ctrl-C."""
    if sys.flags.interactive or hasattr(sys, "ps1"):
        return

    # Run when the modules' globals are gone: the hook uses only what it holds itself.
    def at_last(event: str, args: tuple[Any, ...], last: str = LAST_EVENT,
                kill: Callable[[int, int], None] = os.kill,
                getpid: Callable[[], int] = os.getpid,
                sigterm: int = int(signal.SIGTERM)) -> None:
        if event == last:
            kill(getpid(), sigterm)

    sys.addaudithook(at_last)


def ending_exception() -> BaseException | None:
    """The uncaught exception that ends this process, as the SDK's `sys.excepthook` saw it
    (the last one), or None: at exit, None for a clean exit or `sys.exit()`. An error a
    notebook's cell or an interactive prompt showed is none: IPython shows a cell's error
    without `sys.excepthook`, and the kernel goes on. A compat module ending a run at exit
    reads it (runwatch.compat.hf), as the SDK's exit hook does."""
    return _LAST_EXCEPTION[-1] if _LAST_EXCEPTION else None


def recording(run_dir: Path) -> bool:
    """Whether a live run of this process records the folder `run_dir`."""
    where = run_dir.resolve()
    return any(run.dir.resolve() == where for run in list(_LIVE_RUNS))


def live_runs() -> list[Run]:
    """The runs of this process that have not finished."""
    return list(_LIVE_RUNS)


def unregister(run: Run) -> None:
    """`run` has finished; the last one to finish puts the replaced SIGTERM handler back."""
    _LIVE_RUNS.pop(run, None)
    if not _LIVE_RUNS:
        _restore_sigterm()


def _on_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _install_sigterm() -> None:
    if "previous" in _sigterm or not _on_main_thread():
        return  # already ours, or only the main thread may set a handler
    current = signal.getsignal(signal.SIGTERM)
    if current == signal.SIG_IGN:
        return  # the process chose to ignore SIGTERM; so do we
    signal.signal(signal.SIGTERM, _on_sigterm)
    _sigterm["previous"] = current


def _restore_sigterm() -> None:
    if "previous" not in _sigterm or not _on_main_thread():
        return  # off the main thread ours stays, and passes SIGTERM on (see _on_sigterm)
    previous = _sigterm["previous"]
    if signal.getsignal(signal.SIGTERM) is _on_sigterm:  # else someone replaced ours: keep it
        signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)
    # forgotten only now: signal.signal() first runs ours for a SIGTERM that came
    # meanwhile, which passes it on to `previous`
    del _sigterm["previous"]


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    previous = _sigterm.get("previous")
    # (a child forked a moment ago, whose at-fork hook has not run yet, has its parent's)
    ours = [run for run, live in list(_LIVE_RUNS.items()) if live.pid == os.getpid()]
    if not ours:
        _pass_on(previous, signum, frame)  # no run is recording: as if we were not here
        return
    # A run that is finishing records nothing more, and the process is ending anyway.
    first = [run for run in ours if run.request_stop()]
    if callable(previous):
        previous(signum, frame)  # the loop's framework stops it its own way
    elif first:
        raise StopRequested("SIGTERM: runwatch records the run as CANCELLED")


def _pass_on(previous: Handler, signum: int, frame: FrameType | None) -> None:
    """Do what the handler ours replaced would have done with this signal."""
    if callable(previous):
        previous(signum, frame)
    elif previous != signal.SIG_IGN:
        signal.signal(signum, signal.SIG_DFL)  # the default: end the process by it
        os.kill(os.getpid(), signum)


def _finish_live_runs() -> None:
    exc = ending_exception()
    for run, live in list(_LIVE_RUNS.items()):
        try:
            run.end_unfinished(exc if exc is not None else live.thread_exc)
        except Exception:
            continue


def _forget_in_child() -> None:
    """In a process just forked from this one: the live runs are the parent's. Forget
    them, so that the child's exit ends none of them; make each an InheritedRun, so that
    what the child calls on it records nothing (its writer's thread is not in the child,
    and its queue and files are the parent's); and let SIGTERM do what it did before
    runwatch (Pool.terminate() stops its workers with it)."""
    inherited = list(_LIVE_RUNS)
    _LIVE_RUNS.clear()
    _LAST_EXCEPTION.clear()
    for run in inherited:
        # the same object, which the child's code holds: only its methods change
        run.__class__ = InheritedRun  # type: ignore[assignment]
    # where it cannot be put back, ours stays, and passes SIGTERM on (no run is live)
    with contextlib.suppress(ValueError, OSError):
        _restore_sigterm()
    _let_sigterm_in()


def _hold_sigterm() -> None:
    """Before os.fork() while ours is the handler: block SIGTERM in the forking thread
    until the child has put back the handler ours replaced. One that came before would
    meet ours there, or be lost as the interpreter readies itself in the child, where
    without runwatch it ends the child. Delivered once unblocked, in either process."""
    if "previous" in _sigterm:
        held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
        _forking.held = signal.SIGTERM not in held


def _let_sigterm_in() -> None:
    if getattr(_forking, "held", False):
        _forking.held = False
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})


class InheritedRun(NullRun):
    """A run as a process forked from the one recording it sees it: the parent records
    and ends it, so here it records nothing and ends nothing. Its first record warns,
    once, that a process records a run of its own with runwatch.init()."""

    _told = False

    def log(self, metrics: dict[str, Any], step: int | None = None) -> None:
        self._not_recorded("log")

    def log_samples(self, step: int, samples: list[dict[str, Any]], split: str = "train",
                    kind: str = "completions") -> None:
        self._not_recorded("log_samples")

    def log_checkpoint(self, step: int, kind: str, id: str,
                       path: str | os.PathLike[str] | None = None, **meta: Any) -> None:
        self._not_recorded("log_checkpoint")

    def set_phase(self, phase: str, stage: str | None = None, done: int | None = None,
                  total: int | None = None, reason: str | None = None) -> None:
        self._not_recorded("set_phase")

    def log_text(self, message: str, level: str = "info", data: Any = None) -> None:
        self._not_recorded("log_text")

    def log_engine_config(self, requested: dict[str, Any], resolved: dict[str, Any]) -> None:
        self._not_recorded("log_engine_config")

    def set_manifest_fields(self, **fields: Any) -> None:
        self._not_recorded("set_manifest_fields")

    def finish(self, status: str | None = None, reason: str | None = None,
               code: str | None = None) -> None:
        return None  # the parent ends the run (a child's `with` block, sys.exit(), its end)

    def _not_recorded(self, call: str) -> None:
        if self._told:
            return
        self._told = True
        recorder = self.manifest.get("pid", "the one that started it")
        message = (f"runwatch: {call}() records nothing: run {self.name!r} is recorded by "
                   f"process {recorder}, and this process ({os.getpid()}) was forked from "
                   "it; call runwatch.init() here to record a run of its own, or send what "
                   "to record to that process (a multiprocessing queue)")
        try:
            warnings.warn(message, RuntimeWarning, stacklevel=3)
        except Exception:  # warnings made errors must not end the worker
            print(message, file=sys.stderr)
