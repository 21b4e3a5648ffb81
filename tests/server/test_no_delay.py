"""The server's connections send without Nagle's algorithm (TCP_NODELAY).

Found in a trial (session 36): every answer after the first on a kept-open connection (a
browser's, httpx's) took about 44 ms where a new connection's took 1: the listening
socket was made with protocol 0, and asyncio turns Nagle's algorithm off only on the
connections of a socket whose protocol is IPPROTO_TCP, so each answer waited for the
client's delayed ACK. The test reads the option on the server's own end of a real
connection (uvicorn's connections, in the server's own state)."""

from __future__ import annotations

import socket

import httpx

from runwatch.server.runner import Runner


def test_a_kept_open_connection_has_nagles_algorithm_off(server: Runner) -> None:
    assert server._server is not None
    with httpx.Client() as client:
        for _ in range(3):  # kept open: the same connection each time
            assert client.get(f"{server.url}/api/projects").status_code == 200
        connections = list(server._server.server_state.connections)
        assert connections, "the client's connection is open on the server"
        for conn in connections:
            sock = conn.transport.get_extra_info("socket")
            assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
