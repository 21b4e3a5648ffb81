"""The one builder of a run's manifest.json, shared by the SDK and the importers."""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from typing import Any

from runwatch.rundir import format as fmt


def build_manifest(
    name: str,
    project: str = "default",
    *,
    group: str | None = None,
    tags: Sequence[str] = (),
    method: str | None = None,
    base_model: str | None = None,
    dataset: str | None = None,
    trainer: str | None = None,
    backend: str | None = None,
    created_at: float | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """A new run's manifest (docs/run-format.md) with a fresh run_id.

    `created_at` defaults to now; `extra` adds fields such as the SDK's host and
    packages or an importer's `imported_from`. Names are validated by the caller,
    which needs them valid before it makes the run's folder.
    """
    return {
        "schema_version": fmt.SCHEMA_VERSION,
        "run_id": uuid.uuid4().hex,
        "name": name,
        "project": project,
        "group": group,
        "tags": list(tags),
        "method": method,
        "base_model": base_model,
        "dataset": dataset,
        "trainer": trainer,
        "backend": backend,
        "created_at": time.time() if created_at is None else created_at,
        **extra,
    }
