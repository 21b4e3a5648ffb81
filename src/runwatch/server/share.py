"""Share links: a signed, expiring, read-only link to one run's page.

A link is `<server>/share/<credential>`; the credential is
`<share id>.<expiry>.<run id, base64url>.<signature, base64url>`, the signature an
HMAC-SHA256 of the first three parts under a secret kept in the runs folder
(`.runwatch/share.key`, made 0600 by the first `runwatch runs share`). Opening the link
checks it and sets the `runwatch_share` cookie (HttpOnly, SameSite=Lax, expiring with the
link), then sends the browser to the run's page. On a server with a token, a request
without the token but with that cookie reaches only the GET routes the run page needs for
that one run (`allows`), with read of that run's project only (`grant`); TokenAuth
(server/auth.py) asks `grant` on every such request, so an expired, tampered or revoked
link stops working at once. Revoked share ids are lines of `.runwatch/share-revoked`.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
import re
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Depends
from fastapi.responses import RedirectResponse
from sqlalchemy import Engine, select
from starlette.datastructures import QueryParams
from starlette.types import Scope as ASGIScope

from runwatch.rundir.format import STATE_DIR
from runwatch.server.errors import ApiError, not_found
from runwatch.server.scopes import Scope
from runwatch.server.state import ServerState, state
from runwatch.store import schema as s

COOKIE = "runwatch_share"
LANDING = "/share/"
KEY_FILE = Path(STATE_DIR) / "share.key"
REVOKED_FILE = Path(STATE_DIR) / "share-revoked"
MAX_SECONDS = 366 * 86400
# what a shared link may read: the run page, its assets, and these routes of its run
RUN_ROUTES = frozenset({"", "/metrics/keys", "/series", "/history", "/reward-terms", "/samples",
                        "/checkpoints", "/logs", "/health", "/events", "/stream"})
_DOMAIN = b"runwatch-share-v1\0"
_ID = re.compile(r"^[A-Za-z0-9_-]{8,32}$")
_UNITS = {"m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
WHO = "a share link"


class ShareError(ValueError):
    """A link that does not grant anything: malformed, tampered, expired or revoked."""


@dataclass(frozen=True)
class Share:
    share_id: str
    run_id: str
    expires: int  # unix seconds


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    if not re.fullmatch(r"[A-Za-z0-9_-]*", text):
        raise ShareError("this share link is malformed")
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        raise ShareError("this share link is malformed") from None


def parse_duration(text: str) -> int:
    """Seconds of `30m`, `12h`, `7d` or `2w` (at most 366 days)."""
    m = re.fullmatch(r"\s*(\d+)\s*([mhdw])\s*", text.lower())
    if not m:
        raise ValueError(f"{text!r} is not a duration: give a number and m, h, d or w, "
                         "as in 7d or 12h")
    if int(m[1]) <= 0:
        raise ValueError(f"{text!r} would end the link at once: the number must be positive, "
                         "as in 30m or 7d")
    seconds = int(m[1]) * _UNITS[m[2]]
    if seconds > MAX_SECONDS:
        raise ValueError(f"{text!r} is longer than a share link may last (366 days)")
    return seconds


def _read_private(path: Path) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return None
    with os.fdopen(fd, "rb") as f:
        return f.read(1 << 20)


def secret(runs_dir: Path, create: bool = False) -> bytes | None:
    """The signing key of `runs_dir`'s links; made (0600) when `create` and missing."""
    path = runs_dir / KEY_FILE
    key = _read_private(path)
    if key is None and create:
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        except FileExistsError:  # another process made it first: use that one
            return secret(runs_dir)
        with os.fdopen(fd, "wb") as f:
            f.write(secrets.token_hex(32).encode())
        key = _read_private(path)
    if key is not None and len(key.strip()) < 32:
        raise ShareError(f"{path} holds no usable key (under 32 characters)")
    return key.strip() if key is not None else None


def _signature(key: bytes, payload: str) -> bytes:
    return hmac.new(key, _DOMAIN + payload.encode(), hashlib.sha256).digest()


def sign(key: bytes, share: Share) -> str:
    """The link credential of `share`."""
    payload = f"{share.share_id}.{share.expires}.{_b64(share.run_id.encode())}"
    return f"{payload}.{_b64(_signature(key, payload))}"


def parse(credential: str) -> Share:
    """The share a credential names, signature unchecked (for revoking by link)."""
    parts = credential.strip().split(".")
    if len(parts) != 4 or not _ID.match(parts[0]) or not parts[1].isdigit():
        raise ShareError("this share link is malformed")
    try:
        run_id = _unb64(parts[2]).decode()
    except UnicodeDecodeError:
        raise ShareError("this share link is malformed") from None
    return Share(parts[0], run_id, int(parts[1]))


def verify(key: bytes, credential: str, revoked: set[str], now: float | None = None) -> Share:
    """The share of a credential signed with `key`, unexpired and not revoked."""
    share = parse(credential)
    payload, _, sig = credential.strip().rpartition(".")
    _unb64(sig)  # ShareError unless base64url, so the text is ASCII
    # The text, not the bytes it decodes to: the last character of a signature carries bits
    # that decoding drops, so the bytes matched with that character changed (and the link
    # was judged as if untouched: revoked, expired or good).
    if not hmac.compare_digest(sig, _b64(_signature(key, payload))):
        raise ShareError("this share link is not valid: its signature does not match")
    if share.expires <= (time.time() if now is None else now):
        raise ShareError("this share link has expired; ask for a new one")
    if share.share_id in revoked:
        raise ShareError("this share link was revoked")
    return share


def revoked_ids(runs_dir: Path) -> set[str]:
    data = _read_private(runs_dir / REVOKED_FILE)
    return set(data.decode("utf-8", "replace").split()) if data else set()


def revoke(runs_dir: Path, share_id: str) -> None:
    """Refuse the share `share_id` from now on, on every server of `runs_dir`."""
    if not _ID.match(share_id):
        raise ShareError(f"{share_id!r} is not a share id or link")
    path = runs_dir / REVOKED_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "a") as f:
        f.write(share_id + "\n")


def share_id_of(link_or_id: str) -> str:
    """The share id in a link (`…/share/<credential>`), a credential, or an id itself."""
    text = link_or_id.strip().rstrip("/")
    text = text.rsplit(LANDING, 1)[-1]
    return parse(text).share_id if "." in text else text


def new_share(runs_dir: Path, run_id: str, seconds: int) -> tuple[Share, str]:
    """A new share of `run_id` for `seconds`, and its credential; noted in the folder's
    list of issued shares (`issued`)."""
    share = Share(secrets.token_urlsafe(9), run_id, int(time.time()) + seconds)
    new_key = secret(runs_dir) is None
    key = secret(runs_dir, create=True)
    assert key is not None
    _note_issued(runs_dir, share, new_key)
    return share, sign(key, share)


# The shares issued from a runs folder, a line each ("<share id> <run id> <expiry>"), so
# that a revocation tells an id it issued from a typo (a link itself is stateless: a
# signature, no record). The file begins with ISSUED_COMPLETE when it was begun with the
# folder's signing key, so it holds every id that key signed; a folder whose key signed
# links before runwatch kept this list has no such line.
ISSUED_FILE = Path(STATE_DIR) / "share-issued"
ISSUED_COMPLETE = "# every share of this folder's share.key"


def _note_issued(runs_dir: Path, share: Share, new_key: bool) -> None:
    """Add `share` to the folder's list of issued shares; with `new_key` (this share made
    the folder's signing key) the list starts anew, complete: the links of an earlier key
    stopped working with it."""
    path = runs_dir / ISSUED_FILE
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | (os.O_TRUNC if new_key else os.O_APPEND)
    with os.fdopen(os.open(path, flags, 0o600), "a", encoding="utf-8") as f:
        f.write((f"{ISSUED_COMPLETE}\n" if new_key else "")
                + f"{share.share_id} {share.run_id} {share.expires}\n")


def issued(runs_dir: Path) -> tuple[set[str], bool]:
    """The share ids the folder's list holds, and whether the list is complete."""
    try:
        lines = (runs_dir / ISSUED_FILE).read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return set(), False
    ids = {ln.split()[0] for ln in lines if ln.strip() and ln != ISSUED_COMPLETE}
    return ids, ISSUED_COMPLETE in lines[:1]


def allows(scope: ASGIScope, run_id: str) -> bool:
    """Whether a share of `run_id` may make this request: GETs of the run page, its assets,
    and `RUN_ROUTES` of that run named by its exact id (never a prefix or a name)."""
    if scope["method"] != "GET":
        return False
    path: str = scope["path"]
    if path == "/runs" or path.startswith("/assets/"):
        return True
    if path in ("/api/series", "/api/overlay"):
        runs = QueryParams(scope.get("query_string", b"")).getlist("run")
        return bool(runs) and all(r == run_id for r in runs)
    head = "/api/runs/"
    if not path.startswith(head):
        return False
    ref, slash, rest = path[len(head):].partition("/")
    return ref == run_id and (slash + rest) in RUN_ROUTES


def _refusal(scope: ASGIScope, run_id: str) -> str:
    """Why `allows` refused a share this request: a route of a run that is not named by
    the shared run's id (a name or a prefix is not resolved: whether one names the shared
    run alone would tell the link's holder of the project's other runs), or any other."""
    head = "/api/runs/"
    path: str = scope["path"]
    _, slash, rest = path[len(head):].partition("/")
    if scope["method"] == "GET" and path.startswith(head) and (slash + rest) in RUN_ROUTES:
        return (f"a share link reads one run, named by its id alone (not by a name or a "
                f"prefix): GET {head}{run_id}{slash}{rest}")
    return "a share link reads only the page of its run; this request needs the server's token"


def check(runs_dir: Path | None, credential: str) -> Share:
    """The share a credential grants on a server of `runs_dir`; ShareError when none."""
    try:
        key = secret(runs_dir) if runs_dir is not None else None
        if key is None or runs_dir is None:
            raise ShareError("this server has no share links (it indexes no runs folder "
                             "with a share key)")
        return verify(key, credential, revoked_ids(runs_dir))
    except OSError as exc:
        raise ShareError(f"this server cannot read its share key: {exc.strerror}") from None


def grant(scope: ASGIScope, credential: str) -> Scope:
    """What the share credential lets this request read: its run's project (`allows` keeps
    it to that run's routes), nothing for the page and its assets; ApiError when it does
    not let the request through.

    Blocking (it reads the key, the revoked list and the index): call it off the loop."""
    st = _state(scope)
    try:
        share = check(getattr(st, "runs_dir", None), credential)
    except ShareError as exc:
        raise ApiError(401, str(exc)) from None
    if not allows(scope, share.run_id):
        raise ApiError(403, _refusal(scope, share.run_id))
    if not scope["path"].startswith("/api/"):
        return Scope(frozenset(), "read", WHO)
    project = _project(st.engine, share.run_id)
    if project is None:
        # the routes' own 404 and 400 would list other runs as candidates
        raise not_found("the shared run is no longer in this server's index")
    return Scope(frozenset({project}), "read", WHO)


def _project(engine: Engine, run_id: str) -> str | None:
    """The project of run `run_id` when the API's lookup there finds it alone (no other run
    of its project is named `run_id`), else None."""
    r = s.runs.c
    with engine.connect() as conn:
        project: str | None = conn.execute(select(r.project).where(r.run_id == run_id)).scalar()
        if project is None:
            return None
        clash = conn.execute(select(r.pk).where(r.project == project, r.name == run_id,
                                                r.run_id != run_id).limit(1)).first()
    return project if clash is None else None


def _state(scope: ASGIScope) -> Any:
    app: Any = scope.get("app")
    return getattr(getattr(app, "state", None), "runwatch", None)


router = APIRouter(tags=["share"])


@router.get(LANDING + "{credential}", include_in_schema=False)
def landing(credential: str, st: ServerState = Depends(state)) -> RedirectResponse:
    """Open a share link: check it, set the share cookie, go to the run's page."""
    try:
        share = check(st.runs_dir, credential)
    except ShareError as exc:
        raise ApiError(401, str(exc)) from None
    if _project(st.engine, share.run_id) is None:
        raise not_found("the shared run is no longer in this server's index")
    # `shared=1` tells the web app to show this run alone: nothing else is open to a share
    resp = RedirectResponse(f"/runs?{QueryParams({'run': share.run_id, 'shared': '1'})}",
                            status_code=303)
    resp.set_cookie(COOKIE, credential, max_age=max(1, share.expires - int(time.time())),
                    path="/", httponly=True, samesite="lax")
    return resp
