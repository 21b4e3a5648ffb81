"""Which web pages may use this server: the Host check and same-origin JSON writes.

A page on another site can make a browser send requests to a loopback server in two ways,
and this middleware closes both:

- DNS rebinding: the page's own name is made to resolve to 127.0.0.1, so the browser
  treats the server as that page's origin and lets it read the answers. The request
  still carries the page's name in `Host`, so a server without a token answers only
  requests addressed to a loopback name or to the address the connection arrived on.
  With a token the name is not checked: a rebound page does not have the token.
- Cross-site writes: a form or `fetch` POST needs no permission to be sent. Writes must
  say `Content-Type: application/json` (which no cross-site request can send without
  the CORS permission this server never grants) and must not carry another site's
  `Origin`.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from runwatch.server.errors import error_response

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def host_name(host: str) -> str:
    """The name in a Host header or an origin's authority, without port or brackets."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1:].partition("]")[0]
    name, sep, port = host.rpartition(":")
    return name if sep and port.isdigit() and ":" not in name else host


def _origin_authority(origin: str) -> str | None:
    """`host[:port]` of an Origin header, or None when it is not an http(s) origin."""
    scheme, sep, rest = origin.strip().lower().partition("://")
    if not sep or scheme not in ("http", "https") or not rest or "/" in rest:
        return None
    return rest


class SameOrigin:
    """ASGI middleware refusing rebound names, cross-site or non-JSON writes, and a URL that
    holds a NUL."""

    def __init__(self, app: ASGIApp, check_host: bool) -> None:
        self.app = app
        self.check_host = check_host

    def _refusal(self, scope: Scope) -> tuple[int, str] | None:
        if "\x00" in scope.get("path", "") or b"%00" in scope.get("query_string", b""):
            # no run, key or setting holds one; SQLite would cut a LIKE pattern there
            return 400, ("the URL holds a NUL character (%00), which no run id, name, key "
                         "or setting has: remove it")
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        host = headers.get("host", "")
        if self.check_host and host:
            server = scope.get("server")
            allowed = LOOPBACK_NAMES | ({host_name(str(server[0]))} if server else set())
            if host_name(host) not in allowed:
                return 403, (f"this server answers only to {', '.join(sorted(LOOPBACK_NAMES))}, "
                             f"not {host_name(host)!r}; open it by one of those names, or "
                             "start it with --token to serve it under another name")
        if scope["method"] not in WRITES:
            return None
        origin = headers.get("origin")
        if origin is not None and _origin_authority(origin) != host.strip().lower():
            return 403, (f"a write from the page at {origin!r} was refused: this server "
                         "accepts writes only from its own pages or from non-browser clients")
        media = headers.get("content-type", "").partition(";")[0].strip().lower()
        if media != "application/json":
            return 415, (f"writes must be sent as 'Content-Type: application/json', not "
                         f"{media or 'no content type'!r}; send the body as JSON")
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        refusal = self._refusal(scope) if scope["type"] == "http" else None
        if refusal is None:
            await self.app(scope, receive, send)
            return
        await error_response(*refusal)(scope, receive, send)
