"""Server settings the CLI needs before (and without) importing the web framework."""

from __future__ import annotations

import ipaddress

# The environment variable that holds the API token.
ENV_VAR = "RUNWATCH_TOKEN"
DEFAULT_PORT = 8765
# Seconds between indexing passes of `runwatch ui`.
INDEX_INTERVAL_S = 0.2


def is_loopback(host: str) -> bool:
    """Whether binding `host` keeps the server on this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
