"""Token auth for every route: a bearer header, or a cookie the web app gets from ?token=.

A share link (server/share.py) stands in for the token on the few GET routes of its one
run: its landing route `/share/…` is open (it checks the link itself), and a request
without the token but with the share cookie is let through only when share.refusal says so.

With no token configured the server serves anyone who can reach it, which is why
it refuses to bind a non-loopback address without one (see cli/serve.py).
"""

from __future__ import annotations

import hmac
from http.cookies import SimpleCookie
from urllib.parse import parse_qs

import anyio
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from runwatch.server import share
from runwatch.server.errors import error_response

COOKIE = "runwatch_token"


def _presented(scope: Scope) -> tuple[str | None, bool]:
    """The token a request carries, and whether it came in the query string."""
    headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
    auth = headers.get("authorization", "")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip(), False
    query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
    if "token" in query:
        return query["token"][0], True
    return _cookie(headers, COOKIE), False


def _cookie(headers: dict[str, str], name: str) -> str | None:
    cookie = SimpleCookie()
    try:
        cookie.load(headers.get("cookie", ""))
    except Exception:
        return None
    morsel = cookie.get(name)
    return morsel.value if morsel else None


async def _share_refusal(scope: Scope) -> tuple[int, str] | None:
    """None when a share link lets this tokenless request through, else (status, why)."""
    if scope["method"] == "GET" and scope["path"].startswith(share.LANDING):
        return None
    headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
    credential = _cookie(headers, share.COOKIE)
    if credential is None:
        return 401, ("this server needs a token: send 'Authorization: Bearer <token>', or open "
                     "the app once as /?token=<token>")
    return await anyio.to_thread.run_sync(share.refusal, scope, credential)


class TokenAuth:
    """ASGI middleware refusing, with the one error shape, any request without the token."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.token = token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given, from_query = _presented(scope)
        if given is None or not hmac.compare_digest(given.encode(), self.token.encode()):
            refused = await _share_refusal(scope)
            if refused is not None:
                await error_response(*refused)(scope, receive, send)
                return
            await self.app(scope, receive, send)
            return
        if not from_query:
            await self.app(scope, receive, send)
            return

        async def send_with_cookie(message: Message) -> None:
            if message["type"] == "http.response.start":
                cookie = f"{COOKIE}={self.token}; Path=/; HttpOnly; SameSite=Strict"
                message["headers"] = [*message.get("headers", []),
                                      (b"set-cookie", cookie.encode("latin-1"))]
            await send(message)

        await self.app(scope, receive, send_with_cookie)
