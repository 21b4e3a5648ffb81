"""Rows the recipes refuse: the run fails before training, with a reason naming the row."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runwatch.recipes import dpo, sft

from .conftest import common, events, final_event

GOOD = {"messages": [{"role": "user", "content": "1+1"}, {"role": "assistant", "content": "2"}]}
CASES = {
    "ends-with-user": ({"messages": [{"role": "user", "content": "1+1"},
                                     {"role": "assistant", "content": "2"},
                                     {"role": "user", "content": "and 2+2?"}]},
                       "ends with a user message"),
    "no-assistant": ({"messages": [{"role": "system", "content": "add"},
                                   {"role": "user", "content": "1+1"}]},
                     "has no assistant message"),
    "malformed": ({"messages": [{"role": "user", "text": "1+1"}]}, "is malformed"),
}


def write_rows(path: Path, rows: list[object]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.mark.parametrize("case", sorted(CASES))
def test_sft_refuses_the_row_before_training(tmp_path: Path, case: str) -> None:
    bad, words = CASES[case]
    data = write_rows(tmp_path / "rows.jsonl", [GOOD, GOOD, bad, GOOD])
    code = sft.main([*common(tmp_path, case), f"data_path={data}", "max_steps=2"])
    assert code == 1
    run = tmp_path / "runs" / case
    end = final_event(run)
    assert end["phase"] == "FAILED"
    assert end["reason"].startswith("row 3 ") and words in end["reason"]
    phases = [e["phase"] for e in events(run)]
    assert "RUNNING" not in phases
    assert not (run / "metrics.jsonl").exists(), "no metric is logged before the refusal"


def test_a_line_that_is_not_json_is_refused_by_number(tmp_path: Path) -> None:
    data = tmp_path / "rows.jsonl"
    data.write_text(json.dumps(GOOD) + "\n{not json\n")
    assert sft.main([*common(tmp_path, "badjson"), f"data_path={data}"]) == 1
    reason = final_event(tmp_path / "runs" / "badjson")["reason"]
    assert reason.startswith("row 2 ") and "not valid JSON" in reason


def test_dpo_refuses_a_pair_without_a_rejected_reply(tmp_path: Path) -> None:
    good = {"prompt": [{"role": "user", "content": "1+1"}], "chosen": "2", "rejected": "3"}
    data = write_rows(tmp_path / "pairs.jsonl", [good, {"prompt": good["prompt"],
                                                        "chosen": "2"}])
    assert dpo.main([*common(tmp_path, "pairs"), f"data_path={data}"]) == 1
    end = final_event(tmp_path / "runs" / "pairs")
    assert end["phase"] == "FAILED" and end["reason"].startswith("row 2 ")


@pytest.mark.parametrize(("recipe", "setting"), [(sft, "data_path"), (dpo, "data_path"),
                                                 (sft, "val_data_path")])
def test_a_data_file_that_cannot_be_read_is_refused_naming_it(
        tmp_path: Path, recipe: object, setting: str) -> None:
    """A typo in data_path failed the run with the generic `failed` ("nothing reported what
    went wrong") and was retried to no end (found in a trial)."""
    missing = tmp_path / "nope.jsonl"
    given = [f"{setting}={missing}"]
    if setting == "val_data_path":
        given.append(f"data_path={write_rows(tmp_path / 'rows.jsonl', [GOOD, GOOD])}")
    assert recipe.main([*common(tmp_path, "missing"), *given]) == 1  # type: ignore[attr-defined]
    end = final_event(tmp_path / "runs" / "missing")
    assert (end["phase"], end["code"]) == ("FAILED", "refused")
    assert end["reason"] == (f"{setting} {missing} cannot be read (No such file or directory); "
                             "give a JSONL file of rows (one JSON object per line)")
