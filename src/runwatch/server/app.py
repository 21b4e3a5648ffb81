"""The FastAPI app factory: API routes, the one error shape, auth, and the built web app."""

from __future__ import annotations

import os
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from fastapi import Depends, FastAPI
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles
from sqlalchemy import Engine

from runwatch.jobs.control import RETRY_WAIT_S
from runwatch.server import (
    errors,
    routes_compare,
    routes_ingest,
    routes_jobs,
    routes_metrics,
    routes_prom,
    routes_records,
    routes_runs,
    routes_tokens,
    schemas,
    share,
    sse,
)
from runwatch.server.auth import TokenAuth
from runwatch.server.feed import ChangeFeed
from runwatch.server.jsonio import JSONResponse
from runwatch.server.origins import SameOrigin
from runwatch.server.series_cache import SeriesCache
from runwatch.server.settings import token_problem
from runwatch.server.settle import Gone, by_row
from runwatch.server.state import Limits, ServerState, state
from runwatch.server.warm import warm_up

# RUNWATCH_STATIC_DIR serves a web build from elsewhere (a developer's own `vite build
# --outDir`), so that several builds can be tried side by side without touching the package.
STATIC_DIR = Path(os.environ.get("RUNWATCH_STATIC_DIR") or Path(__file__).parent / "static")
APP_ROUTES = ("/runs", "/new", "/resources", "/compare", "/table", "/tokens")
NOT_BUILT = (
    "<!doctype html><title>runwatch</title><p>The runwatch API is running, but this copy "
    "has no built web app. Build it with <code>make web</code> (needs Node) or install a "
    "runwatch wheel, which ships it.</p>"
)


def _version() -> str:
    try:
        return version("runwatch")
    except PackageNotFoundError:
        return "0+unknown"


def create_app(
    engine: Engine,
    *,
    runs_dir: Path | None = None,
    token: str | None = None,
    feed: ChangeFeed | None = None,
    cache: SeriesCache | None = None,
    limits: Limits | None = None,
    static_dir: Path = STATIC_DIR,
    poll_interval: float = 0.1,
    metrics: routes_prom.ServerMetrics | None = None,
    warm: bool = False,
    lock_wait_s: float = RETRY_WAIT_S,
    judge: Callable[[], Gone] = by_row,
    folder_notes: list[str] | None = None,
) -> FastAPI:
    """The runwatch server app over `engine`'s index.

    `feed` is the change counter the caller's indexer bumps after storing rows, so live
    streams wake at once; `metrics` is what /metrics reports of this process (the caller's
    indexer feeds its points hook); `token`, when given, is required on every route;
    `warm` serves one small request in-process first (runwatch.server.warm), so the first
    real one does not pay for first calls; `lock_wait_s` is how long a retry waits for a
    process to let go of the run's folder before its 503 (job control's RETRY_WAIT_S);
    `judge` gives, before each read, what says whether a run's process is gone (a Runner
    that indexes a folder passes its indexer's, server/settle.py).
    Without a token only loopback names are served; writes are same-origin JSON
    (server/origins.py).
    """
    problem = token_problem(token) if token is not None else None
    if problem:
        raise ValueError(problem)
    app = FastAPI(
        title="runwatch",
        version=_version(),
        description="Runs, metrics, samples, logs and live streams of LLM post-training "
                    "runs, and the jobs and workers that run them.",
        default_response_class=JSONResponse,
        docs_url="/api/docs",
        redoc_url=None,
    )
    app.state.runwatch = ServerState(
        engine=engine,
        judge=judge,
        folder_notes=folder_notes if folder_notes is not None else [],
        cache=cache or SeriesCache(),
        feed=feed or ChangeFeed(),
        runs_dir=runs_dir,
        token=token,
        limits=limits or Limits(),
        poll_interval=poll_interval,
        lock_wait_s=lock_wait_s,
    )
    errors.install(app)
    for module in (routes_runs, routes_jobs, routes_metrics, routes_records, routes_ingest, sse,
                   routes_compare, share, routes_tokens):
        app.include_router(module.router)

    @app.get("/api/server", tags=["server"], response_model=schemas.ServerInfo)
    def server_info(st: ServerState = Depends(state)) -> dict[str, Any]:
        """What this server is: version, whether auth is on, what it indexes, and what its
        indexer's last pass said of that runs folder as a whole (`notes`: runs kept though
        their folders are gone, a folder that cannot be listed or moved to another disk, a
        folder of it that is not indexed: a copy of a run's, a link, no run's manifest or
        name), and while its indexer cannot write the index, since when and why."""
        return {"ok": True, "version": _version(), "auth": st.token is not None,
                "runs_dir": str(st.runs_dir) if st.runs_dir else None,
                "notes": list(st.folder_notes)}

    routes_prom.install(app, metrics or routes_prom.ServerMetrics())
    _mount_web(app, static_dir)
    # the last added runs first: the token before anything else is said about a request
    app.add_middleware(SameOrigin, check_host=token is None)
    if token is not None:
        app.add_middleware(TokenAuth, token=token)
    if warm:
        warm_up(app, engine)
    return app


def _mount_web(app: FastAPI, static_dir: Path) -> None:
    index = static_dir / "index.html"
    if (static_dir / "assets").is_dir():
        app.mount("/assets", StaticFiles(directory=static_dir / "assets"), name="assets")

    @app.get("/", include_in_schema=False)
    def root() -> RedirectResponse:
        return RedirectResponse("/runs")

    def page() -> Any:
        if index.is_file():
            return FileResponse(index, headers={"Cache-Control": "no-cache"})
        return HTMLResponse(NOT_BUILT)

    for path in APP_ROUTES:
        app.add_api_route(path, page, methods=["GET"], include_in_schema=False)

    @app.get("/runs/{run}", include_in_schema=False)
    def run_page(run: str) -> RedirectResponse:
        # the address a user writes for a run's page: the app's is /runs?run=RUN
        return RedirectResponse(f"/runs?{urlencode({'run': run})}")
