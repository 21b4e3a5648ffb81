"""The server builds every route before it listens, so no request swaps the process's
warning handlers.

FastAPI builds an included router's routes at the first request that reaches it, and each
build enters `warnings.catch_warnings`, which replaces the process's warning filters and
handler and later puts back what it found. It is not thread-safe: in the server's thread,
that lost a warning the SDK raised meanwhile in another thread of the same process
(tests/team/test_late_writer_sent.py failed about one run in six under load: pytest.warns
saw nothing while the warning went to the outer handler).
"""

from __future__ import annotations

import re
import threading
import warnings
from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import Engine

from runwatch.server.app import create_app
from runwatch.server.runner import Runner
from tests.support.http import get, post


def test_no_request_swaps_the_warning_handlers(
        server: Runner, engine: Engine, make_run: Callable[..., str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    run_id = make_run("built", steps=5)
    # every GET path the API documents (read from an app made here, in this thread)
    paths = [p for p, ops in create_app(engine).openapi()["paths"].items() if "get" in ops]
    assert len(paths) >= 20
    swaps: list[str] = []
    enter = warnings.catch_warnings.__enter__

    def counted(self: warnings.catch_warnings) -> Any:
        if threading.current_thread() is not threading.main_thread():
            swaps.append(threading.current_thread().name)
        return enter(self)

    monkeypatch.setattr(warnings.catch_warnings, "__enter__", counted)
    answered = set()
    for path in paths:
        if "stream" in path:
            continue  # a live stream never ends; its route is built with the rest
        url = server.url + re.sub(r"\{run\}", run_id, path)
        answered.add(get(re.sub(r"\{[^}]+\}", "x", url)).status_code)
    answered.add(post(server.url + "/api/ingest", content=b"{}").status_code)
    answered.add(get(server.url + "/no/such/page/anywhere").status_code)
    assert 200 in answered
    assert swaps == [], f"{len(swaps)} warning-handler swaps in the server's threads"
