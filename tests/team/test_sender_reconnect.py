"""The sender takes a kept-alive connection closed under its request for what it is, not an
outage (runwatch.sdk.sendhttp.Client).

A server, or a proxy before it, that closes an idle connection at about the moment the
client's pool sends the next request on it (both sides' keep-alive near 5 s: a runwatch
server before 1fa48fc, a training step of ~5 s between two sends) loses that request
unanswered. The sender used to call that "cannot reach" and back off; it now sends the
request once more at once on a new connection (the server's ingest is idempotent). Here
a proxy before the real server answers the first request of each connection and closes
the connection, unanswered, when the second comes.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

import runwatch
from runwatch.sdk.sendhttp import Client
from runwatch.sdk.upload import sync_run
from runwatch.server.runner import Runner
from tests.team.serving import in_folder, stored


def read_message(sock: socket.socket, data: bytes) -> tuple[bytes, bytes] | None:
    """One HTTP/1.1 message with a Content-Length off `sock` (`data`: what was read past
    the last one): (message, what follows it), or None when the peer closed first."""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            return None
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                   if line.lower().startswith(b"content-length:")), 0)
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            return None
        body += chunk
    return head + b"\r\n\r\n" + body[:length], body[length:]


class ClosesOnSecondRequest:
    """A proxy to the server at `upstream` that forwards the first request of each client
    connection and closes the connection, unanswered, when a second request comes on it."""

    def __init__(self, upstream: int) -> None:
        self.upstream = upstream
        self.dropped = 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            first = read_message(conn, b"")
            if first is None:
                return
            with socket.create_connection(("127.0.0.1", self.upstream)) as up:
                up.sendall(first[0])
                answer = read_message(up, b"")
            assert answer is not None
            conn.sendall(answer[0])
            if read_message(conn, first[1]) is not None:
                self.dropped += 1

    def close(self) -> None:
        self.listener.close()


@pytest.fixture
def proxy(engine: Engine) -> Iterator[ClosesOnSecondRequest]:
    with Runner(engine, port=0, prewarm=False, save_series=False, warm=False) as server:
        proxy = ClosesOnSecondRequest(server.port)
        yield proxy
        proxy.close()


def test_a_request_whose_kept_alive_connection_closed_under_it_is_sent_again(
        tmp_path: Path, engine: Engine, proxy: ClosesOnSecondRequest) -> None:
    ids = {}
    for name in ("a", "b"):
        with runwatch.init("team", name=name, dir=tmp_path / "runs") as run:
            run.log({"loss": 1.0}, step=0)
            ids[name] = run.id
    client = Client(proxy.url)
    try:
        for name in ids:  # one client: the second request goes out on the first connection
            sync_run(tmp_path / "runs" / name, client, retry_for=0)
    finally:
        client.close()
    assert proxy.dropped >= 1
    for name, run_id in ids.items():
        assert stored(engine, run_id) == in_folder(tmp_path / "runs" / name)
