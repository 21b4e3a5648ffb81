"""CSV and W&B history imports: real exports from the corpus and the fixtures folder, and
files the tests write for the edge cases, imported into a real index and read back."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from runwatch.cli.main import app
from runwatch.ingest.importers import SourceError, read_source
from runwatch.store import open_engine
from runwatch.store import queries as q

REAL = Path(__file__).resolve().parents[1] / "data" / "real"
FIXTURES = Path(__file__).resolve().parent / "data"


def import_run(src: Path, runs: Path, *args: str) -> dict:
    res = CliRunner().invoke(app, ["import", str(src), "--dir", str(runs), "-o", "json",
                                     *args])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def read_back(runs: Path, name: str) -> list[q.StepRow]:
    engine = open_engine(runs / ".runwatch" / "index.db")
    with engine.begin() as conn:
        rows = q.history(conn, q.resolve_run(conn, name).pk)
    engine.dispose()
    return rows


def test_progress_csv_by_row_index_and_by_a_step_column(tmp_path: Path) -> None:
    src = REAL / "ppo_lunar_progress_csv" / "progress.csv"
    out = import_run(src, tmp_path, "--name", "by-row", "--method", "grpo")
    assert out["trainer"] == "csv" and out["steps"] == 148
    rows = read_back(tmp_path, "by-row")
    assert [r.step for r in rows] == list(range(148))  # no step column: the row number
    assert rows[4].values["ep_rew_mean"] == pytest.approx(-628.9608993636364)
    assert "total timesteps" in rows[0].values
    out = import_run(src, tmp_path, "--name", "by-timesteps", "--step-column", "total timesteps")
    rows = read_back(tmp_path, "by-timesteps")
    # The file holds an earlier run's 4 rows first: their steps come back as duplicates
    # of the second run's, and the index keeps the later record of each step.
    assert rows[0].step == 1280 and rows[-1].step == 184320 and len(rows) == 144
    assert "total timesteps" not in rows[0].values


def test_wandb_chart_export_single_run(tmp_path: Path) -> None:
    src = REAL / "other_nanogpt_wandb_chart_spiky" / "wandb_export.csv"
    imported = read_source(src)
    assert imported.trainer == "wandb"
    assert {k for r in imported.records for k in r} == {"step", "train/loss"}
    import_run(src, tmp_path, "--name", "chart")
    rows = read_back(tmp_path, "chart")
    assert [r.step for r in rows] == list(range(30))
    assert rows[28].values["train/loss"] == pytest.approx(9.834397315979004)


def test_wandb_chart_export_of_several_runs_is_refused(tmp_path: Path) -> None:
    src = tmp_path / "wandb_export.csv"
    src.write_text('"Step","a - train/loss","a - train/loss__MIN","b - train/loss"\n'
                   '"0","1.0","1.0","2.0"\n', encoding="utf-8")
    with pytest.raises(SourceError, match=r"export of 2 runs \(a, b\)"):
        read_source(src)


def test_wandb_history_jsonl(tmp_path: Path) -> None:
    src = FIXTURES / "wandb-history.jsonl"
    imported = read_source(src)
    assert imported.trainer == "wandb"
    # The video rows carry no number: the media column is left out and so are those rows.
    assert len(imported.records) == 24
    assert imported.records[0] == {"step": 0, "episodic_reward": 180.0, "ts": 1582070918.2388577}
    assert all("gameplays" not in r and "_runtime" not in r for r in imported.records)
    import_run(src, tmp_path, "--name", "space")
    rows = read_back(tmp_path, "space")
    assert rows[-1].step == 24 and rows[-1].ts == pytest.approx(1582070975.5888927)


def test_wandb_history_csv_from_pandas(tmp_path: Path) -> None:
    """run.history().to_csv(): an unnamed index column, _step/_runtime/_timestamp, NaN
    written as an empty cell, HF's train/global_step as the step."""
    src = tmp_path / "history.csv"
    src.write_text(",_step,_runtime,_timestamp,train/loss,train/global_step,eval/loss\n"
                   "0,0,10.5,1700000010.5,2.0,10,\n"
                   "1,1,20.5,1700000020.5,1.5,20,\n"
                   "2,2,21.0,1700000021.0,,20,1.7\n"
                   "3,3,30.5,1700000030.5,nan,30,\n", encoding="utf-8")
    imported = read_source(src)
    assert imported.trainer == "wandb" and imported.method == "sft"
    assert [r["step"] for r in imported.records] == [10, 20, 30]  # eval row joins step 20
    assert imported.records[1] == {"step": 20, "train/loss": 1.5, "eval/loss": 1.7,
                                   "ts": 1700000020.5}
    assert math.isnan(imported.records[2]["train/loss"])
    runs = tmp_path / "runs"
    import_run(src, runs, "--name", "hist")
    assert [r.step for r in read_back(runs, "hist")] == [10, 20, 30]


def test_wandb_runtime_only_keeps_the_spacing(tmp_path: Path) -> None:
    src = tmp_path / "h.jsonl"
    src.write_text("".join(json.dumps({"_step": s, "_runtime": 5.0 * s, "reward": 0.1 * s}) + "\n"
                           for s in range(4)), encoding="utf-8")
    imported = read_source(src)
    assert imported.method == "grpo"
    ts = [r["ts"] for r in imported.records]
    assert [b - a for a, b in itertools.pairwise(ts)] == pytest.approx([5.0, 5.0, 5.0])


def test_csv_cells_and_columns(tmp_path: Path) -> None:
    src = tmp_path / "log.csv"
    src.write_text("step,phase,loss,grad_norm,note\n"
                   "1,train,2.0,1.0,warmup\n"
                   "2,train,,inf,\n"
                   "3,train,NA,-,ok\n"
                   "4,eval,1.5,0.9,\n", encoding="utf-8")
    imported = read_source(src)
    assert imported.trainer == "csv"
    rec = {r["step"]: r for r in imported.records}
    # Step 3 has only missing cells: no record.
    assert set(rec) == {1, 2, 4} and "phase" not in rec[1] and "note" not in rec[1]
    assert "loss" not in rec[2] and math.isinf(rec[2]["grad_norm"])
    src.write_text("step,loss\n1,2.0\n2,diverged\n", encoding="utf-8")
    with pytest.raises(SourceError, match=r"column 'loss' mixes numbers and text \(line 3: "
                                          r"'diverged'\)"):
        read_source(src)
    src.write_text("step,loss,global_step\n1,2.0,\n1.5,1.0,7\n", encoding="utf-8")
    with pytest.raises(SourceError, match=r"step column 'step' has no whole number in data "
                                          r"row 2 \(1.5\)"):
        read_source(src)
    src.write_text("iter,loss,global_step\n1,2.0,\n2,1.0,7\n", encoding="utf-8")
    # global_step is missing on a row: the next known column numbers the rows.
    assert [r["step"] for r in read_source(src).records] == [0, 1]
    assert [r["step"] for r in read_source(src, step_column="iter").records] == [1, 2]
    with pytest.raises(SourceError, match="step column 'global_step' has no whole number"):
        read_source(src, step_column="global_step")
    src.write_text("name,notes\nrun-a,first\n", encoding="utf-8")
    with pytest.raises(SourceError, match="has no numeric metric columns"):
        read_source(src)
    src.write_text("", encoding="utf-8")
    with pytest.raises(SourceError, match="has no header row"):
        read_source(src)
    src.write_text("step\tloss\n1\t0.5\n", encoding="utf-8")
    tsv = src.rename(tmp_path / "log.tsv")
    assert read_source(tsv).records == [{"step": 1, "loss": 0.5}]


def test_import_names_and_format_errors(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    out = import_run(REAL / "ppo_lunar_progress_csv" / "progress.csv", runs)
    assert out["name"] == "imported-ppo_lunar_progress_csv"
    res = CliRunner().invoke(app, ["import", str(REAL / "README.md"), "--dir", str(runs)])
    assert res.exit_code != 0 and "csv, wandb or runwatch" in res.output


def test_an_unknown_step_column_or_method_is_refused_with_what_there_is(tmp_path: Path) -> None:
    src = tmp_path / "train.csv"
    src.write_text("step,loss,acc\n0,1.0,0.1\n1,0.9,0.2\n", encoding="utf-8")
    with pytest.raises(SourceError, match=r"has no column 'nope'; pass --step-column one of "
                                          r"its number columns: step, loss, acc"):
        read_source(src, "csv", "nope")
    runs = tmp_path / "runs"
    res = CliRunner().invoke(app, ["import", str(src), "--dir", str(runs), "--name", "x",
                                   "--method", "bogus"])
    assert res.exit_code == 2, res.output
    assert "--method 'bogus' is not one the health rules know" in res.output
    assert "grpo" in res.output and "leave it out" in res.output
    assert not (runs / "x").exists()  # refused before anything is written
    # a method of a known family is taken as it is (a PPO run is judged by GRPO's rules)
    assert import_run(src, runs, "--name", "y", "--method", "ppo")["method"] == "ppo"
