"""What a thread of this process is doing now, read from its stack (for tests that must
act while a thread waits at a known place)."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import Any


def runs_in(thread: threading.Thread, function: Callable[..., Any]) -> bool:
    """Whether `thread` is inside `function` now (anywhere down its stack)."""
    frame = sys._current_frames().get(thread.ident or 0)
    while frame is not None:
        if frame.f_code is function.__code__:
            return True
        frame = frame.f_back
    return False
