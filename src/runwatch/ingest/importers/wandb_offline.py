"""Recognise a W&B offline run (`wandb/offline-run-<time>-<id>/run-<id>.wandb`) given to
import, and refuse it saying what to import instead.

Since 0.10, W&B keeps an offline run's history only in that binary record file (no
`wandb-history.jsonl`), and only W&B's own service reads it: wandb's Python package has
no reader of it (its `wandb.sdk.internal.datastore` is gone since the service moved to
`wandb-core`). `wandb sync` uploads the run, and its history export is what runwatch
imports (wandb_export, csvlog).
"""

from __future__ import annotations

from pathlib import Path

from runwatch.ingest.importers import tensorboard
from runwatch.ingest.importers.common import SourceError

RECORD_FILES = "run-*.wandb"
# How many runs a refusal names
SHOWN = 3


def refuse_offline_run(source: Path, kind: str) -> None:
    """Raise a SourceError saying what to import instead where `source` is a W&B run's
    `.wandb` record file (whatever `kind`), or a folder holding W&B runs (one run's
    folder, or the `wandb` folder of several) that `kind` "auto" or "wandb" would read.
    Such a folder that holds TensorBoard event files too (W&B's `sync_tensorboard`) is
    "auto"'s to read as TensorBoard's."""
    if source.is_file():
        if source.suffix == ".wandb":
            raise SourceError(_what_to_do(source, [source]))
        return
    if not source.is_dir() or kind not in ("auto", "wandb"):
        return
    found = sorted(source.rglob(RECORD_FILES))
    if not found:
        if kind == "wandb":
            raise SourceError(f"{source} is a folder, and --format wandb reads a file: a W&B "
                              "history export (CSV, JSON lines or a JSON list)")
        return
    if kind == "auto" and tensorboard.event_files(source):
        return
    raise SourceError(_what_to_do(source, found))


def _what_to_do(source: Path, found: list[Path]) -> str:
    runs = [p.parent for p in found]
    one = len(runs) == 1
    if source.is_file():
        what = f"{source} is the record file of a W&B offline run"
    elif runs == [source]:
        what = f"{source} is a W&B offline run"
    else:
        shown = ", ".join(str(p) for p in runs[:SHOWN]) + (
            f" and {len(runs) - SHOWN} more" if len(runs) > SHOWN else "")
        what = f"{source} holds {'a W&B offline run' if one else 'W&B offline runs'} ({shown})"
    sync = f"wandb sync {runs[0]}" if one else "wandb sync RUN_FOLDER"
    run_id = found[0].stem.removeprefix("run-") if one else "RUN_ID"
    return (f"{what}, whose history is in a binary file that only W&B's own service reads: "
            f"upload it with `{sync}`, export its history with W&B's API "
            f"(`pandas.DataFrame(wandb.Api().run(\"ENTITY/PROJECT/{run_id}\").scan_history())"
            ".to_csv(\"history.csv\")`) and import that file; to record a W&B script as a "
            "runwatch run with no upload, swap its import for "
            "`import runwatch.compat.wandb as wandb` (docs/wandb-compat.md)")
