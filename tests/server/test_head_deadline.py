"""A connection that does not deliver a request's head in time is closed (server/deadline.py).

A security trial (session 35) held 300 connections open for as long as it liked before
any token was checked: ones that sent nothing, and ones that sent their headers a byte
every 20 seconds. A live stream, which is a request being answered, must not be cut.
"""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from runwatch.server.runner import Runner
from runwatch.store import open_engine
from tests.support import http

HEAD_S = 1.0
# far past the deadline: a server that does not close waits this long, and the test fails
PATIENCE_S = 20.0


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Runner]:
    engine = open_engine(tmp_path / "index.db")
    runs = tmp_path / "runs"
    runs.mkdir()
    try:
        with Runner(engine, runs_dir=runs, port=0, prewarm=False, save_series=False,
                    warm=False, head_timeout_s=HEAD_S) as runner:
            yield runner
    finally:
        engine.dispose()


def _connect(runner: Runner) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", runner.port))
    sock.settimeout(PATIENCE_S)
    return sock


def _closed_by_server(sock: socket.socket) -> bool:
    """Whether the server closed the connection (rather than the wait running out)."""
    try:
        while True:
            data = sock.recv(4096)
            if not data:
                return True
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True


def test_a_connection_that_sends_nothing_is_closed(server: Runner) -> None:
    with _connect(server) as sock:
        assert _closed_by_server(sock)


def test_a_head_sent_a_byte_at_a_time_is_closed(server: Runner) -> None:
    # each byte within the deadline, the head as a whole past it
    head = b"GET /api/projects HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 200
    with _connect(server) as sock:
        closed = False
        for byte in head:
            try:
                sock.sendall(bytes([byte]))
            except (BrokenPipeError, ConnectionResetError):
                closed = True
                break
            time.sleep(HEAD_S / 4)
        assert closed or _closed_by_server(sock)


def test_requests_and_a_live_stream_are_answered(server: Runner) -> None:
    assert http.get(f"{server.url}/api/projects").status_code == 200
    # a stream of the run list, held open past the deadline, is not cut
    with _connect(server) as sock:
        sock.sendall(b"GET /api/stream/runs HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        first = sock.recv(4096)
        assert first.startswith(b"HTTP/1.1 200"), first[:200]
        time.sleep(HEAD_S * 2.5)
        sock.settimeout(0.5)
        with contextlib.suppress(TimeoutError):  # nothing to say yet, and still open
            assert sock.recv(4096) != b""  # more of the stream, not a closed connection
        sock.sendall(b"")  # still writable
    # a keep-alive connection serves a second request after a pause past the deadline
    with _connect(server) as sock:
        request = b"GET /api/projects HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
        sock.sendall(request)
        assert _response(sock).startswith(b"HTTP/1.1 200")
        time.sleep(HEAD_S * 1.5)
        sock.sendall(request)
        assert _response(sock).startswith(b"HTTP/1.1 200")


def _response(sock: socket.socket) -> bytes:
    """One whole response with a Content-Length (its head and body may come apart)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, "closed before the response's head"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(int(v) for k, _, v in (h.partition(b":") for h in head.split(b"\r\n")[1:])
                  if k.strip().lower() == b"content-length")
    while len(body) < length:
        chunk = sock.recv(65536)
        assert chunk, "closed before the response's body"
        body += chunk
    return head + b"\r\n\r\n" + body
