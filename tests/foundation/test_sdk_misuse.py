"""SDK calls a trial found too lenient: set_manifest_fields() rewrote the fields the run
format owns (a new run_id left the index with a ghost run stuck RUNNING), set_phase()
wrote FAILED mid-loop (so `runs wait --exit-status` failed a run that then succeeded),
fail() recorded a reason of several lines, and log_samples() of the wrong shape raised
"dictionary update sequence element #0 has length 1; 2 is required"."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

import runwatch
from runwatch.rundir import format as fmt
from tests.support.cli import cli_here, run_cli

DOCS = Path(__file__).resolve().parents[2] / "docs"


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _manifest_table_fields() -> set[str]:
    """The fields the manifest.json table of docs/run-format.md names."""
    text = (DOCS / "run-format.md").read_text()
    table = text.split("### manifest.json", 1)[1].split("###", 1)[0]
    return {name for row in table.splitlines() if row.startswith("| `")
            for name in re.findall(r"`([a-z_]+)`", row.split("|")[1])}


def test_every_manifest_field_of_the_format_but_wandb_url_is_refused(runs_dir: Path) -> None:
    documented = _manifest_table_fields()
    assert {"schema_version", "run_id", "name", "project", "created_at", "host",
            "pid", "wandb_url"} <= documented
    assert documented - {"wandb_url"} == set(fmt.MANIFEST_OWNED)
    with runwatch.init(name="ident", project="p", dir=runs_dir) as run:
        run.log({"loss": 1.0}, step=0)
        for field in sorted(fmt.MANIFEST_OWNED):
            with pytest.raises(ValueError, match=f"set_manifest_fields\\(\\): '{field}' is a "
                               "manifest field the run format owns"):
                run.set_manifest_fields(**{field: "x", "wandb_url": "not written"})
        with pytest.raises(ValueError, match=r"give it to runwatch\.init\(\)"):
            run.set_manifest_fields(name="renamed")
        run.set_manifest_fields(wandb_url="https://example.invalid/r", notes="mine")
        run.log({"loss": 0.5}, step=1)
    manifest = json.loads((runs_dir / "ident" / fmt.MANIFEST).read_text())
    assert manifest["name"] == "ident" and manifest["project"] == "p"
    assert manifest["wandb_url"] == "https://example.invalid/r" and manifest["notes"] == "mine"
    listed = json.loads(run_cli("runs", "list", "--dir", str(runs_dir), "-o", "json").stdout)
    assert [(r["name"], r["status"]) for r in listed] == [("ident", "SUCCEEDED")]


@pytest.mark.parametrize(("phase", "says"), [
    ("FAILED", "call fail(reason)"),
    ("SUCCEEDED", "call finish()"),
    ("CANCELLED", "call finish('CANCELLED')"),
    ("CANCEL_REQUESTED", "run.request_stop()"),
    ("QUEUED", "a live run goes back to PREPARING or RUNNING"),
])
def test_set_phase_refuses_the_phases_that_end_or_restart_a_run(
        runs_dir: Path, phase: str, says: str) -> None:
    with runwatch.init(name="loop", dir=runs_dir, phase="QUEUED") as run:
        run.set_phase("PREPARING", stage="tokenizing", done=1, total=2)
        run.set_phase("RUNNING")
        with pytest.raises(ValueError, match=f"set_phase\\(\\): {phase} ") as refused:
            run.set_phase(phase)
        assert says in str(refused.value)
        run.set_phase("PREPARING", stage="evaluating")  # what set_phase is for goes on
        run.set_phase("RUNNING")
        run.log({"loss": 1.0}, step=0)
    events = _lines(runs_dir / "loop" / fmt.EVENTS)
    assert [e["phase"] for e in events] == ["QUEUED", "PREPARING", "RUNNING", "PREPARING",
                                           "RUNNING", "SUCCEEDED"]
    waited = cli_here("runs", "wait", "loop", "--dir", str(runs_dir), "--exit-status",
                      "--timeout", "60")
    assert waited.returncode == 0 and "SUCCEEDED" in waited.stdout


def test_a_reason_of_several_lines_is_recorded_on_one_line_and_logged_whole(
        runs_dir: Path) -> None:
    run = runwatch.init(name="why", dir=runs_dir)
    run.log({"loss": 1.0}, step=0)
    run.fail("first line\nsecond line\n")
    end = _lines(runs_dir / "why" / fmt.EVENTS)[-1]
    assert (end["phase"], end["reason"]) == ("FAILED", "first line second line")
    logged = [r for r in _lines(runs_dir / "why" / fmt.LOGS)
              if "first line\nsecond line" in r["message"]]
    assert [r["level"] for r in logged] == ["error"]
    shown = json.loads(run_cli("runs", "get", "why", "--dir", str(runs_dir),
                               "-o", "json").stdout)
    assert shown["run"]["reason"] == "first line second line"


def test_a_one_line_reason_is_recorded_as_given_and_not_logged(runs_dir: Path) -> None:
    run = runwatch.init(name="plain", dir=runs_dir)
    run.fail("the data ran out")
    assert _lines(runs_dir / "plain" / fmt.EVENTS)[-1]["reason"] == "the data ran out"
    assert not (runs_dir / "plain" / fmt.LOGS).exists() or \
        _lines(runs_dir / "plain" / fmt.LOGS) == []


@pytest.mark.parametrize(("samples", "says"), [
    (["a string"], "its sample 0 is str, not dict"),
    ({"prompt": "p", "completion": "c"}, "got one dict: put the sample in a list"),
    ("prompt", "got str"),
    (5, "got int"),
    ([{"prompt": "p"}, 0.5], "its sample 1 is float, not dict"),
])
def test_log_samples_of_another_shape_says_the_shape_it_takes(
        runs_dir: Path, samples: Any, says: str) -> None:
    with runwatch.init(name="shape", dir=runs_dir) as run:
        with pytest.raises(ValueError) as refused:
            run.log_samples(0, samples)
        assert str(refused.value).startswith("log_samples() takes a list of samples, each "
                                             "a dict of its fields")
        assert says in str(refused.value)
        run.log_samples(1, [{"prompt": "p", "reward": 1.0}])
    assert not (runs_dir / "shape" / fmt.sample_file_name(0, "train")).exists()
    kept = json.loads((runs_dir / "shape" / fmt.sample_file_name(1, "train")).read_text())
    assert kept["samples"] == [{"prompt": "p", "reward": 1.0}]
