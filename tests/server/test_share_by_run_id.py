"""A share link reads its run by the run's id alone, as docs/api.md says: by its name, or
a prefix, it is refused, and the refusal names the route by the id.

Found in a trial (trial37, defect 4): api.md said `{run}` is an id, a name or a prefix,
and a share cookie's `GET /api/runs/{name}` was a bare 403."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

from runwatch.server import share
from runwatch.server.runner import Runner, free_port
from tests.support import http, wait_for

from .apiclient import MakeRun, assert_error

TOKEN = "Kq3v-9xTz_2mLw8RbY-byid"
API_DOC = Path(__file__).resolve().parents[2] / "docs" / "api.md"


@pytest.fixture
def served(engine: Engine, runs_dir: Path, make_run: MakeRun) -> Iterator[tuple[Runner, str]]:
    run_id = make_run("s1", steps=3)
    with Runner(engine, runs_dir=runs_dir, port=free_port(), token=TOKEN, prewarm=False,
                interval=0.05, warm=False) as srv:
        with http.client(base_url=srv.url, headers={"Authorization": f"Bearer {TOKEN}"}) as c:
            wait_for(lambda: c.get("/api/runs/s1").status_code == 200,
                     what="the server to index s1")
        yield srv, run_id


def test_a_share_by_the_run_s_name_is_told_the_route_by_its_id(
        served: tuple[Runner, str], runs_dir: Path) -> None:
    srv, run_id = served
    _, credential = share.new_share(runs_dir, run_id, 3600)
    with http.client(base_url=srv.url, cookies={share.COOKIE: credential}) as client:
        assert client.get(f"/api/runs/{run_id}").status_code == 200
        for ref in ("s1", run_id[:8]):
            said = assert_error(client.get(f"/api/runs/{ref}/logs"), 403)["error"]
            assert f"GET /api/runs/{run_id}/logs" in said and "name" in said, said
            assert "s1" not in said.replace(f"/api/runs/{run_id}", ""), said
        assert client.get(f"/api/runs/{run_id}/logs").status_code == 200
    shares = " ".join(API_DOC.read_text().split("## Share links", 1)[1].split()[:200])
    assert "never its name or a prefix" in shares, shares
