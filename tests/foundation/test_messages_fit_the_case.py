"""Messages whose advice fits the case: an index that cannot be made on a full disk says
the disk is full (not to check permissions) and leaves no empty index.db; a manifest's
missing, older or mistyped schema_version is not told to upgrade runwatch; a name with
letters outside ASCII is told that only A-Z and a-z are allowed."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from runwatch.rundir.format import RunDirError
from runwatch.sdk import init
from tests.support.cli import run_cli
from tests.support.disk import fill, small_disk


def test_an_index_that_cannot_be_made_on_a_full_disk_says_so(tmp_path: Path) -> None:
    with small_disk(tmp_path / "disk") as disk:
        runs = disk / "runs"
        runs.mkdir()
        fill(disk)
        done = run_cli("index", str(runs), check=False)
        assert done.returncode == 2, done.stderr
        assert "full disk" in done.stderr and "free space" in done.stderr, done.stderr
        assert "writable" not in done.stderr, done.stderr
        assert not (runs / ".runwatch" / "index.db").exists()  # no empty index left


def _manifest(runs: Path, name: str, **fields: object) -> None:
    (runs / name).mkdir(parents=True)
    (runs / name / "manifest.json").write_bytes(orjson.dumps(
        {"run_id": name.ljust(32, "0"), "name": name, "project": "p", "created_at": 1.7e9,
         **fields}))


def test_a_schema_version_upgrading_cannot_mend_is_not_told_to_upgrade(
        tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    _manifest(runs, "zero", schema_version=0)
    _manifest(runs, "text", schema_version="1")
    _manifest(runs, "none")
    _manifest(runs, "newer", schema_version=2)
    said = run_cli("index", str(runs)).stdout + run_cli("index", str(runs)).stderr
    lines = {name: next(line for line in said.splitlines() if f"/{name}/manifest.json" in line)
             for name in ("zero", "text", "none", "newer")}
    assert "schema_version 0, which no runwatch writes" in lines["zero"]
    assert "schema_version '1', which is not a whole number" in lines["text"]
    assert "has no schema_version" in lines["none"]
    for name in ("zero", "text", "none"):
        assert "upgrade runwatch" not in lines[name], lines[name]
        assert '"schema_version": 1' in lines[name] or "to 1" in lines[name] \
            or "number 1" in lines[name], lines[name]
    assert "newer than the version 1" in lines["newer"]
    assert "upgrade runwatch" in lines["newer"]


@pytest.mark.parametrize(("field", "name"), [("name", "émile"), ("project", "实验-1")])
def test_a_name_with_letters_outside_ascii_is_told_which_letters(
        tmp_path: Path, field: str, name: str) -> None:
    names = {"project": "p", "name": "ok", field: name}
    with pytest.raises(RunDirError, match=r"letters A-Z and a-z only \(ASCII"):
        init(project=names["project"], name=names["name"], dir=tmp_path / "runs")
    assert not (tmp_path / "runs" / "ok").exists()
