"""The remote CLI (`--server`) asks a read again, once, when the kept-alive connection it
went out on was closed under it; a write is never sent twice (a retry or a cancel sent
again could act twice)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import typer
from sqlalchemy import Engine

from runwatch.cli.remote import Remote
from runwatch.server.runner import Runner
from tests.team.test_sender_reconnect import ClosesOnSecondRequest


@pytest.fixture
def proxy(tmp_path: Path) -> Iterator[ClosesOnSecondRequest]:
    from runwatch.store import open_engine

    engine: Engine = open_engine(tmp_path / "index.db")
    try:
        with Runner(engine, port=0, prewarm=False, save_series=False, warm=False) as server:
            proxy = ClosesOnSecondRequest(server.port)
            yield proxy
            proxy.close()
    finally:
        engine.dispose()


def test_a_read_is_asked_again_and_a_write_is_not(proxy: ClosesOnSecondRequest,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    remote = Remote(proxy.url, None, "none")
    first = remote.request("GET", "/api/runs")
    # the second read goes out on the first connection, which the proxy closes unanswered
    assert remote.request("GET", "/api/runs") == first
    assert proxy.dropped == 1
    # the retry was its new connection's first request; a write on it now is lost
    with pytest.raises(typer.Exit) as refused:
        remote.request("POST", "/api/runs/nothing/cancel")
    assert refused.value.exit_code == 2
    assert "cannot reach the runwatch server" in capsys.readouterr().err
    assert proxy.dropped == 2
