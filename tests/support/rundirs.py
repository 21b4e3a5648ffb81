"""Run folders for tests: hand-written ones (a manifest and raw metrics lines, for input
the SDK would never write) and finished runs written by the real SDK."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from runwatch.rundir import format as fmt
from runwatch.sdk import init

CREATED_AT = 1e9
# make_run(name, steps=…, metrics=…, status=…, **init fields) -> run id
MakeRun = Callable[..., str]


def manifest(name: str, **fields: Any) -> dict[str, Any]:
    """The smallest valid manifest of run `name` (run id `id-<name>`), plus `fields`."""
    return {"schema_version": fmt.SCHEMA_VERSION, "run_id": f"id-{name}", "name": name,
            "created_at": CREATED_AT, **fields}


def write_manifest(run: Path, **fields: Any) -> Path:
    """Make the folder `run` with a manifest named after it; return the folder."""
    run.mkdir(parents=True)
    (run / fmt.MANIFEST).write_text(json.dumps(manifest(run.name, **fields)),
                                       encoding="utf-8")
    return run


def write_run(runs: Path, name: str, lines: Sequence[dict[str, Any] | str] = (),
              end: str = "\n", **fields: Any) -> Path:
    """A hand-written run folder: its manifest (with `fields`) and a metrics.jsonl holding
    `lines` (dicts as JSON, strings as they are) joined by newlines and ending in `end`."""
    run = write_manifest(runs / name, **fields)
    text = "\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines)
    (run / fmt.METRICS).write_text(text + end if lines else "", encoding="utf-8")
    return run


def sdk_run(runs: Path, name: str, steps: int = 20,
            metrics: Callable[[int], dict[str, float]] | None = None,
            status: str = "SUCCEEDED", **fields: Any) -> str:
    """A finished run written by the SDK: `steps` steps of `metrics(step)` (a falling loss
    and a learning rate by default); returns its run id."""
    fields.setdefault("method", "sft")
    fields.setdefault("base_model", "tiny-gpt")
    fields.setdefault("dataset", "arith")
    fields.setdefault("trainer", "runwatch-sft")
    fields.setdefault("backend", "local")
    run = init(name=name, dir=runs, **fields)
    fn = metrics or (lambda i: {"loss": 2.0 / (i + 1), "learning_rate": 1e-3})
    for i in range(steps):
        run.log(fn(i), step=i)
    run.finish(status)
    return str(run.id)
