"""GET /api/overlay on the real server over HTTP (SQLite and PostgreSQL): several runs'
list fields, keys, cursors and the series of the keys its selectors pick in one answer,
equal to what /api/runs, /api/runs/{run}/metrics/keys and /api/series answer one by one;
a run it cannot read is listed as missing, with the error its own request gets. And the
compare view's report request refuses reinforcement runs without reading their series,
and reads and saves a supervised pair's through the saved compared series."""

from __future__ import annotations

import gc
import json
import math
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine, text

from runwatch.ingest import Indexer
from runwatch.rundir import format as fmt
from runwatch.server.app import create_app
from runwatch.server.runner import Runner
from runwatch.server.series_cache import SeriesCache
from runwatch.server.warm import warm_up
from runwatch.store.db import open_engine
from tests.support import write_run
from tests.support.wait import DEADLINE_S, wait_for

from .apiclient import Api, assert_error

ALPHA = {"loss": 1.0, "lr": 1e-3, "reward_std": 0.5, "timing/gen_s": 2.0, "other": 7.0}
BETA = {"train/loss": 2.0, "learning_rate": 2e-3, "train/reward_std": 0.7,
        "timing/gen_s": 3.0, "timing/train_s": 4.0}
SELECT: dict[str, Any] = {"role": ["train_loss", "learning_rate"], "name": ["reward_std"],
                          "prefix": ["timing/"], "key": ["other"]}


def records(keys: dict[str, float], steps: range) -> list[dict[str, Any]]:
    return [{"seq": i, "ts": 1.7e9 + i, "step": step,
             **{k: v + math.sin(step / 7.0) for k, v in keys.items()}}
            for i, step in enumerate(steps)]


def ended_run(runs_dir: Path, name: str, keys: dict[str, float], steps: range) -> None:
    """A run folder of `keys` over `steps` that has ended: its answers do not change with
    the time they are read at (a running run's duration does)."""
    run = write_run(runs_dir, name, records(keys, steps))
    (run / fmt.EVENTS).write_text(json.dumps({"seq": 0, "ts": 1.7e9, "phase": "RUNNING"})
                                  + "\n" + json.dumps({"seq": 1, "ts": 1.7e9 + len(steps),
                                                       "phase": "SUCCEEDED"}) + "\n",
                                  encoding="utf-8")


@pytest.fixture
def client(server: Runner, runs_dir: Path) -> httpx.Client:
    """The server, once it indexed run alpha (300 steps) and run beta (every other step
    up to 1000): long enough for their series to be read from step summaries."""
    ended_run(runs_dir, "alpha", ALPHA, range(300))
    ended_run(runs_dir, "beta", BETA, range(0, 1000, 2))
    http = httpx.Client(base_url=server.url, timeout=DEADLINE_S)

    def indexed() -> bool:
        runs = http.get("/api/runs").json()["runs"]
        points = {r["name"]: sum(k["count"] for k in http.get(
            f"/api/runs/{r['run_id']}/metrics/keys").json()["keys"]) for r in runs}
        # a run is shown ended once its points are stored: the end is what comes last
        return (points == {"alpha": 300 * len(ALPHA), "beta": 500 * len(BETA)}
                and all(r["status"] == "SUCCEEDED" for r in runs))

    wait_for(indexed, what="both runs indexed, to their end")
    return http


def test_one_answer_holds_what_the_list_keys_and_series_requests_give(
        client: httpx.Client) -> None:
    listed = {r["name"]: r for r in client.get("/api/runs").json()["runs"]}
    ids = [listed["alpha"]["run_id"], listed["beta"]["run_id"]]
    got = client.get("/api/overlay", params={"run": ["alpha", ids[1]], **SELECT,
                                             "points": 50}).raise_for_status().json()
    assert got["missing"] == []
    assert [r["ident"] for r in got["runs"]] == ["alpha", ids[1]]
    for item, run_id in zip(got["runs"], ids, strict=True):
        keys = client.get(f"/api/runs/{run_id}/metrics/keys").json()
        assert item["run"] == listed[item["run"]["name"]]
        assert item["keys"] == keys["keys"] and item["cursor"] == keys["cursor"]
    picked = {(s["run"], s["key"]) for s in got["series"]}
    assert picked == {(ids[0], k) for k in ALPHA} | {(ids[1], k) for k in BETA}
    # /api/series of every key for both runs: a run's keys the other lacks come back
    # empty there and leave the shared edges as they are
    every = client.get("/api/series", params={"run": ids, "key": sorted({*ALPHA, *BETA}),
                                              "points": 50}).raise_for_status().json()
    assert got["edges"] == every["edges"] and every["edges"]["buckets"] <= 50
    one_by_one = [s for s in every["series"] if (s["run"], s["key"]) in picked]
    assert sorted(got["series"], key=lambda s: (s["run"], s["key"])) == sorted(
        one_by_one, key=lambda s: (s["run"], s["key"]))
    assert all(not s["full"] and s["min"] for s in got["series"]), "downsampled, with bands"


def test_without_bands_the_series_have_no_min_or_max(client: httpx.Client) -> None:
    params = {"run": ["alpha", "beta"], **SELECT, "points": 50}
    banded = client.get("/api/overlay", params=params).json()
    plain = client.get("/api/overlay", params={**params, "bands": "false"}).json()
    for s in banded["series"]:
        del s["min"], s["max"]
    assert plain == banded


def test_a_run_it_cannot_read_is_missing_and_none_is_404(client: httpx.Client) -> None:
    got = client.get("/api/overlay", params={"run": ["alpha", "no-such-run"], **SELECT})
    body = got.raise_for_status().json()
    alone = assert_error(client.get("/api/runs/no-such-run"), 404)
    assert body["missing"] == [{"ident": "no-such-run", "status": 404,
                                "error": alone["error"]}]
    assert [r["run"]["name"] for r in body["runs"]] == ["alpha"]
    assert {s["key"] for s in body["series"]} == set(ALPHA)
    assert assert_error(client.get("/api/overlay", params={"run": "no-such-run"}),
                        404)["error"] == alone["error"]


def test_bad_selectors_are_400(client: httpx.Client) -> None:
    assert "no role" in assert_error(client.get("/api/overlay", params={
        "run": "alpha", "role": "train_loss_typo"}), 400)["error"]
    assert_error(client.get("/api/overlay"), 400)
    # a run named twice is answered twice but its series are sent once
    twice = client.get("/api/overlay", params={"run": ["alpha", "alpha"], "key": "loss"}).json()
    assert len(twice["runs"]) == 2 and len(twice["series"]) == 1
    # more runs than one answer holds are refused, not dropped unsaid
    many = assert_error(client.get("/api/overlay", params={"run": ["alpha"] * 401}), 400)
    assert "at most 400 runs" in many["error"]


def test_the_report_refuses_reinforcement_runs_without_reading_a_series(
        engine: Engine, runs_dir: Path, tmp_path: Path) -> None:
    for name, method in (("g1", "grpo"), ("g2", "grpo"), ("s1", "sft"), ("s2", "sft")):
        write_run(runs_dir, name, records({"loss": 1.0, "grad_norm": 2.0}, range(300)),
                  method=method)
    Indexer(engine, runs_dir).index_once()
    cache = SeriesCache(disk_dir=tmp_path / "index.series")
    cache.compared.min_points = 1  # every series the report reads is saved (300 points)
    saved = tmp_path / "index.compare"
    api = Api(create_app(engine, runs_dir=runs_dir, cache=cache))
    refused = assert_error(api.get("/api/compare", params={"run": "g1", "baseline": "g2"}), 400)
    assert "reinforcement run (grpo)" in refused["error"]
    assert not saved.exists() and cache.held_points == 0, (
        "no series was read for a report that is refused")
    answered = api.get("/api/compare", params={"run": "s1", "baseline": "s2"})
    assert answered.status_code == 200 and answered.json()["compared_steps"] == 300
    assert len(list(saved.glob("*.npz"))) == 4, "a report's four series are read and saved"


def test_a_warmed_app_answered_one_overlay_and_kept_nothing_of_it(engine: Engine,
                                                                   runs_dir: Path) -> None:
    """create_app(warm=True) serves one overlay before its first request (200), straight
    to the router: nothing cached, no request timed in /metrics, the process's objects
    frozen out of the collector's reach; the answers are the ones an app that was not
    warmed gives."""
    ended_run(runs_dir, "beta", BETA, range(0, 1000, 2))
    Indexer(engine, runs_dir).index_once()
    assert warm_up(create_app(engine, runs_dir=runs_dir), engine) == 200
    cache = SeriesCache()
    warm = create_app(engine, runs_dir=runs_dir, cache=cache, warm=True)
    assert warm.middleware_stack is not None and cache.held_points == 0
    assert gc.get_freeze_count() > 0
    assert "/api/overlay" not in Api(warm).get("/metrics").text
    params = {"run": "beta", **SELECT}
    assert Api(warm).ok("/api/overlay", params=params) == Api(
        create_app(engine, runs_dir=runs_dir)).ok("/api/overlay", params=params)


def test_a_warm_up_over_an_index_it_cannot_read_still_starts_the_server(
        tmp_path: Path) -> None:
    """The warm-up's own lookup failing (here: a table the index lacks) leaves the server
    to start and its requests to say what is wrong; it stopped create_app."""
    broken = open_engine(tmp_path / "index.db")
    with broken.begin() as conn:
        conn.execute(text("DROP TABLE metric_summary_state"))
    app = create_app(broken, warm=True)
    assert app.middleware_stack is not None
    broken.dispose()
