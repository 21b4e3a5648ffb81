"""`runwatch index`, run by a user who never starts `runwatch ui` after an upgrade, judges
again every run an older rule catalogue judged, as the server's background sweep does: a
finding the new rules find again keeps its id and opened time, and a second `runwatch
index` finds nothing to judge. The older runwatch's index is left as
test_findings_judged_again_after_upgrade leaves it."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Engine

from runwatch.health.catchup import stale_runs
from tests.health.test_findings_judged_again_after_upgrade import (
    DROPPED_RULE,
    OPENED_LONG_AGO,
    as_older_runwatch_left_it,
    grpo_run,
    index,
    pk_of,
    stored,
)
from tests.support import run_cli

JUDGED = "judged 2 runs again with this runwatch's health rules"


def test_runwatch_index_judges_again_every_run_an_older_catalogue_judged(
        engine: Engine, runs_dir: Path, db_url: str) -> None:
    """Two finished runs (nothing new in their folders) judged by an older catalogue: one
    `runwatch index` judges both again and says so; before the fix it indexed nothing new
    and left the older findings in the index until `runwatch ui` or `runs health`."""
    for name in ("a", "b"):
        grpo_run(runs_dir, name)
    index(engine, runs_dir)
    pks = [pk_of(engine, name) for name in ("a", "b")]
    older = {pk: as_older_runwatch_left_it(engine, pk) for pk in pks}

    out = run_cli("index", str(runs_dir), "--db", db_url).stdout
    assert JUDGED in out, out
    for pk in pks:
        rows = stored(engine, pk)
        assert DROPPED_RULE not in {f["rule_id"] for f in rows.values()}
        assert rows[older[pk]["kept"]]["opened_ts"] == OPENED_LONG_AGO
        assert {f["rule_id"] for f in rows.values()} == {
            f["rule_id"] for f in older[pk]["new"].values()}
    with engine.connect() as conn:
        assert stale_runs(conn, None, 10) == []

    again = {pk: stored(engine, pk) for pk in pks}
    out = run_cli("index", str(runs_dir), "--db", db_url).stdout
    assert "judging again" not in out and "judged" not in out, out
    assert {pk: stored(engine, pk) for pk in pks} == again
