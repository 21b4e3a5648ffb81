"""How a W&B script ended, for the W&B shim to end the run the script left unfinished:
the status its exit call gave, or the exception it did not catch.

CPython hands the status a `SystemExit` carries to the C library's `exit()` only after
every atexit hook has run, and calls no Python hook for it (`sys.excepthook` never sees
a SystemExit). So the status is noted where a call gives it: `sys.exit`, the builtins
`exit` and `quit`, and `sys.exit` bound to a name of `__main__` or of the module that
called `init()` before it did (`from sys import exit`). A `raise SystemExit(...)` calls
none of them; a script run as `python script.py` still shows that a SystemExit ended it
(CPython takes `__file__` out of `__main__` when the script ran to its end or raised
anything else), so that case is told apart, though its status is not known.
"""

from __future__ import annotations

import builtins
import functools
import os
import sys
import threading
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any, NoReturn

_NOT_CALLED = object()  # no exit call was noted


@dataclass(frozen=True)
class Ending:
    """How the script ended: `exc`, the exception that ended it (`SystemExit(status)`
    for a noted exit call), None when it ran to its end; `unseen_exit` when a SystemExit
    whose status no hook saw ended it."""

    exc: BaseException | None
    unseen_exit: bool = False


class ExitNotes:
    """The status the main thread's exit calls last gave (another thread's `sys.exit()`
    ends that thread only), noted from `install()` on."""

    def __init__(self) -> None:
        self.status: object = _NOT_CALLED
        main = sys.modules.get("__main__")
        self._main: ModuleType | None = main
        # `python script.py`: the one way to run a script whose `__file__` CPython takes
        # out of __main__ when it ends by anything but a SystemExit (runpy, pdb and
        # coverage run a script in a __main__ of their own, which keeps it)
        self._script = (main is not None and getattr(main, "__spec__", None) is None
                        and "__file__" in vars(main) and _run_as_script(vars(main)["__file__"]))

    def install(self, caller_globals: MutableMapping[str, Any] | None = None) -> None:
        """Note the status of every exit call from now on: wrap `sys.exit`, the builtins
        `exit` and `quit`, and the names in `__main__` and `caller_globals` that hold the
        `sys.exit` there was before (`from sys import exit` ran before this)."""
        original = sys.exit
        noting = self._noting(original)
        sys.exit = noting
        for name in ("exit", "quit"):  # site's: absent under `python -S`
            quitter = getattr(builtins, name, None)
            if callable(quitter):
                setattr(builtins, name, _NotingQuitter(quitter, self._note))
        namespaces: list[MutableMapping[str, Any]] = []
        if self._main is not None:
            namespaces.append(vars(self._main))
        if caller_globals is not None:
            namespaces.append(caller_globals)
        for namespace in namespaces:
            for key, value in list(namespace.items()):
                if value is original:
                    namespace[key] = noting

    def ending(self) -> Ending:
        """How the script ended, read at exit (from an atexit hook)."""
        # the interpreter keeps an uncaught exception (never a SystemExit) as sys.last_value
        exc = getattr(sys, "last_value", None)
        if exc is not None:
            return Ending(exc)
        if sys.modules.get("__main__") is not self._main:
            self._script = False  # another __main__ now: what its __file__ says is not ours
        if self._script and self._main is not None and "__file__" not in vars(self._main):
            return Ending(None)  # it ran to its end: any exit call it made was caught
        if self.status is not _NOT_CALLED:
            return Ending(SystemExit(self.status))
        return Ending(None, unseen_exit=self._script)

    def _note(self, status: object) -> None:
        if threading.current_thread() is threading.main_thread():
            self.status = status

    def _noting(self, exit: Callable[..., NoReturn]) -> Callable[..., NoReturn]:
        # named as the function it wraps (sys.exit), so that it pickles as that name, which
        # holds it from now on
        @functools.wraps(exit)
        def noting_exit(status: object = None) -> NoReturn:
            self._note(status)
            exit(status)

        return noting_exit


def _run_as_script(main_file: object) -> bool:
    """Whether the interpreter was started as `python [options] main_file`: its first
    argument that is no option is the script __main__ runs (not `-m pdb`, `-c`, coverage's
    own script). An option that takes a value (`-X dev`) makes this False: no warning."""
    argv = getattr(sys, "orig_argv", None) or []
    rest = [a for a in argv[1:] if not a.startswith("-")]
    return (isinstance(main_file, str) and bool(rest)
            and os.path.abspath(rest[0]) == os.path.abspath(main_file))


class _NotingQuitter:
    """site's `exit` / `quit`, noting the status it is called with; shown as before."""

    def __init__(self, quitter: Callable[..., Any], note: Callable[[object], None]) -> None:
        self._quitter = quitter
        self._note = note

    def __call__(self, code: object = None) -> Any:
        self._note(code)
        return self._quitter(code)

    def __repr__(self) -> str:
        return repr(self._quitter)
