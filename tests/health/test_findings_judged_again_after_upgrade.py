"""After an upgrade whose rule catalogue changed, the findings an older runwatch stored are
judged again with the new rules: by the server in the background (with or without a runs
folder, SQLite and PostgreSQL), by `runwatch runs health` on a run it reads, and page by
page over a large index. A finding the new rules find again keeps its id and opened time,
so the web app, the API and the CLI show one set, and never the old and the new mixed.

The index is left as an older runwatch leaves it: the run indexed and judged by today's
engine, then its engine state written back without this catalogue's mark and with a
fingerprint no catalogue gives, and its findings made the older set (one in its older
wording and opened long ago, one the newer rules do not give, one of theirs missing)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import orjson
from sqlalchemy import Engine, delete, insert, select, update

from runwatch.health import store as health_store
from runwatch.health.catchup import stale_runs, sweep
from runwatch.ingest.indexer import Indexer
from runwatch.server.runner import Runner, free_port
from runwatch.store import queries as q
from runwatch.store import schema as s
from tests.support import run_cli, sdk_run, wait_for
from tests.support.http import get

OPENED_LONG_AGO = 1_000_000.0


def grpo_run(runs: Path, name: str) -> str:
    """A finished GRPO run whose loss turns NaN at step 100 while its KL keeps rising: the
    rules find a non-finite loss (from step 100) and a KL that grows."""
    return sdk_run(runs, name, steps=120, method="grpo", project="p", metrics=lambda i: {
        "loss": math.nan if i >= 100 else 0.5, "reward": 0.1 + i * 0.005, "kl": 0.01 * i})


def index(engine: Engine, runs: Path) -> None:
    Indexer(engine, runs, hooks=[health_store.on_metrics],
            events_hooks=[health_store.on_events]).index_once()


def pk_of(engine: Engine, name: str) -> int:
    with engine.connect() as conn:
        return int(q.resolve_run(conn, name).pk)


def stored(engine: Engine, run_pk: int) -> dict[int, dict[str, Any]]:
    """The run's stored findings by id."""
    f = s.findings.c
    with engine.connect() as conn:
        rows = conn.execute(select(f.id, f.rule_id, f.first_step, f.message, f.opened_ts)
                            .where(f.run_pk == run_pk)).mappings().all()
    return {int(r["id"]): dict(r) for r in rows}


# The rule of the older set's finding that today's rules do not give on these runs.
DROPPED_RULE = "optim.grad_norm_spike"


def as_older_runwatch_left_it(engine: Engine, run_pk: int) -> dict[str, Any]:
    """Make the run's health what an older rule catalogue stored (see the module's
    docstring); returns `kept` (the id of the finding today's rules find again), `added`
    (the rule of one of today's findings the older set lacks) and `new` (today's findings
    as they were stored)."""
    now = stored(engine, run_pk)
    kept = next(i for i, f in now.items() if f["rule_id"] == "metric.non_finite")
    added = next(f["rule_id"] for f in now.values() if f["rule_id"] != "metric.non_finite")
    f, h = s.findings.c, s.health_state.c
    with engine.begin() as conn:
        conn.execute(update(s.findings).where(f.id == kept).values(
            message="loss was NaN at step 100.", last_step=100, opened_ts=OPENED_LONG_AGO,
            updated_ts=OPENED_LONG_AGO))
        conn.execute(delete(s.findings).where(f.run_pk == run_pk, f.id != kept))
        conn.execute(insert(s.findings).values(
            run_pk=run_pk, rule_id=DROPPED_RULE, severity="info", status="open",
            first_step=5, last_step=5, evidence=json.dumps({"metric": "grad_norm"}),
            message="an older rule's finding", advice="-", opened_ts=OPENED_LONG_AGO,
            updated_ts=OPENED_LONG_AGO))
        state = orjson.loads(conn.execute(select(h.state).where(h.run_pk == run_pk))
                             .scalar_one())
        state.pop("catalogue", None)
        state["fp"] = "0" * 16  # a fingerprint no catalogue gives: the state is stale
        conn.execute(update(s.health_state).where(h.run_pk == run_pk)
                     .values(state=orjson.dumps(state).decode()))
    return {"kept": kept, "added": added, "new": now}


def api_findings(url: str, run_id: str) -> list[dict[str, Any]]:
    answer = get(f"{url}/api/runs/{run_id}/health")
    assert answer.status_code == 200, answer.text
    found: list[dict[str, Any]] = answer.json()["findings"]
    return found


def shown(findings: list[dict[str, Any]]) -> set[tuple[int, str]]:
    """(id, rule) of every stored finding a listing shows, merged ones included."""
    out = {(f["id"], f["rule_id"]) for f in findings}
    for f in findings:
        out |= {(g["id"], g["rule_id"]) for g in f["evidence"].get("incident", [])}
    return out


def rows_shown(engine: Engine, run_pk: int) -> set[tuple[int, str]]:
    return {(i, f["rule_id"]) for i, f in stored(engine, run_pk).items()}


def rules(found: set[tuple[int, str]]) -> set[str]:
    return {rule for _, rule in found}


def test_a_server_judges_an_older_catalogue_s_findings_again_keeping_those_found_again(
        engine: Engine, runs_dir: Path, db_url: str) -> None:
    """The team server (no runs folder: nothing new arrives for the finished run) serves
    the older findings only until its background sweep has judged the run again; each
    answer is the older set or the new one, never a mix; the finding found again keeps its
    id and opened time; `runwatch runs health` then shows the same findings and changes
    nothing (before the fix the server kept the older set until `runs health` judged the
    run again, with new ids and opened times)."""
    run_id = grpo_run(runs_dir, "g")
    index(engine, runs_dir)
    pk = pk_of(engine, "g")
    older = as_older_runwatch_left_it(engine, pk)
    old_set = rows_shown(engine, pk)
    seen: list[set[tuple[int, str]]] = []
    with Runner(engine, port=free_port(), warm=False) as srv:

        def judged_again() -> list[dict[str, Any]] | None:
            found = api_findings(srv.url, run_id)
            seen.append(shown(found))
            return found if DROPPED_RULE not in rules(seen[-1]) else None

        found = wait_for(judged_again, what="the server to judge the run again")
        assert found is not None
        new_set = rows_shown(engine, pk)
        assert all(one in (old_set, new_set) for one in seen), seen
        rows = stored(engine, pk)
        assert rows[older["kept"]]["opened_ts"] == OPENED_LONG_AGO
        assert rows[older["kept"]]["message"] != "loss was NaN at step 100."
        assert {f["rule_id"] for f in rows.values()} == {
            f["rule_id"] for f in older["new"].values()}
        with engine.connect() as conn:
            assert stale_runs(conn, None, 10) == []
        cli = json.loads(run_cli("runs", "health", "g", "--db", db_url, "-o", "json").stdout)
        assert [(f["id"], f["message"], f["opened_ts"]) for f in cli["findings"]] == [
            (f["id"], f["message"], f["opened_ts"]) for f in found]
        assert stored(engine, pk) == rows


def test_runs_health_judges_a_stale_run_keeping_the_ids_and_opened_times(
        engine: Engine, runs_dir: Path, db_url: str) -> None:
    """`runwatch runs health` on a run an older catalogue judged (no server) judges it again
    and keeps the id and opened time of the finding found again; before the fix every
    finding was deleted and inserted again, opened now."""
    grpo_run(runs_dir, "g")
    index(engine, runs_dir)
    pk = pk_of(engine, "g")
    older = as_older_runwatch_left_it(engine, pk)
    cli = json.loads(run_cli("runs", "health", "g", "--db", db_url, "-o", "json").stdout)
    rows = stored(engine, pk)
    assert DROPPED_RULE not in {f["rule_id"] for f in rows.values()}
    assert rows[older["kept"]]["opened_ts"] == OPENED_LONG_AGO
    assert (older["kept"], "metric.non_finite") in shown(cli["findings"])
    assert older["added"] in {f["rule_id"] for f in rows.values()}


def test_the_sweep_judges_every_stale_run_of_a_large_index_newest_first(
        engine: Engine, runs_dir: Path) -> None:
    """Stale runs are read a page at a time (here 2), newest first, until none is left;
    each is judged once, and a second sweep finds nothing to do."""
    names = [f"r{i}" for i in range(5)]
    for name in names:
        grpo_run(runs_dir, name)
    index(engine, runs_dir)
    pks = [pk_of(engine, name) for name in names]
    older = {pk: as_older_runwatch_left_it(engine, pk) for pk in pks}
    judged = list(sweep(engine, chunk=2))
    assert judged == [(pk, True) for pk in sorted(pks, reverse=True)]
    for pk in pks:
        rows = stored(engine, pk)
        assert DROPPED_RULE not in {f["rule_id"] for f in rows.values()}
        assert rows[older[pk]["kept"]]["opened_ts"] == OPENED_LONG_AGO
    assert list(sweep(engine, chunk=2)) == []


def test_the_ui_judges_again_beside_its_indexer(runs_dir: Path) -> None:
    """`runwatch ui`'s server (a runs folder, SQLite beside it) judges a finished run again
    though its folder holds nothing new."""
    from runwatch.store import open_engine

    run_id = grpo_run(runs_dir, "g")
    engine = open_engine(runs_dir / ".runwatch" / "index.db")
    try:
        index(engine, runs_dir)
        as_older_runwatch_left_it(engine, pk_of(engine, "g"))
        with Runner(engine, runs_dir=runs_dir, port=free_port(), interval=0.05,
                    warm=False) as srv:
            wait_for(lambda: DROPPED_RULE not in rules(shown(api_findings(srv.url, run_id))),
                     what="the ui to judge the run again")
    finally:
        engine.dispose()
