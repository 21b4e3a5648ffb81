"""The runs of this process that have not finished, and the process-wide hooks that end
them: an uncaught exception or an exit without finish() (atexit and sys.excepthook),
and SIGTERM.

The SIGTERM handler is installed in the main thread while a run is live, and the
handler it replaced comes back when the last run finishes. On SIGTERM every live run
records CANCEL_REQUESTED at once; then, when the replaced handler was Python code (a
framework's own graceful stop), that code runs and decides how the loop stops;
otherwise `StopRequested` (a KeyboardInterrupt) is raised in the main thread, so the
loop unwinds as on Ctrl-C and the run ends CANCELLED. A process that ignores SIGTERM
keeps ignoring it. This module is the SDK's one piece of process-wide state, because
atexit, sys.excepthook and signal handlers are process-wide too.
"""

from __future__ import annotations

import atexit
import os
import signal
import sys
import threading
import traceback
from collections.abc import Callable
from pathlib import Path
from types import FrameType, TracebackType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from runwatch.sdk.run import Run

# What signal.signal() accepts and signal.getsignal() returns (None: set outside Python).
Handler = Callable[[int, FrameType | None], Any] | int | signal.Handlers | None


class StopRequested(KeyboardInterrupt):
    """SIGTERM asked this process to stop: raised in the main thread so the training loop
    unwinds as on Ctrl-C (an `except Exception` does not catch it) and the run ends
    CANCELLED."""


_LIVE_RUNS: set[Run] = set()
_LAST_EXCEPTION: list[BaseException] = []
_EXIT_HOOKS = threading.Event()
_sigterm: dict[str, Handler] = {}  # "previous": the handler ours replaced, while ours is in


def register(run: Run) -> None:
    """Track `run` until it finishes: an uncaught exception, an exit without finish() or
    SIGTERM ends it."""
    _LIVE_RUNS.add(run)
    if not _EXIT_HOOKS.is_set():
        _EXIT_HOOKS.set()
        previous = sys.excepthook

        def hook(t: type[BaseException], e: BaseException, tb: TracebackType | None) -> None:
            _LAST_EXCEPTION.append(e)
            if isinstance(e, StopRequested) and previous is sys.__excepthook__:
                # asked to stop, not a crash: one line, where a traceback of the signal
                # handler's frames would read as an error (a hook of the process's own
                # still gets it whole)
                sys.stderr.write(_stopped_here(tb))
                return
            previous(t, e, tb)

        sys.excepthook = hook
        atexit.register(_finish_live_runs)
    _install_sigterm()


def _stopped_here(tb: TracebackType | None) -> str:
    """What an uncaught StopRequested prints: that the process was asked to stop and its
    run records the stop, and the line of the program (not runwatch's) it stopped at."""
    own = Path(__file__).resolve().parents[1]
    frames = [f for f in traceback.extract_tb(tb)
              if not Path(f.filename).resolve().is_relative_to(own)]
    at = f" at {frames[-1].filename}:{frames[-1].lineno} ({frames[-1].name})" if frames else ""
    return (f"runwatch: SIGTERM asked this process to stop (a cancel, or a stop from "
            f"outside); it stopped{at}, and its run records the stop\n")


def recording(run_dir: Path) -> bool:
    """Whether a live run of this process records the folder `run_dir`."""
    where = run_dir.resolve()
    return any(run.dir.resolve() == where for run in list(_LIVE_RUNS))


def live_runs() -> list[Run]:
    """The runs of this process that have not finished."""
    return list(_LIVE_RUNS)


def unregister(run: Run) -> None:
    """`run` has finished; the last one to finish puts the replaced SIGTERM handler back."""
    _LIVE_RUNS.discard(run)
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
    previous = _sigterm.pop("previous")
    if signal.getsignal(signal.SIGTERM) is _on_sigterm:  # else someone replaced ours: keep it
        signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    previous = _sigterm.get("previous")
    if not _LIVE_RUNS:
        _pass_on(previous, signum, frame)  # no run is recording: as if we were not here
        return
    # A run that is finishing records nothing more, and the process is ending anyway.
    first = [run for run in list(_LIVE_RUNS) if run.request_stop()]
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
    exc = _LAST_EXCEPTION[-1] if _LAST_EXCEPTION else None
    for run in list(_LIVE_RUNS):
        try:
            run.end_unfinished(exc)
        except Exception:
            continue
