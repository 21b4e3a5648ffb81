"""`runwatch import` keeps or names every column, and guesses the method by the keys the
docs name. A trial's CSV round trip (`runs metrics -o csv`, then `import`) dropped a
`_private` metric with no note (W&B's rule for its own `_` columns, applied to any CSV)
and read a key with a line break, `line\\nbreak`, back as `linebreak`; and JSON-lines logs
of DPO (`rewards/chosen`) and GRPO (`reward`, `reward_std`) were guessed `sft` because
they also log `loss`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import runwatch
from runwatch.ingest.importers import read_source
from tests.support.cli import cli_here, run_cli


def _imported(src: Path, runs: Path, name: str) -> dict[str, Any]:
    out = run_cli("import", str(src), "--dir", str(runs), "--name", name, "-o", "json")
    return json.loads(out.stdout)


def _measured(runs: Path, name: str) -> list[dict[str, Any]]:
    out = run_cli("runs", "metrics", name, "--dir", str(runs), "-o", "json").stdout
    return [step["measured"] for step in json.loads(out)["steps"]]


def test_a_csv_export_imports_back_with_every_key(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    logged = {"loss": 1.0, "_private": 2.0, "line\nbreak": 3.0, " spaced ": 4.0}
    with runwatch.init(name="k", dir=runs) as run:
        run.log(logged, step=0)
        run.log({"loss": 0.5, "_private": 1.5}, step=1)
    export = tmp_path / "k.csv"
    export.write_text(run_cli("runs", "metrics", "k", "--dir", str(runs), "-o", "csv").stdout)
    out = _imported(export, runs, "back")
    assert out["trainer"] == "csv"
    back = _measured(runs, "back")
    # the one key renamed (a header's spaces are not read as part of a name) is said
    assert back[0] == {"loss": 1.0, "_private": 2.0, "line\nbreak": 3.0, "spaced": 4.0}
    assert back[1] == {"loss": 0.5, "_private": 1.5}
    assert out["notes"] == ["column ' spaced ' is read as 'spaced': the spaces around a name "
                            "in the header are not part of it"]


def test_every_column_a_table_import_leaves_out_is_said(tmp_path: Path) -> None:
    wandb = tmp_path / "history.csv"
    wandb.write_text("_step,_runtime,_timestamp,_private,loss,phase\n"
                     "0,1.0,1700000001.0,7,2.0,warmup\n"
                     "1,2.0,1700000002.0,8,1.5,train\n", encoding="utf-8")
    got = read_source(wandb)
    assert got.trainer == "wandb" and all("_private" not in r for r in got.records)
    assert got.notes == [  # _runtime too: _timestamp is the clock
        "'_runtime', '_private' are not imported: in a W&B export, a column whose name "
        "starts with '_' is W&B's own",
        "'phase' is not imported: it holds text, not numbers"]
    plain = tmp_path / "log.csv"
    plain.write_text("iter,step,loss,note,split\n0,5,2.0,a,train\n1,6,1.9,,val\n",
                     encoding="utf-8")
    got = read_source(plain, step_column="iter")
    assert got.records == [{"step": 0, "loss": 2.0}, {"step": 1, "val/loss": 1.9}]
    assert got.notes == [
        "'note' is not imported: it holds text, not numbers",
        "'step' is not imported: a record's own field has that name; rename the column to "
        "import it"]
    said = cli_here("import", str(plain), "--dir", str(tmp_path / "runs"),
                    "--step-column", "iter").stdout
    assert "note: 'note' is not imported" in " ".join(said.split())


def test_a_w_and_b_chart_export_says_how_it_read_its_columns(tmp_path: Path) -> None:
    chart = tmp_path / "wandb_export.csv"
    chart.write_text('"Step","r - train/loss","r - train/loss__MIN","r - train/loss__MAX"\n'
                     '"0","1.0","0.9","1.1"\n"1","0.8","0.7","0.9"\n', encoding="utf-8")
    got = read_source(chart)
    assert [r["train/loss"] for r in got.records] == [1.0, 0.8]
    (note,) = got.notes
    assert note.startswith("column 'r - train/loss' is read as 'train/loss'")
    assert "'r - train/loss__MIN', 'r - train/loss__MAX' (the chart's min and max bands) are " \
           "not imported" in note


@pytest.mark.parametrize(("row", "method"), [
    ({"loss": 0.7, "rewards/chosen": 0.1, "rewards/rejected": -0.1}, "dpo"),
    ({"loss": 0.7, "rewards/rejected": -0.1}, "dpo"),
    ({"loss": 0.0, "reward": 0.1, "reward_std": 0.2}, "grpo"),
    ({"loss": 0.0, "frac_reward_zero_std": 0.5}, "grpo"),
    ({"loss": 2.0, "learning_rate": 1e-4}, "sft"),
])
def test_a_json_lines_log_is_guessed_by_its_telltale_keys(
        tmp_path: Path, row: dict[str, float], method: str) -> None:
    src = tmp_path / "log.jsonl"
    src.write_text("".join(json.dumps({"step": s, **row}) + "\n" for s in range(3)),
                   encoding="utf-8")
    assert read_source(src).method == method
    assert _imported(src, tmp_path / "runs", "guessed")["method"] == method
