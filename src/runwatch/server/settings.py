"""Server settings the CLI needs before (and without) importing the web framework."""

from __future__ import annotations

import ipaddress
import secrets

# The environment variable that holds the API token.
ENV_VAR = "RUNWATCH_TOKEN"
DEFAULT_PORT = 8765
# Seconds between indexing passes of `runwatch ui`.
INDEX_INTERVAL_S = 0.2
# A token needs this many characters, this many of them different (see docs/security.md).
MIN_TOKEN_CHARS = 16
MIN_TOKEN_DISTINCT = 8
# Characters a token cannot carry in a cookie or a query string.
TOKEN_FORBIDDEN = frozenset(';,"\\%+&=#?')


def new_token() -> str:
    """A fresh random token (32 URL-safe characters), never starting with "-": one that
    did read as an option on a command line (`--token -x…`; a bench's child process
    refused its arguments, 1 run in 64)."""
    while True:
        token = secrets.token_urlsafe(24)
        if not token.startswith("-"):
            return token


def token_problem(token: str) -> str | None:
    """Why `token` is too weak to guard a server, or None when it will do."""
    bad = (len(token) < MIN_TOKEN_CHARS or len(set(token)) < MIN_TOKEN_DISTINCT
           or any(not (c.isascii() and c.isprintable()) or c.isspace() or c in TOKEN_FORBIDDEN
                  for c in token))
    if not bad:
        return None
    return (f"the token is too weak: use at least {MIN_TOKEN_CHARS} characters, "
            f"{MIN_TOKEN_DISTINCT} of them different, from ASCII letters, digits and "
            f"punctuation other than ; , \" \\ % + & = # ? (for example --token {new_token()})")


def is_loopback(host: str) -> bool:
    """Whether binding `host` keeps the server on this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
