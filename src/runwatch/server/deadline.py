"""A deadline for a request's head: uvicorn's HTTP/1.1 protocol with a connection closed
when it has not delivered a whole request line and headers in time.

uvicorn closes an idle keep-alive connection after a response (`timeout_keep_alive`), but
nothing bounds a connection before its first request, and any byte cancels the keep-alive
timer: a client that connects and sends nothing, or sends its headers a byte every 20
seconds ("slowloris"), held its socket and its task for as long as it liked, before any
token was checked. Here each connection has until `head_timeout_s` after it opens, and
until `timeout_keep_alive` + `head_timeout_s` after each response, to deliver the next
request's head; a request being answered (a live stream included) is never cut.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.config import Config
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.server import ServerState

# A browser or the SDK sends its request head in one write, milliseconds after it connects.
HEAD_TIMEOUT_S = 20.0


class HeadDeadline(H11Protocol):
    """H11Protocol with the head deadline. Built by uvicorn for each connection."""

    head_timeout_s = HEAD_TIMEOUT_S

    def __init__(self, config: Config, server_state: ServerState,
                 app_state: dict[str, Any], _loop: asyncio.AbstractEventLoop | None = None
                 ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self._head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm(self.head_timeout_s)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def handle_events(self) -> None:
        before = self.cycle
        super().handle_events()
        if self.cycle is not before:  # a request's head arrived whole: it is being answered
            self._disarm()

    def on_response_complete(self) -> None:
        # the keep-alive timer closes a connection that stays idle; one that starts its
        # next request has the head's time on top of it
        self._arm(self.timeout_keep_alive + self.head_timeout_s)
        super().on_response_complete()

    def _arm(self, delay: float) -> None:
        self._disarm()
        self._head_timer = self.loop.call_later(delay, self._head_late)

    def _disarm(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_late(self) -> None:
        self._head_timer = None
        answering = self.cycle is not None and not self.cycle.response_complete
        if not answering and not self.transport.is_closing():
            self.transport.close()


def with_head_timeout(seconds: float) -> type[HeadDeadline]:
    """HeadDeadline with another deadline (the tests' short one)."""
    return type("HeadDeadline", (HeadDeadline,), {"head_timeout_s": seconds})
