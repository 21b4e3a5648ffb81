"""Share links over real HTTP on a server with a token: a link reads its own run's page
and nothing else, and stops working when it expires, is tampered with or is revoked."""

from __future__ import annotations

import base64
import string
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine
from typer.testing import CliRunner

from runwatch.cli.main import app as cli
from runwatch.server import share
from runwatch.server.runner import Runner, free_port
from tests.support import http

from .apiclient import MakeRun, assert_error, read_events

TOKEN = "Kq3v-9xTz_2mLw8RbY-share"
# the GET routes a share of run R may read (R is put in for {run}); every other route of
# the OpenAPI schema must refuse the share cookie
ALLOWED = {"/api/runs/{run}", "/api/runs/{run}/metrics/keys", "/api/runs/{run}/series",
           "/api/runs/{run}/history", "/api/runs/{run}/reward-terms", "/api/runs/{run}/samples",
           "/api/runs/{run}/checkpoints", "/api/runs/{run}/logs", "/api/runs/{run}/health",
           "/api/runs/{run}/events", "/api/runs/{run}/stream", "/api/series", "/api/overlay"}


@pytest.fixture
def runs(make_run: MakeRun) -> tuple[str, str]:
    return make_run("shared", steps=3), make_run("private", steps=3)


@pytest.fixture
def server(engine: Engine, runs_dir: Path, runs: tuple[str, str]) -> Iterator[Runner]:
    with Runner(engine, runs_dir=runs_dir, port=free_port(), token=TOKEN, prewarm=False,
                interval=0.05, warm=False) as srv:
        _wait_for_runs(srv, 2)
        yield srv


def _wait_for_runs(srv: Runner, count: int) -> None:
    with http.client(base_url=srv.url, timeout=10,
                     headers={"Authorization": f"Bearer {TOKEN}"}) as owner:
        deadline = time.monotonic() + 20
        while len(owner.get("/api/runs").json()["runs"]) < count:
            assert time.monotonic() < deadline, "the server did not index the runs"
            time.sleep(0.05)


def _client(srv: Runner, credential: str | None = None) -> httpx.Client:
    cookies = {share.COOKIE: credential} if credential else None
    return http.client(base_url=srv.url, timeout=10, cookies=cookies)


def _link(runs_dir: Path, run_id: str, seconds: int = 3600) -> tuple[share.Share, str]:
    return share.new_share(runs_dir, run_id, seconds)


def _get(client: httpx.Client, path: str, run: str, **kw: Any) -> httpx.Response:
    params = ({"run": run, "key": "loss"} if path in ("/api/series", "/api/overlay")
              else {"key": "loss"})
    if path.endswith("/stream"):
        with client.stream("GET", path.replace("{run}", run), **kw) as resp:
            resp.read() if resp.status_code != 200 else None
            return resp
    return client.get(path.replace("{run}", run), params=params, **kw)


def test_a_link_reads_its_run_and_nothing_else(server: Runner, runs_dir: Path,
                                               runs: tuple[str, str]) -> None:
    mine, other = runs
    _, credential = _link(runs_dir, mine)
    with _client(server) as client:
        landing = client.get(f"/share/{credential}")
        assert landing.status_code == 303
        assert landing.headers["location"] == f"/runs?run={mine}&shared=1"
        cookie = landing.headers["set-cookie"]
        assert cookie.startswith(f"{share.COOKIE}={credential}")
        assert "HttpOnly" in cookie and "samesite=lax" in cookie.lower()
        assert client.get("/runs", params={"run": mine}).status_code == 200
        assert client.get(f"/api/runs/{mine}").json()["run"]["run_id"] == mine
        assert client.get(f"/api/runs/{mine}/history").status_code == 200
        series = client.get("/api/series", params={"run": mine, "key": "loss"}).json()
        assert series["ok"] and series["series"]
        for path in sorted(ALLOWED):
            assert _get(client, path, mine).status_code not in (401, 403), path
            # the same route of another run, or of this run by a prefix or its name
            for ref in (other, mine[:6], "shared"):
                assert_error(_get(client, path, ref), 403)
        assert_error(client.get("/api/series", params=[("run", mine), ("run", other),
                                                        ("key", "loss")]), 403)
        assert_error(client.get("/api/series", params={"key": "loss"}), 403)
        # the run page's one request for keys and series reads the shared run alone
        overlay = client.get("/api/overlay", params={"run": mine, "role": "train_loss"}).json()
        assert [r["run"]["run_id"] for r in overlay["runs"]] == [mine]
        assert_error(client.get("/api/overlay", params=[("run", mine), ("run", other)]), 403)
        assert_error(client.get("/api/overlay", params={"run": "shared"}), 403)
        owner = {"Authorization": f"Bearer {TOKEN}"}
        spec = client.get("/openapi.json", headers=owner).json()["paths"]
        walked = 0
        for path, ops in spec.items():
            for method in ops:
                if method == "get" and path in ALLOWED:
                    continue
                url = path.replace("{run}", mine).replace("{worker}", "w1")
                body: dict[str, Any] | None = {} if method in ("post", "put", "patch") else None
                assert_error(client.request(method.upper(), url, json=body), 403)
                walked += 1
        assert walked >= 10 and any(p == "/api/runs" for p in spec)
        for path in ("/api/runs", "/api/projects", "/api/stream/runs", "/openapi.json",
                     "/api/docs", "/api/server", "/compare", "/table", "/new", "/resources"):
            assert_error(client.get(path), 403)
        # the owner's token still reads everything, share cookie or not
        assert client.get("/api/runs", headers=owner).status_code == 200


def test_writes_with_the_share_are_refused_and_change_nothing(
        server: Runner, runs_dir: Path, runs: tuple[str, str]) -> None:
    mine, _ = runs
    _, credential = _link(runs_dir, mine)
    with _client(server, credential) as client:
        batch = {"run_id": "x1", "file": "events.jsonl",
                 "records": [{"seq": 0, "ts": 1.0, "phase": "FAILED"}]}
        assert_error(client.post("/api/ingest", json=batch), 403)
        assert_error(client.post(f"/api/runs/{mine}/cancel", json={}), 403)
        assert_error(client.post("/api/jobs", json={"argv": ["true"], "name": "j"}), 403)
        assert client.get(f"/api/runs/{mine}").json()["run"]["status"] == "SUCCEEDED"
    owner = http.get(f"{server.url}/api/runs", headers={"Authorization": f"Bearer {TOKEN}"})
    assert len(owner.json()["runs"]) == 2


def _tampered(credential: str, part: int, value: str) -> str:
    parts = credential.split(".")
    parts[part] = value
    return ".".join(parts)


def _b64(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def test_expired_tampered_and_foreign_links_are_refused(server: Runner, runs_dir: Path,
                                                        runs: tuple[str, str]) -> None:
    mine, other = runs
    key = share.secret(runs_dir, create=True)
    assert key is not None
    expired = share.sign(key, share.Share("abcdefgh12", mine, int(time.time()) - 1))
    _, good = _link(runs_dir, mine)
    later = str(int(good.split(".")[1]) + 86400)
    bad = {
        "expired": expired,
        "run id": _tampered(good, 2, _b64(other)),
        "expiry": _tampered(good, 1, later),
        "share id": _tampered(good, 0, "zzzzzzzzzzzz"),
        "signature": _tampered(good, 3, _b64("x" * 32)),
        "other key": share.sign(b"k" * 64, share.Share("abcdefgh12", mine,
                                                       int(time.time()) + 3600)),
        "malformed": "not-a-link",
    }
    for what, credential in bad.items():
        with _client(server) as client:
            landed = client.get(f"/share/{credential}")
            assert_error(landed, 401)
            assert "set-cookie" not in landed.headers, what
        with _client(server, credential) as client:
            for path in (f"/api/runs/{mine}", f"/api/runs/{other}", "/runs"):
                assert_error(client.get(path), 401)
    with _client(server, good) as client:
        assert client.get(f"/api/runs/{mine}").status_code == 200


def test_a_revoked_link_is_refused_at_once(server: Runner, runs_dir: Path,
                                           runs: tuple[str, str]) -> None:
    mine, _ = runs
    sh, credential = _link(runs_dir, mine)
    _, kept = _link(runs_dir, mine)
    link = f"{server.url}/share/{credential}"
    with http.client(timeout=10, follow_redirects=True) as client:
        assert client.get(link).status_code == 200
        assert client.get(f"{server.url}/api/runs/{mine}").status_code == 200
        result = CliRunner().invoke(cli, ["runs", "share", "--dir", str(runs_dir),
                                          "--revoke", link])
        assert result.exit_code == 0, result.output
        assert sh.share_id in result.output
        assert_error(client.get(f"{server.url}/api/runs/{mine}"), 401)
        assert_error(client.get(link), 401)
    with _client(server, kept) as other_link:
        assert other_link.get(f"/api/runs/{mine}").status_code == 200


def test_a_tampered_signature_is_judged_before_revocation_and_expiry(
        server: Runner, runs_dir: Path, runs: tuple[str, str]) -> None:
    """The signature's last character carries bits that base64 decoding drops: another
    character there decoded to the same signature, so a tampered revoked link said
    "revoked" (and a tampered good link worked). Every changed character is a bad
    signature, whatever else is wrong with the link."""
    mine, _ = runs
    alphabet = string.ascii_uppercase + string.ascii_lowercase + string.digits + "-_"
    revoked, credential = _link(runs_dir, mine)
    share.revoke(runs_dir, revoked.share_id)
    key = share.secret(runs_dir)
    assert key is not None
    expired = share.sign(key, share.Share("abcdefgh12", mine, int(time.time()) - 1))
    _, good = _link(runs_dir, mine)
    for link in (credential, expired, good):
        sig = link.rsplit(".", 1)[1]
        for ch in alphabet.replace(sig[-1], ""):
            tampered = _tampered(link, 3, sig[:-1] + ch)
            with pytest.raises(share.ShareError, match="signature does not match"):
                share.verify(key, tampered, share.revoked_ids(runs_dir))
        # the one the decoding took as the same, over HTTP as a reader meets it
        same_bytes = next(sig[:-1] + ch for ch in alphabet if ch != sig[-1]
                          and _unb64(sig[:-1] + ch) == _unb64(sig))
        with _client(server) as client:
            body = assert_error(client.get(f"/share/{_tampered(link, 3, same_bytes)}"), 401)
            assert "signature does not match" in body["error"], body
        with _client(server, _tampered(link, 3, same_bytes)) as client:
            body = assert_error(client.get(f"/api/runs/{mine}"), 401)
            assert "signature does not match" in body["error"], body


def test_a_live_stream_of_a_link_ends_once_the_link_is_revoked(
        server: Runner, runs_dir: Path, runs: tuple[str, str]) -> None:
    mine, _ = runs
    sh, credential = _link(runs_dir, mine)
    _, kept = _link(runs_dir, mine)
    with _client(server, credential) as client, _client(server, kept) as other:
        with client.stream("GET", f"/api/runs/{mine}/stream") as gone, \
                other.stream("GET", f"/api/runs/{mine}/stream") as running:
            assert gone.status_code == running.status_code == 200
            share.revoke(runs_dir, sh.share_id)
            lines = gone.iter_lines()
            events = read_events(lines, lambda ev: ev[-1]["event"] == "revoked")
            assert "revoked" in events[-1]["data"]["error"]
            assert list(lines) == []  # and the server ended it
        # the other link's stream was not ended: it still opens and reads
        assert other.get(f"/api/runs/{mine}").status_code == 200
        assert_error(client.get(f"/api/runs/{mine}/stream"), 401)


def test_the_cli_prints_a_link_that_works(server: Runner, runs_dir: Path, db_url: str,
                                          runs: tuple[str, str]) -> None:
    mine, other = runs
    db = db_url
    result = CliRunner().invoke(cli, ["runs", "share", "shared", "--expires", "2h", "--dir",
                                      str(runs_dir), "--db", db, "--server", server.url])
    assert result.exit_code == 0, result.output
    link = result.output.splitlines()[0]
    assert link.startswith(f"{server.url}/share/") and "shared" in result.output
    assert (runs_dir / share.KEY_FILE).stat().st_mode & 0o777 == 0o600
    with http.client(timeout=10, follow_redirects=True) as client:
        page = client.get(link)
        assert page.status_code == 200 and page.url.path == "/runs"
        assert page.url.params["run"] == mine
        detail = client.get(f"{server.url}/api/runs/{mine}").json()
        assert detail["run"]["name"] == "shared"
        assert_error(client.get(f"{server.url}/api/runs/{other}"), 403)
        assert_error(client.get(f"{server.url}/api/runs"), 403)
    expiry = share.parse(link.rsplit("/", 1)[1]).expires - time.time()
    assert 2 * 3600 - 60 < expiry <= 2 * 3600
    for bad in (["--expires", "0d"], ["--expires", "400d"], ["--expires", "soon"]):
        refused = CliRunner().invoke(cli, ["runs", "share", "shared", "--dir", str(runs_dir),
                                           "--db", db, *bad])
        assert refused.exit_code == 2 and "error" in refused.output
    # a zero is a number with a unit: what is wrong is that it is not positive
    for zero in ("0m", "0d"):
        refused = CliRunner().invoke(cli, ["runs", "share", "shared", "--dir", str(runs_dir),
                                           "--db", db, "--expires", zero])
        said = " ".join(refused.output.split())
        assert refused.exit_code == 2 and "must be positive" in said, said
        assert "give a number and m, h, d or w" not in said, said


def test_a_share_names_no_other_run_when_its_own_is_ambiguous(
        server: Runner, runs_dir: Path, make_run: MakeRun, runs: tuple[str, str]) -> None:
    mine, other = runs
    _, credential = _link(runs_dir, mine)
    with _client(server, credential) as client:
        assert client.get(f"/api/runs/{mine}").status_code == 200
        # a run named like the shared run's id: the API's lookup would answer 400 and list
        # both runs (ids and names) as candidates
        twin = make_run(mine, steps=1)
        owner = {"Authorization": f"Bearer {TOKEN}"}
        deadline = time.monotonic() + 20
        while len(client.get("/api/runs", headers=owner).json()["runs"]) < 3:
            assert time.monotonic() < deadline, "the server did not index the run"
            time.sleep(0.05)
        for path in (f"/api/runs/{mine}", f"/api/runs/{mine}/logs", f"/share/{credential}"):
            refused = client.get(path)
            body = assert_error(refused, 404)
            assert twin not in refused.text and other not in refused.text, body


def test_revoke_takes_an_id_and_the_cli_refuses_unclear_requests(runs_dir: Path) -> None:
    sh, credential = _link(runs_dir, "some-run-id")
    key = share.secret(runs_dir)
    assert key is not None and share.verify(key, credential, share.revoked_ids(runs_dir)) == sh
    runner = CliRunner()
    done = runner.invoke(cli, ["runs", "share", "--dir", str(runs_dir), "--revoke", sh.share_id,
                               "-o", "json"])
    assert done.exit_code == 0, done.output
    assert f'"revoked": "{sh.share_id}"' in done.output
    assert (runs_dir / share.REVOKED_FILE).stat().st_mode & 0o777 == 0o600
    with pytest.raises(share.ShareError, match="revoked"):
        share.verify(key, credential, share.revoked_ids(runs_dir))
    for args in (["--revoke", "x y"], ["--revoke", "a.b"], ["some-run", "--revoke", sh.share_id],
                 []):
        refused = runner.invoke(cli, ["runs", "share", "--dir", str(runs_dir), *args])
        assert refused.exit_code == 2 and "error" in refused.output, args


def test_a_key_that_is_a_symlink_is_refused_not_an_error(server: Runner, runs_dir: Path,
                                                          tmp_path: Path,
                                                          runs: tuple[str, str]) -> None:
    mine, _ = runs
    _, credential = _link(runs_dir, mine)
    key = runs_dir / share.KEY_FILE
    elsewhere = tmp_path / "key-elsewhere"
    elsewhere.write_bytes(key.read_bytes())
    key.unlink()
    key.symlink_to(elsewhere)
    with _client(server) as client:
        assert "cannot read its share key" in assert_error(
            client.get(f"/share/{credential}"), 401)["error"]
    with _client(server, credential) as client:
        assert_error(client.get(f"/api/runs/{mine}"), 401)


def test_a_link_reads_its_run_in_its_project_only(server: Runner, runs_dir: Path,
                                                  runs: tuple[str, str],
                                                  make_run: MakeRun) -> None:
    """A run of another project named like the shared run's id neither hides it nor shows."""
    mine, _ = runs
    decoy = make_run(mine, steps=1, project="elsewhere")
    _wait_for_runs(server, 3)
    _, credential = _link(runs_dir, mine)
    with http.client(base_url=server.url, timeout=10, follow_redirects=True) as client:
        assert client.get(f"/share/{credential}").url.path == "/runs"
        assert client.get(f"/api/runs/{mine}").json()["run"]["run_id"] == mine
        assert client.get(f"/api/runs/{mine}/history").status_code == 200
        assert_error(client.get(f"/api/runs/{decoy}"), 403)


def test_the_docs_name_every_route_a_share_reaches() -> None:
    """docs/share.md's table and docs/api.md's share section list what `share.allows` lets
    through (api.md left out /api/overlay)."""
    docs = Path(__file__).resolve().parents[2] / "docs"
    table = (docs / "share.md").read_text().split("**What the share reaches**")[1]
    table = table.split("Any other request")[0]
    api = (docs / "api.md").read_text().split("## Share links")[1].split("\n## ")[0]
    for text in (table, api):
        for path in ("/runs", "/assets/", "/api/runs/{run}", "/api/series", "/api/overlay"):
            assert f"`{path}" in text, (path, text)
    for route in share.RUN_ROUTES - {""}:
        assert f"`{route}`" in table or f"`/api/runs/{{run}}{route}`" in table, route
        assert f"`{route[1:]}`" in api, route
