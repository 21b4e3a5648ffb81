"""HTTP clients of the tests that talk to a real server over loopback: httpx's own, on one
TLS context made once per process.

A new `httpx.Client` (and so each `httpx.get`/`httpx.post`) builds an SSL context and loads
the system's and certifi's CA certificates into it, even for an http:// URL that never uses
it: 0.2-0.4 s per client on the 2-core CI machine under load, more than most requests the
tests make. These clients verify exactly as httpx's do (the same default context), made
once; a test that checks connections themselves (keep-alive, pools) still makes its own.
"""

from __future__ import annotations

import ssl
from functools import cache
from typing import Any

import httpx

from tests.support.wait import DEADLINE_S

__all__ = ["client", "get", "post", "request", "tls"]


@cache
def tls() -> ssl.SSLContext:
    """The TLS context httpx would make for a client (`verify=True`), made once."""
    return httpx.create_ssl_context()


def client(**kw: Any) -> httpx.Client:
    """`httpx.Client(**kw)` on the shared TLS context (timeout DEADLINE_S unless given)."""
    kw.setdefault("timeout", DEADLINE_S)
    return httpx.Client(verify=tls(), **kw)


def request(method: str, url: str, **kw: Any) -> httpx.Response:
    """One request on a client of its own, as `httpx.request` (timeout DEADLINE_S)."""
    timeout = kw.pop("timeout", DEADLINE_S)
    with client(timeout=timeout) as c:
        return c.request(method, url, **kw)


def get(url: str, **kw: Any) -> httpx.Response:
    return request("GET", url, **kw)


def post(url: str, **kw: Any) -> httpx.Response:
    return request("POST", url, **kw)

