"""Metric routes: keys, downsampled series with shared edges, zoom to full resolution, history."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from .apiclient import Api, MakeRun, assert_error


def _two_runs(make_run: MakeRun, index: Callable[[], None]) -> None:
    make_run("long", steps=3000, metrics=lambda i: {"loss": float(i % 100), "lr": 1e-3})
    make_run("short", steps=1200, metrics=lambda i: {"loss": float(i)})
    index()


def test_keys_list_every_metric(api: Api, make_run: MakeRun, index: Callable[[], None]) -> None:
    make_run("k", steps=5, metrics=lambda i: {"loss": 1.0, "fb/loss/ratio/mean": 1.0})
    index()
    keys = {k["key"]: k for k in api.ok("/api/runs/k/metrics/keys")["keys"]}
    assert set(keys) == {"loss", "fb/loss/ratio/mean"}
    assert keys["loss"]["count"] == 5 and keys["loss"]["last_step"] == 4


def test_series_is_downsampled_with_min_max_last(api: Api, make_run: MakeRun,
                                                 index: Callable[[], None]) -> None:
    _two_runs(make_run, index)
    body = api.ok("/api/series", params={"run": "long", "key": "loss", "points": 30})
    (s,) = body["series"]
    # over the whole run, buckets of a power-of-two width: at most the budget, over half
    buckets = body["edges"]["buckets"]
    assert 15 < buckets <= 30 and body["edges"]["width"] == 128
    assert not s["full"] and s["count"] == 3000 and len(s["step"]) == buckets
    assert len(s["min"]) == len(s["max"]) == len(s["value"]) == buckets
    assert s["step"][-1] == 2999 and s["value"][-1] == 99.0
    assert all(lo <= v <= hi for lo, v, hi in zip(s["min"], s["value"], s["max"], strict=True))


def test_runs_in_one_request_share_bucket_edges(api: Api, make_run: MakeRun,
                                                index: Callable[[], None]) -> None:
    _two_runs(make_run, index)
    body = api.ok("/api/series", params=[("run", "long"), ("run", "short"), ("key", "loss"),
                                         ("points", "30")])
    edges = body["edges"]
    assert edges["lo"] == 0 and edges["hi"] >= 2999 and 15 < edges["buckets"] <= 30
    long_, short = body["series"]
    width = edges["width"]
    # the short run's buckets are the first buckets of the long run's grid
    assert [int(s // width) for s in short["step"]] == [int(s // width)
                                                       for s in long_["step"]][: len(short["step"])]


def test_zooming_in_returns_full_resolution(api: Api, make_run: MakeRun,
                                            index: Callable[[], None]) -> None:
    _two_runs(make_run, index)
    body = api.ok("/api/runs/long/series", params={"key": "loss", "points": 100,
                                                   "lo": 1000, "hi": 1049})
    (s,) = body["series"]
    assert s["full"] and s["step"] == list(range(1000, 1050))


def test_missing_key_gives_an_empty_series(api: Api, make_run: MakeRun,
                                           index: Callable[[], None]) -> None:
    _two_runs(make_run, index)
    body = api.ok("/api/series", params=[("run", "short"), ("key", "lr")])
    assert body["series"][0]["count"] == 0


def test_history_pages_through_every_step(api: Api, make_run: MakeRun,
                                          index: Callable[[], None]) -> None:
    make_run("h", steps=120, metrics=lambda i: {"loss": float(i)} if i % 2 else
             {"loss": float(i) if i != 40 else float("nan"), "val/loss": float(-i)})
    index()
    seen: list[int] = []
    page = api.ok("/api/runs/h/history", params={"limit": 50})
    assert page["total"] == 120 and set(page["columns"]) == {"loss", "val/loss"}
    for _ in range(5):  # 120 rows are 3 pages of 50
        seen += [r["step"] for r in page["rows"]]
        if not page["next_cursor"]:
            break
        page = api.ok("/api/runs/h/history", params={"limit": 50, "after": page["next_cursor"]})
    else:
        pytest.fail(f"still paging after 5 pages, at step {seen[-1]}")
    assert seen == list(range(120))
    # a key with no point at a step is left out; a non-finite value is null (the History
    # table showed both as "—", found in a trial)
    assert page["rows"][-1]["values"] == {"loss": 119.0}
    at_40 = api.ok("/api/runs/h/history", params={"limit": 1, "after": "39"})["rows"][0]
    assert at_40 == {"step": 40, "values": {"loss": None, "val/loss": -40.0}}
    back = api.ok("/api/runs/h/history", params={"limit": 50, "before": page["prev_cursor"]})
    assert back["rows"][-1]["step"] == 99
    latest = api.ok("/api/runs/h/history", params={"limit": 10, "order": "latest"})
    assert latest["rows"][-1]["step"] == 119


def test_bad_metric_requests(api: Api, make_run: MakeRun, index: Callable[[], None]) -> None:
    _two_runs(make_run, index)
    assert_error(api.get("/api/series", params={"key": "loss"}), 400)
    assert_error(api.get("/api/series", params={"run": "long"}), 400)
    assert_error(api.get("/api/series", params={"run": "nope", "key": "loss"}), 404)
    assert_error(api.get("/api/series", params={"run": "long", "key": "loss", "lo": 9, "hi": 1}))
    assert_error(api.get("/api/series", params={"run": "long", "key": "loss", "points": 1}))
    assert_error(api.get("/api/runs/long/history", params={"after": "abc"}), 400)
