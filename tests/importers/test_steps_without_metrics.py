"""A logged step with no metric value (LLaMA-Factory's last line holds only its progress)
is not a step of the imported run; a log of nothing but such lines is refused clearly."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from runwatch.cli.main import app
from runwatch.ingest.importers import read_source
from runwatch.store import open_engine
from runwatch.store import queries as q


def _factory_log(path: Path, lines: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_a_step_with_only_progress_is_not_imported(tmp_path: Path) -> None:
    log = _factory_log(tmp_path / "trainer_log.jsonl", [
        {"current_steps": 5, "total_steps": 12, "loss": 2.0, "percentage": 41.7},
        {"current_steps": 10, "total_steps": 12, "loss": 1.5, "percentage": 83.3},
        {"current_steps": 12, "total_steps": 12, "percentage": 100.0}])
    assert [r["step"] for r in read_source(log).records] == [5, 10]
    res = CliRunner().invoke(app, ["import", str(log), "--dir", str(tmp_path / "runs"),
                                   "--name", "lf", "-o", "json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["steps"] == 2
    engine = open_engine(tmp_path / "runs" / ".runwatch" / "index.db")
    with engine.connect() as conn:
        rows = q.history(conn, q.resolve_run(conn, "lf").pk)
    engine.dispose()
    assert [r.step for r in rows] == [5, 10]


def test_a_log_of_progress_only_is_refused_with_what_it_lacks(tmp_path: Path) -> None:
    log = _factory_log(tmp_path / "trainer_log.jsonl", [
        {"current_steps": 1, "total_steps": 2, "percentage": 50.0},
        {"current_steps": 2, "total_steps": 2, "percentage": 100.0}])
    res = CliRunner().invoke(app, ["import", str(log), "--dir", str(tmp_path / "runs"),
                                   "--name", "lf"])
    assert res.exit_code != 0 and "holds no metrics to import" in res.output, res.output
    assert not (tmp_path / "runs" / "lf").exists()
