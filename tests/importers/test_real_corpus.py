"""The labelled corpus of real logs (tests/data/real): every run has its source and label,
and every log imports with `runwatch import` into a real index that reads it back."""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine
from typer.testing import CliRunner

from runwatch.cli.main import app
from runwatch.health.scoring import read_labels
from runwatch.ingest.importers import read_source
from runwatch.store import open_engine
from runwatch.store import queries as q

CORPUS = Path(__file__).resolve().parents[1] / "data" / "real"
LABELS = read_labels(CORPUS)["runs"]  # each xdist worker reads labels.yaml when it collects
RUNS = sorted(p.name for p in CORPUS.iterdir() if p.is_dir())
METHODS = {"sft", "dpo", "grpo", "ppo", "other"}
# What `runwatch import --method` takes for each corpus method.
IMPORT_METHOD = {"sft": "sft", "dpo": "dpo", "grpo": "grpo", "ppo": "grpo", "other": "sft"}


def test_every_run_is_labelled_and_about_a_third_is_held_back() -> None:
    assert sorted(LABELS) == RUNS and len(RUNS) >= 20
    holdout = [name for name in RUNS if LABELS[name]["split"] == "holdout"]
    # A round held back is spent once tuned on (its runs move to train), so the share
    # held back dips until a new round is added and rises above a third when one is; the
    # six round-1 runs are never spent.
    assert 6 <= len(holdout) <= len(RUNS) / 2
    assert {LABELS[n]["method"] for n in holdout} >= {"sft", "dpo", "grpo"}
    assert {LABELS[n]["label"] == "healthy" for n in holdout} == {True, False}
    # Every held-back run says when it was added; a run that left the held-back split
    # says why (docs/health.md, "Score on real logs").
    # Rounds 2, 3, 5 to 19 and 25 were spent (tuned on after their score), so none of
    # their runs is held back any more.
    spent = (2, 3, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 25)
    assert all(LABELS[n]["round"] >= 1 and LABELS[n]["round"] not in spent for n in holdout)
    assert all("round" not in LABELS[n] for n in RUNS if n not in holdout)
    assert all(LABELS[n]["split"] == "train" for n in RUNS if "left_holdout" in LABELS[n])


def _table(text: str, first: str) -> list[tuple[str, int, int]]:
    """The rows of the README's count table whose header starts with `first`, in order."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith(f"| {first} |")), None)
    assert start is not None, f"README has no table headed {first!r}"
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        key, runs, holdout = (c.strip() for c in line.strip("|").split("|"))
        rows.append((key, int(runs), int(holdout)))
    return rows


def _and_list(numbers: list[int]) -> str:
    """1, 4 and 9, as the README lists rounds."""
    words = [str(n) for n in numbers]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def test_readme_counts_are_those_of_the_labels() -> None:
    # The README is the corpus's front page: its counts are checked against labels.yaml so
    # that a merged round cannot leave them behind (round 21 once did).
    text = (CORPUS / "README.md").read_text(encoding="utf-8")
    holdout = [n for n in RUNS if LABELS[n]["split"] == "holdout"]

    def counts(key: str) -> dict[str, tuple[int, int]]:
        values = sorted({LABELS[n][key] for n in RUNS})
        return {v: (sum(LABELS[n][key] == v for n in RUNS),
                    sum(LABELS[n][key] == v for n in holdout)) for v in values}

    for head, key in (("method", "method"), ("label (main)", "label")):
        rows = _table(text, head)
        assert len({k for k, _, _ in rows}) == len(rows), f"a {head} row is repeated"
        assert {k: (r, h) for k, r, h in rows} == counts(key)
    rounds = sorted({LABELS[n]["round"] for n in holdout})
    split = re.findall(r"(\d+) of the (\d+) runs are `split: holdout` \(rounds ([^)]*)\)", text)
    assert split == [(str(len(holdout)), str(len(RUNS)), _and_list(rounds))], split
    assert text.splitlines()[2].startswith(f"{len(RUNS)} metric logs"), "the first line"
    # Every held-back round has its paragraph, which counts at least the runs still held
    # back (a run that left the held-back split keeps no round).
    for r in rounds:
        added = re.search(rf"^- round {r}: (\d+) runs ", text, re.M)
        assert added, f"README has no paragraph for round {r}"
        assert int(added.group(1)) >= sum(LABELS[n]["round"] == r for n in holdout)


@pytest.mark.parametrize("name", RUNS)
def test_source_and_label(name: str) -> None:
    source = json.loads((CORPUS / name / "source.json").read_text(encoding="utf-8"))
    label = LABELS[name]
    assert re.fullmatch(r"[\w.-]+/[\w.-]+", source["repo"])
    if source["commit"] is None:  # a log pasted into an issue: cited by repository and issue
        assert re.fullmatch(r"issues/\d+", source["path"])
    else:
        assert re.fullmatch(r"[0-9a-f]{40}", source["commit"])
    assert source["method"] == label["method"] in METHODS
    assert source["file"] == label["file"] and (CORPUS / name / label["file"]).is_file()
    assert source["trimmed"] and source["description"]
    assert label["split"] in ("train", "holdout")
    assert (label["label"] == "healthy") == (label["onset_step"] is None)
    assert re.search(r"\d", label["evidence"])  # the numbers a reader sees
    text = (CORPUS / name / "source.json").read_text(encoding="utf-8")
    assert "://" not in text and "www." not in text


@pytest.fixture(scope="session")
def index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Engine]]:
    """The index every import of this process goes into (`--db`), and an engine on it to
    read them back. Each import writes its run into a runs folder of its own, so it
    indexes that run alone and the test reads back that run exactly; none makes an index
    (a fifth of an import), nor opens another engine to read it."""
    path = tmp_path_factory.mktemp("corpus-index") / "index.db"
    engine = open_engine(path)
    yield path, engine
    engine.dispose()


@pytest.mark.parametrize("name", RUNS)
def test_imports_into_an_index(tmp_path: Path, index: tuple[Path, Engine], name: str) -> None:
    label = LABELS[name]
    src = CORPUS / name / label["file"]
    imported = read_source(src)
    db, engine = index
    res = CliRunner().invoke(app, ["import", str(src), "--dir", str(tmp_path), "--db", str(db),
                                   "--name", name, "--method", IMPORT_METHOD[label["method"]],
                                   "-o", "json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["steps"] == len({r["step"] for r in imported.records}) > 0
    with engine.begin() as conn:
        run = q.resolve_run(conn, name)
        rows = q.history(conn, run.pk)
    assert (run.run_id, run.dir) == (out["run_id"], str(tmp_path / name))
    assert run.method == IMPORT_METHOD[label["method"]]
    assert [r.step for r in rows] == sorted({r["step"] for r in imported.records})
    # Every onset, main and secondary, is one of the log's steps as imported (the scorer
    # reads it as an int: an epoch left as 0.05 would silently score as row 0).
    steps = [r.step for r in rows]
    onsets = [label["onset_step"]] + [x["onset_step"] for x in label.get("secondary", [])]
    for onset in (o for o in onsets if o is not None):
        assert isinstance(onset, int) and onset in steps, onset
    if "onset_axis" in label:  # a log with no step column: its rows are its steps
        assert steps == list(range(len(rows)))
        with src.open(encoding="utf-8", newline="") as f:
            table = list(csv.DictReader(f))
        named = set()
        for given, column, row in re.findall(r"([\d.]+) on its (\w+) column is row (\d+)",
                                             label["onset_axis"]):
            values = [float(t[column]) for t in table]
            # the first row at or past the value the reader gave
            assert int(row) == next(i for i, v in enumerate(values) if v >= float(given))
            named.add(int(row))
        assert named and {o for o in onsets if o is not None} <= named
