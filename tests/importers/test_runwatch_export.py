"""`runwatch runs metrics -o json` imports back (`runwatch import`, format `runwatch`): its
steps, times and values, NaN and infinities kept, and a non-finite value that came through
`--jq` or the HTTP API as `null` read as NaN (found in a trial: the JSON export was
refused as "not a trainer_state.json")."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

import runwatch
from runwatch.ingest.importers import SourceError, read_source
from tests.support.cli import run_cli


def _metrics_json(runs: Path, name: str, *args: str) -> str:
    return run_cli("runs", "metrics", name, "--dir", str(runs), "-o", "json", *args).stdout


def test_a_json_export_imports_back_with_its_steps_times_and_non_finite_values(
        tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    run = runwatch.init(name="source", dir=runs)
    for step in range(0, 50, 5):
        loss = math.nan if step == 20 else math.inf if step == 25 else 1.0 / (step + 1)
        run.log({"loss": loss, "lr": 1e-4}, step=step)
        if step % 10 == 0:
            run.log({"val/loss": 2.0 - step / 100}, step=step)
    run.finish()
    run_cli("index", str(runs))
    export = tmp_path / "source.json"
    export.write_text(_metrics_json(runs, "source"))
    assert read_source(export).trainer == "runwatch"
    run_cli("import", str(export), "--dir", str(runs), "--name", "copy")
    # the copy's export is the source's, but for its name and id
    source, copy = json.loads(_metrics_json(runs, "source")), \
        json.loads(_metrics_json(runs, "copy"))
    assert copy["name"] == "copy" and copy["run_id"] != source["run_id"]
    assert json.dumps(copy["steps"]) == json.dumps(source["steps"])
    assert "NaN" in json.dumps(copy["steps"]) and "Infinity" in json.dumps(copy["steps"])


def test_a_null_value_is_a_nan_and_a_missing_key_stays_unlogged(tmp_path: Path) -> None:
    export = tmp_path / "through-jq.json"
    export.write_text(json.dumps({"run_id": "r", "name": "n", "steps": [
        {"step": 0, "ts": 1.7e9, "measured": {"loss": 1.0, "kl": 0.5}},
        {"step": 1, "ts": 1.7e9 + 1, "measured": {"loss": None}},
    ]}))
    records = read_source(export).records
    assert records[0] == {"step": 0, "ts": 1.7e9, "loss": 1.0, "kl": 0.5}
    assert math.isnan(records[1]["loss"]) and "kl" not in records[1]


@pytest.mark.parametrize(("text", "words"), [
    ('{"run_id": "r", "name": "n"}', "has no list of steps"),
    ('{"run_id": "r", "steps": [{"step": 0}]}', "steps[0] has no `measured` object"),
    ('{"run_id": "r", "steps": [{"step": -1, "measured": {}}]}', "steps[0]"),
    ('{"run_id": "r", "steps": [', "is not JSON"),
])
def test_a_broken_export_is_refused_naming_what_is_wrong(tmp_path: Path, text: str,
                                                         words: str) -> None:
    export = tmp_path / "broken.json"
    export.write_text(text)
    with pytest.raises(SourceError, match=words.replace("[", r"\[").replace("]", r"\]")):
        read_source(export)
    said = run_cli("import", str(export), "--dir", str(tmp_path / "runs"), check=False)
    assert said.returncode == 2 and words in " ".join(said.stderr.split()), said.stderr
