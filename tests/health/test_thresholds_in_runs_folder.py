"""A project's health thresholds are kept in the runs folder (`.runwatch/thresholds/`), so an
index made again from the folder judges its runs as before: the real CLI, a real rebuild
(the index deleted, the folder indexed again), a second index of the same folder, a file
edited by hand (a bad one keeps the last good overrides and says so), and an index with
no runs folder, which says it is their only store."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import yaml

from runwatch.ingest.unchanged import unchanged
from runwatch.store.plain import Reader
from tests.support.cli import cli_here, run_cli

from .test_store import steps, write_run

OFF = "rules:\n  grpo.truncation: {enabled: false}\n"
WIDE = {"COLUMNS": "1000"}  # a path in a message on one line


def found(runs: Path, *db: str) -> dict[str, str]:
    """The rules run `r` has findings of, and their severity."""
    done = cli_here("runs", "health", "r", "--dir", str(runs), *db, "-o", "json")
    return {f["rule_id"]: f["severity"] for f in json.loads(done.stdout)["findings"]}


def truncating_run(tmp_path: Path) -> tuple[Path, Path]:
    """A runs folder whose run `r` (project p) truncates half its samples, and a file that
    turns that rule off."""
    runs = tmp_path / "runs"
    write_run(runs, "r", "grpo", steps(0, 20, truncated_ratio=0.5))
    file = tmp_path / "off.yaml"
    file.write_text(OFF, encoding="utf-8")
    return runs, file


def edit(path: Path, text: str) -> None:
    """Write `path` as a hand would, later than anything the index read (a clock tick can be
    coarser than the time between two writes of a test)."""
    before = path.stat().st_mtime_ns
    path.write_text(text, encoding="utf-8")
    os.utime(path, ns=(before + 10**9, before + 10**9))


def test_the_thresholds_outlive_the_index_deleted_and_made_again(tmp_path: Path) -> None:
    runs, file = truncating_run(tmp_path)
    assert "grpo.truncation" in found(runs)
    kept = runs / ".runwatch" / "thresholds" / "p.yaml"
    done = run_cli("thresholds", "p", str(file), "--dir", str(runs), env=WIDE)
    assert f"in {kept} and the index" in done.stdout
    assert yaml.safe_load(kept.read_text(encoding="utf-8")) == {
        "rules": {"grpo.truncation": {"enabled": False}}, "settings": {}}
    assert "grpo.truncation" not in found(runs)
    for part in (runs / ".runwatch").glob("index.db*"):
        part.unlink()
    run_cli("index", str(runs))
    assert "grpo.truncation" not in found(runs)
    shown = run_cli("thresholds", "p", "--dir", str(runs))
    assert yaml.safe_load(shown.stdout) == {"rules": {"grpo.truncation": {"enabled": False}},
                                            "settings": {}}
    # cleared: the folder says so too, and an index made again has none
    cli_here("thresholds", "p", "--clear", "--dir", str(runs))
    for part in (runs / ".runwatch").glob("index.db*"):
        part.unlink()
    assert "grpo.truncation" in found(runs)


def test_every_index_of_the_folder_judges_with_its_thresholds(tmp_path: Path,
                                                               db_url: str) -> None:
    # two servers on one folder, each with its own index: the second reads the folder's
    runs, file = truncating_run(tmp_path)
    cli_here("thresholds", "p", str(file), "--dir", str(runs))
    assert "grpo.truncation" not in found(runs, "--db", db_url)
    shown = cli_here("thresholds", "p", "--dir", str(runs), "--db", db_url)
    assert yaml.safe_load(shown.stdout)["rules"] == {"grpo.truncation": {"enabled": False}}


def test_a_file_edited_by_hand_is_read_and_a_bad_one_keeps_the_last_good(
        tmp_path: Path) -> None:
    runs, file = truncating_run(tmp_path)
    cli_here("thresholds", "p", str(file), "--dir", str(runs))
    kept = runs / ".runwatch" / "thresholds" / "p.yaml"
    for text, said in (("rules: [grpo.truncation\n", "is not valid YAML"),
                       ('{"rules": {"grpo.truncaton": {"enabled": false}}}',
                        "did you mean 'grpo.truncation'?")):
        edit(kept, text)
        done = cli_here("index", str(runs), env=WIDE)
        assert f"the health thresholds file {kept} " in done.stdout and said in done.stdout
        assert "project p keeps the thresholds the index held" in done.stdout
        assert "grpo.truncation" not in found(runs)
        assert str(kept) not in cli_here("index", str(runs), env=WIDE).stdout  # said once
        shown = cli_here("thresholds", "p", "--dir", str(runs), env=WIDE)  # there, each time
        assert said in shown.stderr
        assert yaml.safe_load(shown.stdout)["rules"] == {"grpo.truncation": {"enabled": False}}
    edit(kept, "rules:\n  grpo.truncation: {severity: critical}\n")
    cli_here("index", str(runs))
    assert found(runs)["grpo.truncation"] == "critical"


def test_an_index_with_no_runs_folder_says_it_is_their_only_store(tmp_path: Path) -> None:
    file = tmp_path / "off.yaml"
    file.write_text(OFF, encoding="utf-8")
    done = run_cli("thresholds", "p", str(file), "--db", str(tmp_path / "team.db"),
                   cwd=tmp_path, env=WIDE)
    assert "in the index only" in done.stdout and "will not have them" in done.stdout
    assert not (tmp_path / "runs").exists()


def test_a_project_that_is_no_file_name_is_refused(tmp_path: Path) -> None:
    runs, file = truncating_run(tmp_path)
    done = cli_here("thresholds", "../x", str(file), "--dir", str(runs), check=False)
    assert done.returncode == 2 and "project name '../x'" in done.stderr
    assert not (runs / ".runwatch" / "x.yaml").exists()


def test_a_read_command_sees_a_hand_edit_without_an_index_pass_of_its_own(
        tmp_path: Path) -> None:
    """A read command skips indexing when the folder holds nothing new (ingest/unchanged):
    a thresholds file edited by hand is something new, and one the index could not read is
    not new again until it is edited again."""
    runs, file = truncating_run(tmp_path)
    cli_here("thresholds", "p", str(file), "--dir", str(runs))
    assert "grpo.truncation" not in found(runs)
    kept = runs / ".runwatch" / "thresholds" / "p.yaml"
    edit(kept, "rules:\n  grpo.truncation: {severity: critical}\n")
    assert found(runs)["grpo.truncation"] == "critical"
    edit(kept, "rules: [grpo.truncation\n")
    assert found(runs)["grpo.truncation"] == "critical"  # the last good overrides
    said = cli_here("thresholds", "p", "--dir", str(runs), env=WIDE).stderr
    assert "is not valid YAML" in said
    db = sqlite3.connect(runs / ".runwatch" / "index.db")
    try:
        assert unchanged(Reader(db), runs)  # said: nothing for a pass to do
        edit(kept, "rules:\n  grpo.truncation: {enabled: false}\n")
        assert not unchanged(Reader(db), runs)
    finally:
        db.close()
    assert "grpo.truncation" not in found(runs)
