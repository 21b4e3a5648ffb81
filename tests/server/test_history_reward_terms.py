"""GET /api/runs/{run}/history?reward_terms=true: each row of a page carries the step's
reward terms (per split, the mean of each over its rollouts), the same `runs metrics`
reports; without it a page is as it was, and reads no rollouts."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Engine

from runwatch.ingest import Indexer
from runwatch.server.app import create_app
from tests.cli.test_metrics_reward_terms import EXPECTED, rl_run

from .apiclient import Api


def test_history_pages_carry_reward_terms(engine: Engine, runs_dir: Path) -> None:
    rl_run(runs_dir)
    Indexer(engine, runs_dir).index_once()
    api = Api(create_app(engine, runs_dir=runs_dir))
    plain = api.ok("/api/runs/rl/history")
    assert [r["step"] for r in plain["rows"]] == [0, 1, 2]
    assert all(set(r) == {"step", "values"} for r in plain["rows"])

    first = api.ok("/api/runs/rl/history", params={"reward_terms": "true", "limit": 2})
    assert {r["step"]: r["reward_terms"] for r in first["rows"]} == EXPECTED
    assert first["rows"][1]["values"] == {"grad_norm": 1.0, "reward_mean": 0.1}
    last = api.ok("/api/runs/rl/history", params={"reward_terms": "true", "limit": 2,
                                                   "after": first["next_cursor"]})
    assert last["rows"] == [{"step": 2, "values": {"grad_norm": 1.0, "reward_mean": 0.2},
                             "reward_terms": {}}]
    latest = api.ok("/api/runs/rl/history", params={"reward_terms": "true", "limit": 1,
                                                     "order": "latest", "key": "grad_norm"})
    assert latest["rows"][0]["reward_terms"] == {}

    row = api.ok("/openapi.json")["components"]["schemas"]["HistoryRow"]["properties"]
    assert "reward_terms" in row
