"""Token auth for every route: a bearer header, or a cookie the web app gets from ?token=.

Two kinds of token are taken: the server's own (--token; admin over every project) and
API tokens of one project (store/tokens.py, checked against their sha256 in the index).
Each request gets its scope (server/scopes.py) as `request.state.scope`.

A share link (server/share.py) stands in for the token on the few GET routes of its one
run: its landing route `/share/…` is open (it checks the link itself), and a request
without the token but with the share cookie is let through only when share.grant gives it
a scope: read of the run's project, on the routes share.allows names.

With no token configured the server serves anyone who can reach it, which is why
it refuses to bind a non-loopback address without one (see cli/serve.py).
"""

from __future__ import annotations

import hmac
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qs

import anyio
from starlette.types import ASGIApp, Message, Receive, Send
from starlette.types import Scope as ASGIScope

from runwatch.server import share
from runwatch.server.errors import ApiError, error_response
from runwatch.server.scopes import EVERYTHING, Scope
from runwatch.store import tokens

COOKIE = "runwatch_token"


def _presented(scope: ASGIScope) -> tuple[str | None, bool]:
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


# the landing route checks its link itself, and reads no project
LANDING = Scope(frozenset(), "read", share.WHO)


async def _share_grant(scope: ASGIScope, given: str | None) -> Scope:
    """The scope a share link gives this request (it has no valid token); ApiError when
    none."""
    if scope["method"] == "GET" and scope["path"].startswith(share.LANDING):
        return LANDING
    headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
    credential = _cookie(headers, share.COOKIE)
    if credential is None and given is not None:
        raise ApiError(401, "the token sent is not valid here: it is unknown, mistyped or "
                            "revoked; ask an admin of your project for a new one (runwatch "
                            "tokens create)")
    if credential is None:
        raise ApiError(401, "this server needs a token: send 'Authorization: Bearer <token>', "
                            "or open the app once as /?token=<token>")
    return await anyio.to_thread.run_sync(share.grant, scope, credential)


def _api_token_scope(scope: ASGIScope, given: str) -> Scope | None:
    """The scope of an API token, or None when it is not a live one (blocking: the index)."""
    app: Any = scope["app"]
    with app.state.runwatch.engine.begin() as conn:
        found = tokens.authenticate(conn, given)
    if found is None:
        return None
    return Scope(frozenset({found.project}), found.right,
                 f"token {found.name!r} ({found.id})")


class TokenAuth:
    """ASGI middleware refusing, with the one error shape, any request without a token, and
    putting the scope of the one it has on the request."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.token = token

    async def _grant(self, scope: ASGIScope, given: str | None) -> Scope | None:
        if given is None:
            return None
        if hmac.compare_digest(given.encode(), self.token.encode()):
            return EVERYTHING
        if tokens.looks_like_token(given):
            return await anyio.to_thread.run_sync(_api_token_scope, scope, given)
        return None

    async def __call__(self, scope: ASGIScope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given, from_query = _presented(scope)
        grant = await self._grant(scope, given)
        if grant is None:
            try:
                shared = await _share_grant(scope, given)
            except ApiError as exc:
                await error_response(exc.status, exc.message)(scope, receive, send)
                return
            scope.setdefault("state", {})["scope"] = shared
            await self.app(scope, receive, send)
            return
        scope.setdefault("state", {})["scope"] = grant
        if not from_query:
            await self.app(scope, receive, send)
            return

        async def send_with_cookie(message: Message) -> None:
            if message["type"] == "http.response.start":
                cookie = f"{COOKIE}={given}; Path=/; HttpOnly; SameSite=Strict"
                message["headers"] = [*message.get("headers", []),
                                      (b"set-cookie", cookie.encode("latin-1"))]
            await send(message)

        await self.app(scope, receive, send_with_cookie)
