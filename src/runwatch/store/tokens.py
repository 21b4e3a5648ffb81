"""Projects and API tokens in the index: making, listing, revoking and checking tokens.

A token is `rw_` and 43 URL-safe characters (32 random bytes). Only its sha256 is
stored, with its first characters as a hint; the token itself is shown once, when made.
Each token holds one right (read < write < admin) over one project.
"""

from __future__ import annotations

import hashlib
import secrets
import shlex
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, exists, func, or_, select, update

from runwatch.analysis.timing import iso
from runwatch.store import schema as s

PREFIX = "rw_"
RIGHTS = ("read", "write", "admin")
HINT_CHARS = 10  # `rw_` and the first 7 characters of the secret
# last_used_at is written at most this often per token, so reads do not each write
USE_RESOLUTION_S = 60.0


class TokenError(ValueError):
    """A token or project that cannot be made or found; the message says what to do.

    What to do may be a `runwatch` command: `steps` holds each as a lead-in and the
    command's words, so that a caller prints it as it runs there (`said`: the CLI adds the
    --dir or --db it was given); the message itself names them as plain `runwatch …`."""

    def __init__(self, what: str, steps: Sequence[tuple[str, Sequence[str]]] = ()) -> None:
        self.what = what
        self.steps = tuple((lead, tuple(words)) for lead, words in steps)
        super().__init__(self.said())

    def said(self, command: Callable[..., str] | None = None) -> str:
        """The message, each step's command written by `command(*words)` (by default
        `runwatch WORDS…`)."""
        command = command or (lambda *words: shlex.join(["runwatch", *words]))
        if not self.steps:
            return self.what
        return f"{self.what}; " + " or ".join(f"{lead} `{command(*words)}`"
                                              for lead, words in self.steps)


@dataclass(frozen=True)
class Token:
    """A token's record (never its secret)."""

    id: str
    name: str
    project: str
    right: str
    hint: str
    created_by: str
    created_at: float
    last_used_at: float | None
    revoked_at: float | None

    def json(self) -> dict[str, Any]:
        """As the API and `-o json` show it: times as ISO 8601 text in UTC."""
        return {"id": self.id, "name": self.name, "project": self.project, "right": self.right,
                "hint": self.hint, "created_by": self.created_by,
                "created_at": iso(self.created_at), "last_used_at": iso(self.last_used_at),
                "revoked_at": iso(self.revoked_at)}


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def looks_like_token(text: str) -> bool:
    return text.startswith(PREFIX) and len(text) == len(PREFIX) + 43


def _token(row: Any) -> Token:
    return Token(id=row.id, name=row.name, project=row.project, right=row.right,
                 hint=row.hint, created_by=row.created_by, created_at=row.created_at,
                 last_used_at=row.last_used_at, revoked_at=row.revoked_at)


def check_right(right: str) -> str:
    if right not in RIGHTS:
        raise TokenError(f"the right must be one of {', '.join(RIGHTS)}, not {right!r}")
    return right


def project_names(conn: Connection) -> dict[str, int]:
    """Every project, made or named by runs, with its number of runs."""
    r = s.runs.c
    counts = {p: int(n) for p, n in conn.execute(
        select(r.project, func.count()).group_by(r.project)).all()}
    for name in conn.execute(select(s.projects.c.name)).scalars():
        counts.setdefault(name, 0)
    return dict(sorted(counts.items()))


def project_exists(conn: Connection, name: str) -> bool:
    """Whether project `name` was made or is named by a run: two EXISTS lookups on indexes,
    whatever the number of runs."""
    r = s.runs.c
    made = exists().where(s.projects.c.name == name)
    named = exists().where(r.project == name)
    return bool(conn.execute(select(or_(made, named))).scalar())


def create_project(conn: Connection, name: str, created_by: str) -> bool:
    """Make project `name`; False when it exists already (made before, or named by runs)."""
    from runwatch.rundir.format import RunDirError, validate_name

    try:
        validate_name(name, "project name")
    except RunDirError as exc:
        raise TokenError(str(exc)) from None
    if project_exists(conn, name):
        return False
    conn.execute(s.projects.insert().values(name=name, created_by=created_by[:128],
                                            created_at=time.time()))
    return True


def create(conn: Connection, project: str, right: str, name: str, created_by: str
           ) -> tuple[Token, str]:
    """A new token of `project` with `right`, and its secret (shown once, never stored)."""
    check_right(right)
    if not project_exists(conn, project):
        raise TokenError(f"there is no project {project!r}",
                         [("make it with", ("projects", "create", project)),
                          ("list them with", ("projects", "list"))])
    name = name.strip()
    if not name or len(name) > 128:
        raise TokenError("give the token a name of 1 to 128 characters, saying who or what "
                         "uses it (e.g. ci-uploader)")
    secret = PREFIX + secrets.token_urlsafe(32)
    row: dict[str, Any] = {"id": secrets.token_hex(6), "secret_sha256": digest(secret),
           "hint": secret[:HINT_CHARS], "name": name, "project": project, "right": right,
           "created_by": created_by[:128] or "unknown", "created_at": time.time(),
           "last_used_at": None, "revoked_at": None}
    conn.execute(s.api_tokens.insert().values(**row))
    del row["secret_sha256"]
    return Token(**row), secret


def list_tokens(conn: Connection, projects: frozenset[str] | None = None) -> list[Token]:
    """Tokens newest first, of `projects` (None: all), revoked ones too."""
    t = s.api_tokens.c
    q = select(s.api_tokens).order_by(t.created_at.desc())
    if projects is not None:
        q = q.where(t.project.in_(sorted(projects)))
    return [_token(r) for r in conn.execute(q)]


def get(conn: Connection, token_id: str) -> Token | None:
    row = conn.execute(select(s.api_tokens).where(s.api_tokens.c.id == token_id)).first()
    return _token(row) if row is not None else None


def revoke(conn: Connection, token_id: str) -> Token:
    """Revoke a token at once (again is a no-op); TokenError when there is none."""
    t = s.api_tokens.c
    conn.execute(update(s.api_tokens).where(t.id == token_id, t.revoked_at.is_(None))
                 .values(revoked_at=time.time()))
    found = get(conn, token_id)
    if found is None:
        raise TokenError(f"no token has the id {token_id!r}",
                         [("list them with", ("tokens", "list"))])
    return found


def authenticate(conn: Connection, secret: str, now: float | None = None) -> Token | None:
    """The live token whose secret this is (its last use recorded), or None."""
    if not looks_like_token(secret):
        return None
    t = s.api_tokens.c
    row = conn.execute(select(s.api_tokens).where(t.secret_sha256 == digest(secret))).first()
    if row is None or row.revoked_at is not None:
        return None
    now = time.time() if now is None else now
    if row.last_used_at is None or now - row.last_used_at >= USE_RESOLUTION_S:
        conn.execute(update(s.api_tokens).where(t.id == row.id).values(last_used_at=now))
    return _token(row)
