"""Names in a run folder are matched whole: a run name, or a samples file's name, that
ends in a newline (or holds a digit other than 0-9) is not one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import Engine, func, select

from runwatch.ingest import Indexer
from runwatch.rundir import format as fmt
from runwatch.sdk import init
from runwatch.store import queries as q
from runwatch.store import schema as s
from tests.support import write_manifest


def test_a_run_name_ending_in_a_newline_makes_no_folder(tmp_path: Path) -> None:
    with pytest.raises(fmt.RunDirError, match="may only hold"):
        init(name="run\n", dir=tmp_path)
    with pytest.raises(fmt.RunDirError, match="may only hold"):
        init(name="ok", project="project\n", dir=tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_sample_names_are_matched_whole() -> None:
    good = fmt.sample_file_name(12, "val")
    assert fmt.parse_sample_file_name(good) == (12, "val", "completions")
    for bad in (good + "\n", good + "x", "x" + good, "step_\u0661\u0662\u0663\u0664_a.json"):
        assert fmt.parse_sample_file_name(bad) is None, bad
        assert not fmt.is_attempt_file(bad), bad


def test_a_samples_file_named_with_a_newline_is_not_indexed(runs_dir: Path,
                                                            engine: Engine) -> None:
    run = write_manifest(runs_dir / "names")
    body = json.dumps({"samples": [{"prompt": "p", "completion": "c", "reward": 1.0}]})
    (run / fmt.sample_file_name(1, "train")).write_text(body)
    (run / (fmt.sample_file_name(2, "train") + "\n")).write_text(body)
    Indexer(engine, runs_dir).index_once()
    sm = s.samples.c
    with engine.connect() as conn:
        pk = q.resolve_run(conn, "names").pk
        steps = conn.execute(select(sm.step, func.count()).where(sm.run_pk == pk)
                             .group_by(sm.step)).all()
    assert [step for step, _ in steps] == [1]
