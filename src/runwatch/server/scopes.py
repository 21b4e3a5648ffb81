"""What a request may see and do: its scope (projects and right), and the checks routes make.

TokenAuth (server/auth.py) puts a `Scope` on every request as `request.state.scope`:
the server's own token holds admin over every project, an API token (store/tokens.py)
its one right over its one project, a share link read of its one run (share.allows
limits the routes). A server without a token puts none: everything is open, as before.

Routes call `require` before acting on a project, `run` to look up a run in scope,
and `narrow` or `visible` to keep lists to the scope's projects.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fastapi import Request
from sqlalchemy import Connection, Row, select

from runwatch.server.errors import ApiError
from runwatch.server.runs import resolve_run
from runwatch.store import jobs as store_jobs
from runwatch.store import schema as s
from runwatch.store.plain import split_ref
from runwatch.store.tokens import RIGHTS


@dataclass(frozen=True)
class Scope:
    """`right` over `projects` (None: every project); `who` names the credential in errors."""

    projects: frozenset[str] | None
    right: str
    who: str

    @property
    def rights(self) -> tuple[str, ...]:
        """Every right held: a right holds the ones below it (read < write < admin)."""
        return RIGHTS[:RIGHTS.index(self.right) + 1]

    def covers(self, project: str | None) -> bool:
        """Whether `project` is in scope; None (every project) only for an unscoped one."""
        return self.projects is None or (project is not None and project in self.projects)

    def can(self, project: str | None, right: str) -> bool:
        return self.covers(project) and right in self.rights


# the server's own token, and any request to a server without one
EVERYTHING = Scope(None, "admin", "the server's token")


def scope_of(request: Request) -> Scope:
    found: Scope = getattr(request.state, "scope", EVERYTHING)
    return found


def _where(project: str | None) -> str:
    return "every project" if project is None else f"project {project!r}"


def require(request: Request, project: str | None, right: str) -> None:
    """Go on only when the request holds `right` over `project` (None: over every project,
    i.e. the server itself); 403 saying what is needed otherwise."""
    sc = scope_of(request)
    if sc.can(project, right):
        return
    held = (f"{sc.right} on {', '.join(sorted(sc.projects))}" if sc.projects is not None
            else f"{sc.right} on every project")
    need = ("the server's token" if project is None
            else f"a token with {right} on {_where(project)} (an admin makes one on the "
                 f"server's machine with `runwatch tokens create --project {project} --right "
                 f"{right} --name WHO --db DB`, DB being the server's index)")
    raise ApiError(403, f"{sc.who} holds {held}; this request needs {right} on "
                        f"{_where(project)}: use {need}")


def run(request: Request, conn: Connection, ident: str, right: str = "read") -> Row[Any]:
    """The run `ident` names among the scope's runs, once `right` over its project is held.

    A run outside the scope is not found (404): its id, name or prefix is looked up among
    the scope's runs only, so a 404's or 400's candidates are the scope's runs too. A name
    is a run's own within its project: the request names the project with `?project=` or
    as `PROJECT/RUN` (a project outside the scope is 403, as for lists), and a name that
    runs of several projects in scope bear is 409, listing them."""
    project = split_ref(ident)[0] or request.query_params.get("project") or None
    if project is not None:
        require(request, project, right)
    row = resolve_run(conn, ident, scope_of(request).projects,
                      request.query_params.get("project") or None)
    require(request, row.project, right)
    return row


def narrow(request: Request, project: str | None) -> str | None:
    """The project a list may show: `project` when in scope (403 otherwise), else the
    scope's one project, or None (every project) for an unscoped request."""
    sc = scope_of(request)
    if project is not None:
        require(request, project, "read")
        return project
    if sc.projects is None:
        return None
    if len(sc.projects) != 1:
        raise ApiError(403, f"{sc.who} reads several projects; name one with ?project=")
    return next(iter(sc.projects))


def visible(request: Request, project: str) -> bool:
    return scope_of(request).covers(project)


def hide_jobs(request: Request, conn: Connection, view: dict[str, Any]) -> None:
    """Leave out of the workers view the jobs outside the scope: of each worker's `jobs`
    the runs of other projects, and from `queue_depth` their queued jobs (the devices a
    worker uses stay: they say what the shared workers have free)."""
    sc = scope_of(request)
    if sc.projects is None:
        return
    view["queue_depth"] = store_jobs.queue_depth(conn, projects=sc.projects)
    workers: list[dict[str, Any]] = view["workers"]
    run_ids = {job["run_id"] for w in workers for job in w["jobs"]}
    if not run_ids:
        return
    r = s.runs.c
    inside = set(conn.execute(select(r.run_id).where(
        r.run_id.in_(sorted(run_ids)), r.project.in_(sorted(sc.projects)))).scalars())
    for w in workers:
        w["jobs"] = [job for job in w["jobs"] if job["run_id"] in inside]


def ingest_refusal(request: Request, conn: Connection, run_id: str,
                   manifest: dict[str, Any] | None) -> str | None:
    """Why this request may not store a batch of run `run_id` (None when it may): it needs
    write on the run's project, and on the project its manifest names."""
    stored = conn.execute(select(s.runs.c.project).where(s.runs.c.run_id == run_id)).scalar()
    return stored_ingest_refusal(request, run_id, stored, manifest)


def stored_ingest_refusal(request: Request, run_id: str, stored: str | None,
                          manifest: dict[str, Any] | None) -> str | None:
    """`ingest_refusal` for a caller that has looked the run up: `stored` is the project
    the index holds it in, None for a run it does not hold yet."""
    sc = scope_of(request)
    if stored is not None and not sc.covers(stored):  # not said: which project holds it
        return (f"run {run_id!r} belongs to another project than "
                f"{', '.join(sorted(sc.projects or ()))}; {sc.who} writes only its own")
    projects = {stored} if stored is not None else set()
    if manifest is not None:
        projects.add(str(manifest.get("project") or "default"))
    try:
        for project in sorted(projects):
            require(request, project, "write")
    except ApiError as exc:
        return exc.message
    return None
