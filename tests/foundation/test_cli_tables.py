"""The CLI's tables read well at 80 columns: no word is broken mid-token (a cell is cut with
an ellipsis, prose wraps at spaces, low-priority columns are left out and -o wide shows
them); `runs health` shows the advice; `--jq -r`; `runs metrics -o csv`; and a read
command where no runs folder exists says so and makes nothing.

The commands run in process through typer's runner (a subprocess costs a second each);
one test runs the real subprocess."""

from __future__ import annotations

import csv
import io
import math
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from runwatch.cli.main import app
from tests.support import run_cli, sdk_run

LONG_MODEL = "meta-llama/Llama-3.1-8B-Instruct-distilled-from-a-much-larger-teacher-model"
LONG_NAME = "sft-learning-rate-sweep-arm-with-a-long-descriptive-name-0003"
# Every metric `runs metrics` shows by default, so that 80 columns cannot hold them all.
ROLES = {"loss": 2.0, "val/loss": 2.1, "accuracy": 0.5, "val/accuracy": 0.4,
         "learning_rate": 1e-3, "grad_norm": 1.0, "grad_clip_factor": 1.0,
         "adapter_norm": 12.5, "update_ratio": 1e-3}
BOX = "│┃━╇─┼"


def cli(*args: str, columns: int = 80) -> Result:
    return CliRunner().invoke(app, list(args), env={"COLUMNS": str(columns)})


def _ok(res: Result) -> str:
    assert res.exit_code == 0, res.output
    return res.stdout


def _whole_words(out: str, values: list[str]) -> None:
    """Each word of the output is a word of the data (or headers), whole, or the start of
    one cut with an ellipsis: no word was broken across lines."""
    known = {w for v in values for w in v.split()}
    for token in re.split(rf"[\s{BOX}]+", out):
        if not token or token in known or token.strip("-–") == "":
            continue
        assert token.endswith("…") and any(w.startswith(token[:-1]) for w in known), (
            token, out)


@pytest.fixture
def wide_runs(runs_dir: Path) -> Path:
    ids = [sdk_run(runs_dir, LONG_NAME, steps=5, metrics=lambda i: dict(ROLES),
                   base_model=LONG_MODEL, dataset="a-data-set-with-a-long-name-too"),
           sdk_run(runs_dir, "short", steps=3)]
    (runs_dir / "ids").write_text(" ".join(i[:8] for i in ids))
    return runs_dir


def test_run_list_fits_80_columns_and_wide_shows_every_column(wide_runs: Path) -> None:
    out = _ok(cli("runs", "list", "--dir", str(wide_runs)))
    assert max(len(line) for line in out.splitlines()) <= 80, out
    _whole_words(out, [LONG_NAME, LONG_MODEL, "short", "tiny-gpt", "NAME ID STATUS METHOD "
                       "MODEL STEP DURATION SUCCEEDED sft 4 2 -o wide adds , 0s",
                       (wide_runs / "ids").read_text()])
    assert LONG_NAME[:16] in out and LONG_MODEL[:16] in out and "…" in out, (
        "the long name and model are cut with an ellipsis, not folded")
    wide = _ok(cli("runs", "list", "--dir", str(wide_runs), "-o", "wide"))
    assert LONG_NAME in wide and LONG_MODEL in wide
    header = wide.splitlines()[0]
    assert all(c in header for c in ("PROJECT", "DATASET", "TRAINER", "REASON", "DURATION"))


def test_metrics_leave_out_columns_at_80_and_wide_shows_all(wide_runs: Path) -> None:
    out = _ok(cli("runs", "metrics", LONG_NAME[:12], "--dir", str(wide_runs)))
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 80, out
    header = lines[0].split()
    assert "loss" in header and "update_ratio" not in header, "the last roles go first"
    assert any(line.startswith("-o wide adds update_ratio") for line in lines), out
    wide = _ok(cli("runs", "metrics", LONG_NAME[:12], "--dir", str(wide_runs), "-o", "wide"))
    assert all(key in wide.splitlines()[0] for key in ROLES)


def test_health_shows_the_advice_of_every_finding(runs_dir: Path) -> None:
    # a spike that has passed: its finding is resolved, and its advice still shown
    sdk_run(runs_dir, "spiky", steps=80,
            metrics=lambda i: {"loss": 2.0, "grad_norm": 50.0 if i == 35 else 1.0})
    out = _ok(cli("runs", "health", "spiky", "--dir", str(runs_dir)))
    assert "resolved" in out and "optim.grad_norm_spike" in out
    advice = "Read the batch at that step for bad rows"
    finding = " ".join(line.rsplit("│", 1)[1].strip() for line in out.splitlines()
                       if "│" in line)
    assert advice in finding, out
    assert max(len(line) for line in out.splitlines()) <= 80, out
    wide = _ok(cli("runs", "health", "spiky", "--dir", str(runs_dir), "-o", "wide"))
    assert "ADVICE" in wide.splitlines()[1]


def test_jq_raw_output_writes_strings_bare(wide_runs: Path) -> None:
    out = _ok(cli("runs", "list", "--dir", str(wide_runs), "--jq", ".[].name", "-r"))
    assert out.splitlines() == ["short", LONG_NAME]
    quoted = _ok(cli("runs", "list", "--dir", str(wide_runs), "--jq", ".[].name"))
    assert quoted.splitlines() == ['"short"', f'"{LONG_NAME}"']
    numbers = _ok(cli("runs", "get", "short", "--dir", str(wide_runs), "--jq",
                      ".state.observed_step", "-r"))
    assert numbers.strip() == "2", "a number is written as jq -r writes it"
    bare = cli("runs", "list", "--dir", str(wide_runs), "-r")
    assert bare.exit_code == 2 and "give --jq EXPR too" in bare.stderr


def test_metrics_as_csv(runs_dir: Path) -> None:
    def metrics(i: int) -> dict[str, float]:
        m = {"loss": 2.0 - i / 10, "learning_rate": 1e-3}
        if i == 2:
            m["val/loss"] = math.nan
        return m

    sdk_run(runs_dir, "csvrun", steps=4, metrics=metrics)
    out = _ok(cli("runs", "metrics", "csvrun", "--dir", str(runs_dir), "-o", "csv"))
    rows = list(csv.reader(io.StringIO(out)))
    assert rows[0] == ["step", "ts", "learning_rate", "loss", "val/loss"]
    assert [r[0] for r in rows[1:]] == ["0", "1", "2", "3"], "every step, not --limit's"
    assert [float(r[3]) for r in rows[1:]] == [2.0, 1.9, 1.8, 1.7]
    assert rows[1][4] == "" and rows[3][4] == "nan", "a step with no value is empty"
    assert all(float(r[1]) > 1e9 for r in rows[1:])
    only = _ok(cli("runs", "metrics", "csvrun", "--dir", str(runs_dir), "-o", "csv",
                   "--key", "loss", "--steps", "1:2"))
    assert list(csv.reader(io.StringIO(only)))[1:] == [
        ["1", rows[2][1], "1.9"], ["2", rows[3][1], "1.8"]]


def test_a_read_command_without_a_runs_folder_makes_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    proc = run_cli("runs", "list", cwd=empty, check=False)
    assert proc.returncode == 2 and "there is no runs folder here" in proc.stderr
    monkeypatch.chdir(empty)
    for args in (["runs", "get", "x"], ["runs", "metrics", "x"], ["runs", "logs", "x"],
                 ["runs", "health", "x"], ["runs", "hparams", "x"], ["runs", "compare", "x", "y"]):
        res = cli(*args)
        assert res.exit_code == 2 and "there is no runs folder here" in res.stderr, args
    assert list(empty.iterdir()) == [], "no runs/.runwatch/index.db was made"
    index = tmp_path / "nothere.db"
    res = cli("runs", "list", "--db", str(index))
    assert res.exit_code == 2 and "there is no index at" in res.stderr
    assert not index.exists()


def test_durations_round_to_the_nearest_second_as_the_web_app_does() -> None:
    # a run of 0.98 s read "0s" in the CLI and "1s" on the page
    from runwatch.cli.output import fmt_duration

    assert [fmt_duration(s) for s in (0.98, 0.4, 59.6, 3599.5, 7260.0)] == [
        "1s", "0s", "1m00s", "1h00m", "2h01m"]
    assert fmt_duration(None) == fmt_duration(math.nan) == fmt_duration(math.inf) == "-"
