"""The one JSON error shape of the API: {"ok": false, "error": ..., "status": ...}.

Every error response, whatever raised it, leaves through `error_response`.
"""

from __future__ import annotations

import logging
import sqlite3
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from sqlalchemy.exc import DatabaseError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.exceptions import HTTPException as StarletteHTTPException

from runwatch.server.jsonio import JSONResponse
from runwatch.store.db import IndexUnusable, unusable

log = logging.getLogger("runwatch.server")


class ApiError(Exception):
    """An error a client can act on; `status` is the HTTP status to answer with."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None,
                 **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers
        self.extra = extra


def error_response(status: int, message: str, headers: dict[str, str] | None = None,
                   **extra: Any) -> JSONResponse:
    """The response for every error the API returns."""
    body: dict[str, Any] = {"ok": False, "error": message, "status": status}
    body.update(extra)
    return JSONResponse(body, status_code=status, headers=headers)


def not_found(what: str) -> ApiError:
    return ApiError(404, what)


def bad_request(message: str, **extra: Any) -> ApiError:
    return ApiError(400, message, **extra)


def unavailable(message: str, retry_after_s: int) -> ApiError:
    """A 503 the client should retry after `retry_after_s` seconds (header and body)."""
    return ApiError(503, message, headers={"Retry-After": str(retry_after_s)},
                    retry_after=retry_after_s)


# SQLite's words for a database another process holds, or a file it cannot open now
SQLITE_BUSY = ("database is locked", "database is busy", "unable to open database file")


def database_down(exc: OperationalError) -> bool:
    """Whether an OperationalError says the database cannot be reached now (a request may
    be sent again), not that this request failed in it: on PostgreSQL the driver's
    OperationalError (no connection, a connection ended, the server shutting down); on
    SQLite a file locked past its wait or that cannot be opened (its other operational
    errors, such as a trigger's RAISE or a full disk, are failures of the request)."""
    orig = exc.orig
    if exc.connection_invalidated:
        return True
    if type(orig).__module__.startswith("psycopg"):
        return True
    return any(words in str(orig) for words in SQLITE_BUSY)


def _validation_message(exc: RequestValidationError) -> str:
    parts = []
    for err in exc.errors()[:5]:
        if err.get("type") == "json_invalid":  # its loc is the character the parse stopped at
            at = err.get("loc", ("body", 0))[-1]
            return (f"bad request: the body is not valid JSON (the parse stopped at character "
                    f"{at}); send a JSON object")
        loc = ".".join(str(p) for p in err.get("loc", ()) if p not in ("query", "path", "body"))
        parts.append(f"{loc or 'request'}: {err.get('msg', 'invalid')}")
    return "bad request: " + "; ".join(parts)


def install(app: FastAPI) -> None:
    """Route every error raised in `app` through `error_response`."""
    said: set[str] = set()  # what the log said of an index that cannot be used, once each

    def _unusable(found: IndexUnusable) -> JSONResponse:
        # the index's disk is full or its file damaged: every request meets it, and the
        # log says it once, in its own words, not as a traceback per request
        if str(found) not in said:
            said.add(str(found))
            log.error("%s", found)
        down = unavailable(str(found), 60)
        return error_response(down.status, down.message, down.headers, **down.extra)

    @app.exception_handler(ApiError)
    async def _api(_: Request, exc: ApiError) -> JSONResponse:
        return error_response(exc.status, exc.message, exc.headers, **exc.extra)

    @app.exception_handler(PoolTimeout)
    async def _busy(_: Request, exc: PoolTimeout) -> JSONResponse:
        busy = unavailable("the server is busy: every database connection is in use; "
                           "retry in a few seconds", 2)
        return error_response(busy.status, busy.message, busy.headers, **busy.extra)

    @app.exception_handler(OperationalError)
    async def _database_down(request: Request, exc: OperationalError) -> JSONResponse:
        # the database refused or dropped the connection (stopped, restarting, out of
        # connections, a SQLite file locked past its wait): the request may be sent again,
        # and nothing the client sent is wrong; any other failure is the server's own
        if not database_down(exc):
            return await _database_failed(request, exc)
        said = str(exc.orig).strip().splitlines()[0] if exc.orig is not None else str(exc)
        log.warning("the database did not answer %s %s: %s", request.method,
                    request.url.path, said)
        down = unavailable("the server cannot reach its database now; retry in a few "
                           "seconds (the server's log says why)", 5)
        return error_response(down.status, down.message, down.headers, **down.extra)

    @app.exception_handler(DatabaseError)
    @app.exception_handler(sqlite3.DatabaseError)
    async def _database_failed(request: Request, exc: Exception) -> JSONResponse:
        # through SQLAlchemy, or the plain reader's (store/plain): a full disk or a
        # damaged file is the index's state, said as such; any other is the server's own
        return await _crash(request, exc)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        return error_response(400, _validation_message(exc))

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        message = exc.detail if isinstance(exc.detail, str) else "request failed"
        if exc.status_code == 404 and message == "Not Found":
            message = ("no such API route; see /openapi.json for the routes"
                       if request.url.path.startswith("/api/") else
                       "no such page or file; the app's pages are under /runs")
        elif exc.status_code == 405:
            message = "this route does not accept that method; see /openapi.json"
        return error_response(exc.status_code, message)

    @app.exception_handler(Exception)
    async def _crash(request: Request, exc: Exception) -> JSONResponse:
        found = unusable(exc)
        if found is not None:
            return _unusable(found)
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        return error_response(500, "the server failed on this request; its log has the details")
