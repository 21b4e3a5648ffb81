"""A command that takes its runs folder as its argument DIR (`runwatch resources`, `runwatch
index`) says so where it points to the folder: its hint for a folder that is not one, its
refusal of --server beside a folder, and its --server help never name a --dir it does not
have.

Found in a trial (trial35, defect 8): `runwatch resources no-such-folder` said "pass --dir
DIR", and `--dir` is no option of `resources`; its --server help said "unless --dir or
--db is given".
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli import cli_here


@pytest.mark.parametrize("command", ["resources", "index"])
def test_a_folder_that_is_not_one_is_named_as_the_argument_it_was_given_as(
        command: str, tmp_path: Path) -> None:
    missing = tmp_path / "no-such-folder"
    res = cli_here(command, str(missing), check=False)
    said = res.stdout + res.stderr
    assert res.returncode == 2, said
    assert f"{missing} is not a folder of runs" in said, said
    assert "give as DIR the folder" in said and "--dir" not in said, said
    # the option it does not have is refused, as the hint no longer suggests it
    assert cli_here(command, "--dir", str(tmp_path), check=False).returncode == 2


def test_resources_server_option_and_its_refusal_name_dir_as_its_argument(
        tmp_path: Path) -> None:
    help_text = " ".join(cli_here("resources", "--help", env={"COLUMNS": "200"}).stdout.split())
    assert "unless DIR or --db is given" in help_text, help_text
    assert "--dir" not in help_text, help_text
    res = cli_here("resources", str(tmp_path), "--server", "http://127.0.0.1:9", check=False)
    said = res.stdout + res.stderr
    assert res.returncode == 2, said
    assert "--server reads a team server and DIR/--db a local index" in said, said
