"""Writing a run's row: the manifest's fields, inserted or refreshed by run id."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import orjson
from sqlalchemy import Connection, insert, select, update

from runwatch.store import schema as s


def upsert_run(
    conn: Connection, manifest: dict[str, Any], run_dir: Path | None
) -> tuple[int, bool]:
    """Insert or refresh the run row described by `manifest`; returns (pk, is_new)."""
    r = s.runs.c
    tags = manifest.get("tags") or []
    values = {
        "name": str(manifest.get("name") or (run_dir.name if run_dir else manifest["run_id"])),
        "project": str(manifest.get("project") or "default"),
        "group_name": _s(manifest.get("group")),
        "tags": orjson.dumps([str(t) for t in tags] if isinstance(tags, list) else []).decode(),
        "method": _s(manifest.get("method")),
        "base_model": _s(manifest.get("base_model")),
        "dataset": _s(manifest.get("dataset")),
        "trainer": _s(manifest.get("trainer")),
        "backend": _s(manifest.get("backend")),
        "created_at": float(manifest.get("created_at") or time.time()),
        "dir": str(run_dir.resolve()) if run_dir else None,
        "manifest": orjson.dumps(manifest, option=orjson.OPT_NON_STR_KEYS).decode(),
    }
    row = conn.execute(select(r.pk, r.manifest).where(r.run_id == manifest["run_id"])).first()
    if row is None:
        pk = conn.execute(insert(s.runs).values(run_id=manifest["run_id"], status="QUEUED",
                                                problems=0, **values)).inserted_primary_key
        assert pk is not None
        return int(pk[0]), True
    if row.manifest != values["manifest"]:
        conn.execute(update(s.runs).where(r.pk == row.pk).values(**values))
    return int(row.pk), False


def _s(value: Any) -> str | None:
    return None if value is None else str(value)
