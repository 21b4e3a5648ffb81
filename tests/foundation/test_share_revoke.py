"""`runwatch runs share --revoke` revokes only what its runs folder issued: a trial's
mistyped id was "revoked" (exit 0, appended to .runwatch/share-revoked) while the real
link kept working, and revoking twice wrote the id twice. Links are stateless (signed,
not stored), so `runs share` now lists the shares it issues; a link is checked by its
signature, an id by that list."""

from __future__ import annotations

import json
import time
from pathlib import Path

import runwatch
from runwatch.server import share
from tests.support.cli import cli_here, run_cli


def _shared(runs: Path, *, real_process: bool = False) -> dict[str, str]:
    """A new link to run `s` of `runs` (made first if need be), as `runs share` prints it:
    in this process, or (`real_process`) as a real `runwatch` process."""
    if not (runs / "s").exists():
        runwatch.init(name="s", dir=runs).finish()
    run = run_cli if real_process else cli_here
    return json.loads(run("runs", "share", "s", "--dir", str(runs), "-o", "json").stdout)


def _revoke(runs: Path, link_or_id: str) -> tuple[int, str]:
    said = cli_here("runs", "share", "--dir", str(runs), "--revoke", link_or_id, check=False)
    return said.returncode, " ".join((said.stdout + said.stderr).split())


def _revoked_lines(runs: Path) -> list[str]:
    path = runs / share.REVOKED_FILE
    return path.read_text().splitlines() if path.exists() else []


def test_an_id_never_issued_is_refused_and_nothing_is_written(runs_dir: Path) -> None:
    runwatch.init(name="s", dir=runs_dir).finish()
    code, said = _revoke(runs_dir, "typo-id-123")  # no link was ever made here
    assert code == 2 and "no share link with id 'typo-id-123' was issued from" in said
    made = _shared(runs_dir, real_process=True)
    code, said = _revoke(runs_dir, "typo-id-123")
    assert code == 2 and "nothing was revoked" in said
    assert _revoked_lines(runs_dir) == []
    key = share.secret(runs_dir)
    assert key is not None
    credential = made["link"].rsplit("/", 1)[1]
    share.verify(key, credential, share.revoked_ids(runs_dir))  # the link still works


def test_an_issued_id_is_revoked_once_however_often_it_is_asked(runs_dir: Path) -> None:
    made = _shared(runs_dir)
    assert _revoke(runs_dir, made["id"]) == (
        0, f"revoked share {made['id']}: its link is refused from the next request on")
    code, said = _revoke(runs_dir, made["id"])
    assert code == 0 and "was revoked already" in said
    code, said = _revoke(runs_dir, made["link"])
    assert code == 0 and "was revoked already" in said
    assert _revoked_lines(runs_dir) == [made["id"]]


def test_a_link_another_folder_signed_is_refused(tmp_path: Path) -> None:
    here, there = tmp_path / "here", tmp_path / "there"
    _shared(here)
    theirs = _shared(there)
    code, said = _revoke(here, theirs["link"])
    assert code == 2 and "this link was not issued from" in said
    assert _revoked_lines(here) == []
    mine = _shared(here)
    assert _revoke(here, mine["link"])[0] == 0 and _revoked_lines(here) == [mine["id"]]


def test_a_folder_with_links_from_before_the_list_revokes_an_id_saying_it_is_unconfirmed(
        runs_dir: Path) -> None:
    """A key that signed links before `runs share` listed them: an id not on the list may
    be a real link's, which must stay revocable by its id."""
    # as an earlier runwatch made it: the folder's key signed it, and no list holds it
    assert share.secret(runs_dir, create=True) is not None
    old = share.Share("unlisted-id1", "0" * 32, int(time.time()) + 3600)
    _shared(runs_dir)
    code, said = _revoke(runs_dir, old.share_id)
    assert code == 0 and f"revoked share {old.share_id}" in said
    assert "cannot confirm that it issued this id" in said
    assert _revoked_lines(runs_dir) == [old.share_id]


def test_share_takes_jq_as_the_other_runs_commands_do(runs_dir: Path) -> None:
    made = _shared(runs_dir)
    said = cli_here("runs", "share", "--dir", str(runs_dir), "--revoke", made["id"],
                    "--jq", ".revoked", "-r")
    assert said.stdout == f"{made['id']}\n"
