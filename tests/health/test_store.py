"""Findings in a real SQLite index: the indexer hook, listing, thresholds, re-evaluation."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, func, select

from runwatch.health import store as health_store
from runwatch.health.thresholds import ThresholdError
from runwatch.ingest import ingest_records
from runwatch.ingest.indexer import Indexer
from runwatch.store import queries as q
from runwatch.store import schema as s
from tests.support import write_manifest
from tests.support.cli import run_cli


def write_run(runs: Path, name: str, method: str, lines: list[dict[str, Any]],
              phase: str = "RUNNING", config: str = "") -> Path:
    run = write_manifest(runs / name, project="p", method=method)
    (run / "events.jsonl").write_text(json.dumps({"ts": 1e9, "seq": 0, "phase": phase}) + "\n",
                                      encoding="utf-8")
    if config:
        (run / "config.yaml").write_text(config, encoding="utf-8")
    append(run, lines, 0)
    return run


def append(run: Path, lines: list[dict[str, Any]], first_seq: int) -> None:
    with open(run / "metrics.jsonl", "a", encoding="utf-8") as fh:
        for i, line in enumerate(lines):
            fh.write(json.dumps({"seq": first_seq + i, "ts": 1e9 + 10 * line["step"], **line})
                     + "\n")


def steps(a: int, b: int, **values: float) -> list[dict[str, Any]]:
    return [{"step": i, **values} for i in range(a, b)]


def index(engine: Engine, runs: Path) -> None:
    Indexer(engine, runs, hooks=[health_store.on_metrics]).index_once()


def run_pk(engine: Engine, name: str) -> int:
    with engine.connect() as conn:
        return int(q.resolve_run(conn, name).pk)


def listing(engine: Engine, name: str, now: float | None = None) -> list[dict[str, Any]]:
    with engine.connect() as conn:
        return health_store.health_for_run(conn, run_pk(engine, name), now=now)


def test_hook_opens_then_updates_then_resolves_one_row(engine: Engine, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    run = write_run(runs, "r", "grpo", steps(0, 20, truncated_ratio=0.5))
    index(engine, runs)
    (f,) = [x for x in listing(engine, "r", now=0) if x["rule_id"] == "grpo.truncation"]
    assert f["status"] == "open" and f["last_step"] == 19 and f["evidence"]["max"] == 0.5
    append(run, steps(20, 25, truncated_ratio=0.7), 20)
    index(engine, runs)
    (g,) = [x for x in listing(engine, "r", now=0) if x["rule_id"] == "grpo.truncation"]
    assert g["id"] == f["id"] and g["last_step"] == 24 and g["evidence"]["max"] == 0.7
    append(run, steps(25, 40, truncated_ratio=0.1), 25)
    index(engine, runs)
    (h,) = [x for x in listing(engine, "r", now=0) if x["rule_id"] == "grpo.truncation"]
    assert h["id"] == f["id"] and h["status"] == "resolved"
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(s.findings)).scalar() == 1


def test_findings_are_listed_worst_first(engine: Engine, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    lines = steps(0, 30, truncated_ratio=0.5, grad_clip_factor=0.5, loss=1.0)
    lines[3]["loss"] = float("nan")
    write_run(runs, "r", "grpo", lines)
    index(engine, runs)
    found = listing(engine, "r", now=0)
    assert [f["severity"] for f in found][:1] == ["warning"]  # open before resolved
    assert found[-1]["rule_id"] == "metric.non_finite" and found[-1]["status"] == "resolved"
    for f in found:
        assert {"first_step", "last_step", "message", "advice", "evidence"} <= f.keys()


def test_stall_is_live_for_running_runs_only(engine: Engine, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    write_run(runs, "live", "sft", steps(0, 10, loss=1.0))
    write_run(runs, "done", "sft", steps(0, 10, loss=1.0), phase="SUCCEEDED")
    index(engine, runs)
    late = 1e9 + 90 + 7200
    stalled = [f for f in listing(engine, "live", now=late) if f["rule_id"] == "run.stalled"]
    assert stalled and stalled[0]["id"] is None and stalled[0]["last_step"] == 9
    assert not [f for f in listing(engine, "live", now=1e9 + 100) if f["rule_id"] == "run.stalled"]
    assert not [f for f in listing(engine, "done", now=late) if f["rule_id"] == "run.stalled"]


@pytest.mark.parametrize(("min_seconds", "stalled"), [(10, True), (1e12, False)])
def test_a_what_if_judges_a_stall_by_its_overrides(
        engine: Engine, db_url: str, tmp_path: Path, min_seconds: float, stalled: bool) -> None:
    """`runs health --thresholds FILE` said nothing of a silent run's stall, whatever the
    file set for run.stalled (found in a trial): the stall is judged when findings are
    read, which the what-if skipped."""
    runs = tmp_path / "runs"
    write_run(runs, "live", "sft", steps(0, 10, loss=1.0))  # silent since 2001
    index(engine, runs)
    overrides = tmp_path / "stall.yaml"
    overrides.write_text(f"rules:\n  run.stalled: {{min_seconds: {min_seconds}}}\n")
    said = run_cli("runs", "health", "live", "--dir", str(runs), "--db", db_url,
                   "--thresholds", str(overrides), "-o", "json")
    found = [f["rule_id"] for f in json.loads(said.stdout)["findings"]]
    assert ("run.stalled" in found) is stalled, found


def test_config_budgets_reach_the_rules(engine: Engine, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    write_run(runs, "r", "grpo", steps(0, 20, mean_sampled_response_length=250.0),
              config="sampling:\n  max_sample_tokens: 256\n")
    index(engine, runs)
    assert "grpo.length_at_budget" in {f["rule_id"] for f in listing(engine, "r", now=0)}


def test_project_thresholds_reevaluate(engine: Engine, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    write_run(runs, "r", "grpo", steps(0, 20, truncated_ratio=0.4))
    index(engine, runs)
    assert "grpo.truncation" in {f["rule_id"] for f in listing(engine, "r", now=0)}
    with engine.begin() as conn:
        health_store.set_thresholds(conn, "p", {"rules": {"grpo.truncation": {"above": 0.5}}})
        assert health_store.get_thresholds(conn, "p").rules["grpo.truncation"]["above"] == 0.5
        health_store.ensure_current(conn, run_pk(engine, "r"))
    assert "grpo.truncation" not in {f["rule_id"] for f in listing(engine, "r", now=0)}
    with engine.begin() as conn, pytest.raises(ThresholdError):
        health_store.set_thresholds(conn, "p", {"rules": {"grpo.truncation": {"x": 1}}})


def test_ensure_current_catches_up_without_the_hook(engine: Engine, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    write_run(runs, "r", "grpo", steps(0, 20, truncated_ratio=0.5))
    Indexer(engine, runs).index_once()  # no health hook
    assert listing(engine, "r", now=0) == []
    with engine.begin() as conn:
        health_store.ensure_current(conn, run_pk(engine, "r"))
        health_store.ensure_current(conn, run_pk(engine, "r"))  # nothing new: no change
    assert [f["rule_id"] for f in listing(engine, "r", now=0)] == ["grpo.truncation"]


def test_hook_is_idempotent_on_replayed_records(engine: Engine, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    write_run(runs, "r", "grpo", steps(0, 20, truncated_ratio=0.5))
    index(engine, runs)
    records = [{"seq": i, "step": i, "ts": time.time(), "truncated_ratio": 0.5}
               for i in range(20)]
    with engine.begin() as conn:
        # sent again (as over HTTP): nothing is stored, and health sees nothing new
        replayed = ingest_records(conn, run_pk(engine, "r"), "metrics.jsonl", records)
        assert replayed.rows == 0 and len(replayed.points["truncated_ratio"][0]) == 20
        health_store.on_metrics(conn, run_pk(engine, "r"), replayed.points)
    (f,) = listing(engine, "r", now=0)
    assert f["last_step"] == 19
