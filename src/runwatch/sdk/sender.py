"""The sender: the SDK's background thread that streams a run folder's records to a
runwatch server while the run trains (`runwatch.init(..., server=…)`).

`log()` never waits on the network: the thread tails what the writer wrote, with the
`RunUpload` that `runwatch sync` uses too (`runwatch.sdk.upload`: offsets in the run
folder, batches, refusals, whole files). This module is the thread's life: backoff while
the server cannot be reached (one warning per outage), a stop on a refused token, and the
end of a run, when finish() waits a bounded time for what is left and the run lets its
folder go only once the thread writes nothing more there.
"""

from __future__ import annotations

import os
import shlex
import threading
import time
from collections.abc import Callable
from pathlib import Path

from runwatch.sdk.encode import warn
from runwatch.sdk.sendhttp import ENV_TOKEN as ENV_TOKEN  # runwatch.init reads it here
from runwatch.sdk.sendhttp import (
    Client,
    InFolder,
    NoRun,
    Refused,
    UploadReport,
    url_scheme,
)
from runwatch.sdk.upload import FolderHold, RunUpload, backoff

ENV_SERVER = "RUNWATCH_SERVER"
ENV_PROJECT = "RUNWATCH_PROJECT"
# How long finish() waits for the sender to send what is left: at most this (job control's
# retry waits this plus a margin for a finishing process), shorter by RUNWATCH_FINISH_WAIT_S.
FINISH_WAIT_S = 15.0
ENV_FINISH_WAIT = "RUNWATCH_FINISH_WAIT_S"
# How long finish() then waits for an offsets write under way to end (a stalled disk).
LET_GO_WAIT_S = 1.0
# records a live sender could not send that it names in warnings; past them it says how
# there are more, once (the run folder keeps every record)
PROBLEMS_SAID = 5


def server_url(server: str | None = None) -> str | None:
    """The server to send to: `server`, else RUNWATCH_SERVER; None when neither is set."""
    url = server if server is not None else os.environ.get(ENV_SERVER, "")
    url = url.strip().rstrip("/")
    if not url:
        return None
    if url_scheme(url) is None:
        raise ValueError(f"the server {url!r} is not an http:// or https:// URL; pass the base "
                         "URL `runwatch server` printed, for example http://127.0.0.1:8765")
    return url


def finish_wait_s() -> float:
    """How long finish() waits for the sender's last send: RUNWATCH_FINISH_WAIT_S seconds,
    0 to FINISH_WAIT_S, else FINISH_WAIT_S. ValueError, saying what to set, for a value
    that is no such number (a longer wait would outlast job control's retry wait)."""
    value = os.environ.get(ENV_FINISH_WAIT, "").strip()
    if not value:
        return FINISH_WAIT_S
    try:
        wait = float(value)
    except ValueError:
        wait = -1.0
    if not 0.0 <= wait <= FINISH_WAIT_S:  # NaN too
        raise ValueError(f"{ENV_FINISH_WAIT}={value!r} is not a number of seconds from 0 to "
                         f"{FINISH_WAIT_S:g} (how long finish() waits for the last send to "
                         "the server); set one, or unset it for the default")
    return wait


class Sender:
    """The SDK's background thread: sends a run folder's records as the writer writes them.

    It never raises into the training loop: an unreachable server is tried again with
    backoff (one warning per outage), a refused token stops it with one warning; the
    run folder keeps everything, for `runwatch sync` to send later. Told to stop while the
    writer still writes (finish() gave up on a stalled disk), it stops only after sending
    what the writer wrote last (`written()`). Once finish() has stopped waiting for it, it
    writes nothing more into the folder (FolderHold), and it says when it has let the
    folder go (close()'s `then`).
    """

    def __init__(self, run_dir: Path, server: str, token: str | None,
                 finish_wait: float, interval: float = 0.5) -> None:
        self.run_dir = Path(run_dir)
        self.server = server
        self.finish_wait = finish_wait  # finish_wait_s(), read by runwatch.init
        self.interval = interval
        self._wake = threading.Event()
        self._closing = threading.Event()
        self._written = threading.Event()  # the writer has written its last records
        # a pass begun after close() sent all the folder held, or the thread ended
        self._drained = threading.Event()
        self._abandon = threading.Event()
        self._hold = FolderHold()
        # close()'s `then` while the sender waits for a writer close() stopped waiting for
        self._guard = threading.Lock()
        self._then: Callable[[], None] | None = None
        self._token = token is not None
        self.report = UploadReport()
        self._said = 0  # the report's problems said so far
        self.error: str | None = None
        # made here, in init(): importing the HTTP client in the thread would hold the
        # interpreter while the training loop runs
        self._client = Client(server, token)
        self._moved_to: Path | None = None  # where the run folder was moved (`moved`)
        self._thread = threading.Thread(target=self._loop, name="runwatch-sender", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def moved(self, now: Path) -> None:
        """The run folder was renamed or moved to `now` (the writer writes on there): the
        next pass reads it there, where its sending state moved with it."""
        self._moved_to = now
        self._wake.set()

    @property
    def sync_command(self) -> str:
        """The command that sends what this sender did not, in backquotes (the run folder
        keeps everything)."""
        command = shlex.join(["runwatch", "sync", str(self.run_dir), "--server", self.server])
        return f"`{command}`" + (f" with the run's token in {ENV_TOKEN}" if self._token else "")

    def close(self, wait: float | None = None, then: Callable[[], None] | None = None,
              writing: bool = False) -> None:
        """Send what is left (the writer has written it all), waiting at most `wait`
        seconds (self.finish_wait); what is still unsent then stays in the run
        folder, said in a warning, and the thread writes nothing more there. `then` (the
        run lets its folder go) is called once the thread writes nothing into the folder
        any more: before this returns, or as a write of its offsets that a stalled disk
        holds ends.

        `writing`: the writer still writes (finish() stopped waiting for it). The thread
        then sends on until `written()` and stops after the pass that follows. This waits
        only until what the folder holds now is sent (or `wait` ends) while that has not
        come; written() then waits for the last pass instead (self.finish_wait, in the
        writer's thread), so a disk that never takes the rest costs finish() no more.
        """
        then = then or _nothing
        if not writing:
            self._written.set()
        self._closing.set()
        self._wake.set()
        wait = self.finish_wait if wait is None else wait
        deadline = time.monotonic() + wait
        if writing:
            self._drained.wait(wait)
            with self._guard:
                if not self._written.is_set():
                    self._then = then
                    return
        self._stop(max(0.0, deadline - time.monotonic()), then)

    def written(self) -> None:
        """The writer has written its last records, late (finish() had stopped waiting for
        it): a closing sender sends them and stops. When close() has returned already,
        this waits self.finish_wait for that last pass, then gives up as close()
        does."""
        with self._guard:
            self._written.set()
            then, self._then = self._then, None
        self._wake.set()
        if then is not None:
            self._stop(self.finish_wait, then)

    def _stop(self, wait: float, then: Callable[[], None]) -> None:
        """Wait up to `wait` seconds for the thread's last pass; then leave what is unsent
        to `runwatch sync`, and call `then` once the thread writes nothing into the folder."""
        self._thread.join(wait)
        if not self._thread.is_alive():
            then()
            return
        self._abandon.set()
        self._wake.set()
        let_go = self._hold.let_go(LET_GO_WAIT_S, then)
        warn(f"runwatch: {self.server} has not taken all of {self.run_dir} yet "
             f"({self.error or 'still sending'}); everything is in the run folder: "
             f"{self.sync_command} sends the rest"
             + ("" if let_go else "; the folder stays locked until the sender's write "
                "of its offsets there, which the disk holds, ends or this process exits"))

    def _loop(self) -> None:
        upload = RunUpload(self.run_dir, self._client, self._hold)
        failures = 0
        while not self._abandon.is_set():
            moved = self._moved_to
            if moved is not None and moved != upload.run_dir:
                upload = RunUpload(moved, self._client, self._hold)
                self.run_dir = moved
            closing = self._closing.is_set()
            # the last pass: one that starts once the writer has written everything
            ending = closing and self._written.is_set()
            try:
                upload.send_new(self.report, self._abandon)
                if failures:
                    warn(f"runwatch: {self.server} answers again; sending {self.run_dir}")
                failures, self.error = 0, None
                if closing:
                    self._drained.set()
                if ending:
                    break
                wait = self.interval
            except NoRun as exc:  # removed: the writer makes the folder again, wait for it
                self.error = str(exc)
                if ending:
                    break
                wait = self.interval
            except InFolder:  # the server indexes this run's folder: it has the run
                break
            except Refused as exc:
                self.error = str(exc)
                warn(f"runwatch: stopped sending {self.run_dir}: {exc}. The run is still "
                     "recorded in its folder; `runwatch sync` sends it once this is fixed")
                break
            except Exception as exc:  # Unreachable, or a bug: never into the training loop
                self.error = str(exc)
                if failures == 0:
                    warn(f"runwatch: {exc}; the run is recorded in {self.run_dir} and sent "
                         "when the server answers")
                failures += 1
                wait = backoff(failures)
            self._say_problems()
            self._wake.wait(wait)
            self._wake.clear()
        self._say_problems()
        self._drained.set()
        self._client.close()


    def _say_problems(self) -> None:
        """Warn of what a pass could not send (a line past the run format's cap, a record
        the server refused): the first PROBLEMS_SAID, then how many more there were."""
        problems = self.report.problems
        for problem in problems[self._said:PROBLEMS_SAID]:
            warn(f"runwatch: {problem}")
        if len(problems) > PROBLEMS_SAID and self._said <= PROBLEMS_SAID:
            warn(f"runwatch: more records of {self.run_dir} were not sent to {self.server}; "
                 "the run folder keeps them all")
        self._said = max(self._said, min(len(problems), PROBLEMS_SAID + 1))


def _nothing() -> None:
    """close()'s `then` when the caller gave none."""
